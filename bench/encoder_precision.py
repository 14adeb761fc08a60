"""Could the shipped int8 voice hold its text encoder in fewer bytes? The quality gate decides.

    .venv/bin/python bench/encoder_precision.py [--threads 2] [--json PATH]

The shipped recipe keeps the text encoder (``/enc_p/``) in fp32: its weights are most of the
model's bytes (and so of the agent's resident memory). This script takes the shipped int8 model
and stores the encoder's Conv/MatMul weights smaller, two ways, computing in fp32 as before:

* **fp16 weights**: each weight tensor in float16 with a ``Cast`` to float32 in front of its
  node;
* **int8 weights only**: each weight tensor in int8 (symmetric, one scale per output channel)
  with a ``DequantizeLinear`` in front of its node; activations stay fp32.

Each candidate then goes through the same test as ``tts-agent quantize``'s quality gate against
the fp32 model on the held-out sentences with noise scales 0: how many sentences change
duration (the gate requires none), and the spectral SNR / mel distance of the others. Printed:
model bytes, encoder weight bytes, and the gate's figures for the shipped model and both
candidates.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from results import Figures, add_json_option, write_result
from workload import BUNDLE, HELDOUT, ROOT, VOICE

sys.path.insert(0, str(ROOT))

ENCODER = re.compile(r"^/enc_p/")


def _encoder_weights(model: Any) -> list[tuple[Any, Any]]:
    """(node, fp32 weight initializer) of every encoder Conv/MatMul with a constant weight."""
    from onnx import TensorProto

    inits = {t.name: t for t in model.graph.initializer}
    found = []
    for node in model.graph.node:
        if (node.op_type in ("Conv", "MatMul") and ENCODER.search(node.name)
                and len(node.input) > 1 and node.input[1] in inits
                and inits[node.input[1]].data_type == TensorProto.FLOAT):
            found.append((node, inits[node.input[1]]))
    return found


def _rewrite(model: Any, convert: Callable[[Any, Any], tuple[list[Any], Any]]) -> int:
    """Replace each encoder weight by what ``convert(node, weight)`` returns: new initializers
    and the node that turns them back into the fp32 weight. Returns the bytes saved."""
    from onnx import numpy_helper

    saved = 0
    inserts: dict[str, Any] = {}
    for node, weight in _encoder_weights(model):
        fp32 = numpy_helper.to_array(weight)
        initializers, producer = convert(node, fp32)
        model.graph.initializer.extend(initializers)
        model.graph.initializer.remove(weight)
        saved += fp32.nbytes - sum(numpy_helper.to_array(t).nbytes for t in initializers)
        node.input[1] = producer.output[0]
        inserts[node.name] = producer
    nodes = []
    for node in model.graph.node:
        if node.name in inserts:
            nodes.append(inserts[node.name])
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return saved


def as_fp16(node: Any, weight: np.ndarray) -> tuple[list[Any], Any]:
    from onnx import TensorProto, helper, numpy_helper

    name = node.name + "/weight_fp16"
    return ([numpy_helper.from_array(weight.astype(np.float16), name)],
            helper.make_node("Cast", [name], [name + "_fp32"], to=TensorProto.FLOAT,
                             name=name + "_cast"))


def as_int8_weights(node: Any, weight: np.ndarray) -> tuple[list[Any], Any]:
    from onnx import helper, numpy_helper

    axis = 0 if node.op_type == "Conv" else 1  # output channels
    others = tuple(i for i in range(weight.ndim) if i != axis)
    scale = (np.abs(weight).max(axis=others) / 127.0).astype(np.float32)
    scale[scale == 0] = 1.0
    shape = [1] * weight.ndim
    shape[axis] = -1
    quantized = np.clip(np.round(weight / scale.reshape(shape)), -127, 127).astype(np.int8)
    name = node.name + "/weight_int8"
    tensors = [numpy_helper.from_array(quantized, name),
               numpy_helper.from_array(scale, name + "_scale"),
               numpy_helper.from_array(np.zeros_like(scale, dtype=np.int8), name + "_zero")]
    return tensors, helper.make_node("DequantizeLinear", [t.name for t in tensors],
                                     [name + "_fp32"], axis=axis, name=name + "_dq")


def gate(fp32: Path, candidate: Path, threads: int) -> dict[str, Any]:
    """The quality gate's measurements (noise 0, held-out sentences) of ``candidate``."""
    from agent.hardware.runtime import RuntimeOptions
    from agent.quantize.gate import measure_quality
    from agent.quantize.sentences import read_sentences, sentence_feeds
    from agent.text.frontend import Frontend
    from agent.voice.onnx_session import create_session
    from agent.voice.voice import VoiceConfig

    config = VoiceConfig.from_file(fp32.with_name(fp32.name + ".json"))
    frontend = Frontend(config.espeak_voice, config.phoneme_id_map)
    heldout = sentence_feeds(frontend, read_sentences(HELDOUT), (0.0, config.length_scale, 0.0))
    runtime = RuntimeOptions(intra_op_threads=threads)
    reference, _ = create_session(fp32, runtime)
    session, _ = create_session(candidate, runtime)
    report = measure_quality(lambda f: reference.run(None, f)[0],
                             lambda f: session.run(None, f)[0], heldout, config.sample_rate)
    summary = report.to_json()
    summary["durations_changed"] = sum(not s.same_duration for s in report.sentences)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    add_json_option(parser, "encoder_precision")
    args = parser.parse_args()
    import onnx

    from agent.logs import configure_logging

    configure_logging("error")
    fp32 = BUNDLE / f"{VOICE}.onnx"
    shipped = BUNDLE / f"{VOICE}.int8.onnx"
    encoder_bytes = sum(np.prod(w.dims) * 4 for _, w in _encoder_weights(onnx.load(shipped)))
    print(f"shipped int8 model {shipped.stat().st_size / 2**20:.1f} MiB, of which fp32 encoder "
          f"Conv/MatMul weights {encoder_bytes / 2**20:.1f} MiB")
    rows = [("shipped (fp32 encoder)", shipped, 0)]
    gates = []
    with tempfile.TemporaryDirectory(prefix="tts-bench-encoder-") as tmp:
        for label, convert in (("encoder weights fp16", as_fp16),
                               ("encoder weights int8, activations fp32", as_int8_weights)):
            model = onnx.load(shipped)
            saved = _rewrite(model, convert)
            path = Path(tmp) / f"{convert.__name__}.onnx"
            onnx.save(model, path)
            rows.append((label, path, saved))
        print(f"\n{'variant':<40} {'saved':>9} {'durations changed':>18} {'SNR min':>8} "
              f"{'mel max':>8}")
        for label, path, saved in rows:
            g = gate(fp32, path, args.threads)
            gates.append((label, saved, g))
            print(f"{label:<40} {saved / 2**20:>5.1f} MiB {g['durations_changed']:>9} of "
                  f"{g['sentences']:<6} {g['spectral_snr_db']['min']:>6} dB "
                  f"{g['mel_distance_db']['max']:>5} dB")
    write_result("encoder_precision",
                 record(shipped.stat().st_size, int(encoder_bytes), gates), args,
                 raw={"model_bytes": shipped.stat().st_size, "encoder_bytes": int(encoder_bytes),
                      "variants": [{"label": label, "saved_bytes": int(saved), "gate": g}
                                   for label, saved, g in gates]})
    return 0


