"""Generate a tiny Piper-compatible ONNX voice for fast unit tests (no downloaded weights).

The model has Piper's signature - inputs ``input`` (int64 [1, N] phoneme ids),
``input_lengths`` (int64 [1]) and ``scales`` (float32 [3]: noise, length, noise_w) - and
outputs ``output`` (float32 [1, 1, N * HOP]): each phoneme id becomes HOP samples of a tone
whose pitch depends on the id, scaled by the length scale. Deterministic and a few KB.

Run as a script to write a bundle: ``python tests/make_tiny_voice.py OUT_DIR``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

VOICE = "tiny-test"
SAMPLE_RATE = 16000
HOP = 64
NUM_SYMBOLS = 256
# Every symbol espeak-ng's en-us IPA output uses, plus Piper's specials and punctuation.
SYMBOLS = (
    "_^$ !'(),-.:;?\""
    "abcdefhijklmnopqrstuvwxyzæçðøħŋœɐɑɒɔəɚɛɜɡɪɫɬɹɾʃʊʌʒʔˈˌːθᵻʲ"
    "\u0303\u0329\u032a\u032f"
)


def phoneme_id_map() -> dict[str, list[int]]:
    return {symbol: [index] for index, symbol in enumerate(SYMBOLS)}


def build_model(path: Path, *, input_name: str = "input", gain: float = 0.5) -> None:
    """Write the ONNX model; ``input_name`` lets tests make a model with the wrong signature."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    t = np.arange(HOP, dtype=np.float32) / SAMPLE_RATE
    freqs = 200.0 + 20.0 * np.arange(NUM_SYMBOLS, dtype=np.float32)
    table = (gain * np.sin(2 * np.pi * freqs[:, None] * t[None, :])).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", input_name], ["frames"], axis=0),
        helper.make_node("Reshape", ["frames", "out_shape"], ["flat"]),
        helper.make_node("Slice", ["scales", "one", "two"], ["length"]),
        helper.make_node("Mul", ["flat", "length"], ["scaled"]),
        helper.make_node("Cast", ["input_lengths"], ["len_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["len_f", "zero"], ["len_zero"]),
        helper.make_node("Add", ["scaled", "len_zero"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_piper",
        inputs=[
            helper.make_tensor_value_info(input_name, TensorProto.INT64, [1, "N"]),
            helper.make_tensor_value_info("input_lengths", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3]),
        ],
        outputs=[helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, "T"])],
        initializer=[
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(np.array([1, 1, -1], dtype=np.int64), "out_shape"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
            numpy_helper.from_array(np.array([2], dtype=np.int64), "two"),
            numpy_helper.from_array(np.array([0.0], dtype=np.float32), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def build_config(path: Path) -> None:
    config = {
        "audio": {"sample_rate": SAMPLE_RATE, "quality": "x_low"},
        "espeak": {"voice": "en-us"},
        "inference": {"noise_scale": 0.667, "length_scale": 1.0, "noise_w": 0.8},
        "phoneme_type": "espeak",
        "num_symbols": NUM_SYMBOLS,
        "num_speakers": 1,
        "speaker_id_map": {},
        "phoneme_id_map": phoneme_id_map(),
    }
    path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")


def build_bundle(models_dir: Path, *, version: str = "1.0.0", input_name: str = "input",
                 gain: float = 0.5, bundle: Path | None = None) -> Path:
    """Write ``models_dir/tiny-test/`` (or ``bundle``): model, config, manifest; returns the
    bundle dir. A different ``gain`` gives a model with different bytes (a "new version")."""
    from agent.voice.bundle import write_manifest

    bundle = bundle or models_dir / VOICE
    bundle.mkdir(parents=True, exist_ok=True)
    build_model(bundle / f"{VOICE}.onnx", input_name=input_name, gain=gain)
    build_config(bundle / f"{VOICE}.onnx.json")
    write_manifest(bundle, voice=VOICE, version=version, sample_rate=SAMPLE_RATE,
                   variants={"fp32": f"{VOICE}.onnx"}, config=f"{VOICE}.onnx.json",
                   source="tests/make_tiny_voice.py")
    return bundle


def copy_in_language(models_dir: Path, voice: str, *, espeak: str, code: str, source: str) -> Path:
    """A copy of the installed tiny voice as ``models_dir/voice/`` that declares another language
    (espeak-ng voice ``espeak``, ``language.code`` ``code`` such as ``de_DE``, its family the part
    before ``_``), as an installed Piper voice of that language does; returns the bundle dir."""
    import shutil

    from agent.voice.bundle import write_manifest

    bundle = models_dir / voice
    shutil.copytree(models_dir / VOICE, bundle)
    config_path = bundle / f"{VOICE}.onnx.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["espeak"] = {"voice": espeak}
    config["language"] = {"code": code, "family": code.split("_", maxsplit=1)[0]}
    config_path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    (bundle / "manifest.json").unlink()
    write_manifest(bundle, voice=voice, version="1.0.0", sample_rate=SAMPLE_RATE,
                   variants={"fp32": f"{VOICE}.onnx"}, config=config_path.name, source=source)
    return bundle


if __name__ == "__main__":
    print(build_bundle(Path(sys.argv[1] if len(sys.argv) > 1 else "models")))