def record(model_bytes: int, encoder_bytes: int,
           gates: list[tuple[str, int, dict[str, Any]]]) -> Figures:
    """The model's sizes and each variant's bytes saved and gate figures, as figures."""
    figures = Figures()
    figures.table("The shipped int8 model", ["size", "MiB"], [
        ["whole model", figures.add("model", model_bytes / 2**20, "MiB",
                                    "size of the shipped int8 .onnx file")],
        ["fp32 encoder Conv/MatMul weights",
         figures.add("encoder_weights", encoder_bytes / 2**20, "MiB",
                     "bytes of the text encoder's fp32 Conv/MatMul weights in it")]])
    rows: list[list[str | None]] = []
    for n, (label, saved, g) in enumerate(gates):
        rows.append([label,
                     figures.add(f"variant_{n}.saved", saved / 2**20, "MiB",
                                 f"{label}: bytes saved against the shipped model"),
                     figures.add(f"variant_{n}.durations_changed", g["durations_changed"], "",
                                 f"{label}: held-out sentences whose duration changed"),
                     figures.add(f"variant_{n}.sentences", g["sentences"], "",
                                 "held-out sentences judged"),
                     figures.add(f"variant_{n}.snr_min", g["spectral_snr_db"]["min"], "dB",
                                 f"{label}: lowest spectral SNR against fp32, noise scales 0"),
                     figures.add(f"variant_{n}.mel_max", g["mel_distance_db"]["max"], "dB",
                                 f"{label}: largest log-mel distance from fp32, noise scales 0")])
    figures.table("The quality gate against fp32 (held-out sentences, noise scales 0)",
                  ["variant", "saved", "durations changed", "sentences", "SNR min", "mel max"],
                  rows)
    return figures


if __name__ == "__main__":
    sys.exit(main())
