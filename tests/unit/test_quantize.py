"""The int8 pipeline: calibration inputs, 2-D rewrite, QDQ quantization, quality gate, bundle.

Fast tests use a tiny generated voice with Piper's structure (tests/quant_voice.py); one
``voice`` test quantizes the real en_US-joe-medium voice with a handful of sentences.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from agent.cli import main as cli_main
from agent.hardware.runtime import RuntimeOptions
from agent.quantize.errors import QuantizeError
from agent.quantize.gate import (
    DEFAULT_BOUNDS,
    QualityBounds,
    QualityGateError,
    check_quality,
    measure_quality,
)
from agent.quantize.int8_bundle import build_int8_bundle
from agent.quantize.layout import convs_as_2d
from agent.quantize.polyphase import upsamplers_as_convs
from agent.quantize.quality import mel_distance_db, spectral_snr_db
from agent.quantize.recipe import DEFAULT_RECIPE, quantize_model
from agent.quantize.sentences import (
    CalibrationReader,
    packaged_corpus,
    read_sentences,
    sentence_feeds,
    sentences_sha256,
)
from agent.quantize.time_rows import fold_time_into_rows
from agent.text.frontend import Frontend
from agent.voice.bundle import read_manifest, sha256_file, verify_bundle
from agent.voice.onnx_session import create_session
from agent.voice.options import VoiceOptions
from agent.voice.voice import SynthesisParams, Voice, VoiceConfig
from tests.support import REPO, quant_voice

CALIBRATION = ["Welcome aboard the evening service.", "Is this seat taken? No, go ahead.",
               "Tickets are sold at the green machines."]
HELDOUT = ["The ferry leaves at noon.", "Please mind the step."]
DETERMINISTIC = (0.0, 1.0, 0.0)


@pytest.fixture()
def conv_voice(tmp_path: Path) -> Path:
    """A private bundle of the tiny Piper-structured voice; returns its fp32 model path."""
    bundle = quant_voice.build_bundle(tmp_path / "models")
    return bundle / f"{quant_voice.VOICE}.onnx"


def _frontend(model: Path) -> tuple[Frontend, VoiceConfig]:
    config = VoiceConfig.from_file(model.with_name(model.name + ".json"))
    return Frontend(config.espeak_voice, config.phoneme_id_map), config


Run = Callable[[dict[str, np.ndarray]], np.ndarray]


def _runner(model: Path) -> Run:
    session, _ = create_session(model, RuntimeOptions())
    return lambda feeds: np.asarray(session.run(None, feeds)[0])


# --- calibration inputs ------------------------------------------------------------------


def test_calibration_reader_feeds_the_frontends_phoneme_ids(conv_voice: Path) -> None:
    frontend, config = _frontend(conv_voice)
    scales = (config.noise_scale, config.length_scale, config.noise_w)
    feeds = sentence_feeds(frontend, CALIBRATION, scales)
    expected = [frontend.ids(s) for text in CALIBRATION for s in frontend.sentences(text)]
    assert len(feeds) == len(expected) >= len(CALIBRATION)

    reader = CalibrationReader([f for _, f in feeds])
    handed = []
    while (item := reader.get_next()) is not None:
        handed.append(item)
    assert reader.get_next() is None
    assert len(handed) == len(expected) == len(reader)
    for item, ids in zip(handed, expected, strict=True):
        assert set(item) == {"input", "input_lengths", "scales"}
        assert item["input"].dtype == np.int64 and item["input"].shape == (1, len(ids))
        assert item["input"][0].tolist() == ids
        assert item["input_lengths"].dtype == np.int64
        assert item["input_lengths"].tolist() == [len(ids)]
        assert item["scales"].dtype == np.float32
        assert item["scales"].tolist() == pytest.approx(list(scales))
    reader.rewind()
    assert reader.get_next() is handed[0]
    chunks = list(reader.chunks(2))
    assert [len(c) for c in chunks] == [2] * (len(handed) // 2) + [1] * (len(handed) % 2)


def test_calibration_inputs_are_accepted_by_the_model(conv_voice: Path) -> None:
    frontend, _ = _frontend(conv_voice)
    session, _ = create_session(conv_voice, RuntimeOptions())
    names = {i.name for i in session.get_inputs()}
    for _, feeds in sentence_feeds(frontend, CALIBRATION, DETERMINISTIC):
        assert set(feeds) == names
        audio = session.run(None, feeds)[0]
        assert audio.size == feeds["input"].shape[1] * 32  # hop of the tiny voice


def test_empty_calibration_is_refused() -> None:
    with pytest.raises(QuantizeError):
        CalibrationReader([])


def test_read_sentences_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.txt"
    path.write_text("# comment\n\n  One.  \nTwo?\n   # also a comment\n", encoding="utf-8")
    assert read_sentences(path) == ["One.", "Two?"]
    path.write_text("# only comments\n", encoding="utf-8")
    with pytest.raises(QuantizeError, match="no sentences"):
        read_sentences(path)
    path.write_bytes(b"x" * (2 << 20))
    with pytest.raises(QuantizeError, match="larger"):
        read_sentences(path)
    with pytest.raises(QuantizeError, match="cannot read"):
        read_sentences(tmp_path / "missing.txt")


def test_sentence_hash_names_the_set() -> None:
    assert sentences_sha256(["a", "b"]) == sentences_sha256(["a", "b"])
    assert sentences_sha256(["a", "b"]) != sentences_sha256(["b", "a"])


# --- layout rewrite and quantization -----------------------------------------------------


def test_decoder_rewritten_as_2d_computes_the_same(conv_voice: Path, tmp_path: Path) -> None:
    model = onnx.load(str(conv_voice))
    assert convs_as_2d(model, "/dec/") == 4
    onnx.checker.check_model(model)
    weights = {i.name: i for i in model.graph.initializer}
    assert list(weights["rb.w"].dims) == [8, 8, 1, 3]
    rewritten = tmp_path / "2d.onnx"
    onnx.save(model, str(rewritten))
    frontend, _ = _frontend(conv_voice)
    before, after = _runner(conv_voice), _runner(rewritten)
    for _, feeds in sentence_feeds(frontend, HELDOUT, DETERMINISTIC):
        a, b = before(feeds), after(feeds)
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_rewrite_leaves_a_block_it_cannot_handle_alone(conv_voice: Path) -> None:
    model = onnx.load(str(conv_voice))
    original = model.SerializeToString()
    assert convs_as_2d(model, "/enc_p/") == 0  # Gather, MatMul, Transpose: not rewritable
    assert convs_as_2d(model, "/nothing/") == 0
    assert model.SerializeToString() == original


def _same_output(original: Path, model: onnx.ModelProto, tmp_path: Path) -> None:
    rewritten = tmp_path / "rewritten.onnx"
    onnx.save(model, str(rewritten))
    frontend, _ = _frontend(original)
    before, after = _runner(original), _runner(rewritten)
    texts = [*HELDOUT, "A much longer sentence, so that the time axis is cut into several "
             "overlapping windows that are joined again without a seam."]
    for _, feeds in sentence_feeds(frontend, texts, DETERMINISTIC):
        a, b = before(feeds), after(feeds)
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_upsampler_as_polyphase_conv_computes_the_same(conv_voice: Path, tmp_path: Path) -> None:
    model = onnx.load(str(conv_voice))
    convs_as_2d(model, "/dec/")
    assert upsamplers_as_convs(model, r"^/dec/ups\.") == 1
    onnx.checker.check_model(model)
    assert "ConvTranspose" not in {n.op_type for n in model.graph.node}
    assert "/dec/ups.0/PolyConv" in {n.name for n in model.graph.node}
    _same_output(conv_voice, model, tmp_path)


@pytest.mark.parametrize("polyphase", [False, True])
def test_time_folded_into_rows_computes_the_same(conv_voice: Path, tmp_path: Path,
                                                 polyphase: bool) -> None:
    model = onnx.load(str(conv_voice))
    convs_as_2d(model, "/dec/")
    # ConvTranspose, the resblock's Conv and conv_post.
    assert fold_time_into_rows(model, r"^/dec/ups\.0/", r"^/dec/Tanh$", 3) == 3
    if polyphase:
        assert upsamplers_as_convs(model, r"^/dec/ups\.") == 1
    onnx.checker.check_model(model)
    _same_output(conv_voice, model, tmp_path)


def test_fold_leaves_a_block_with_another_input_alone(conv_voice: Path) -> None:
    model = onnx.load(str(conv_voice))
    convs_as_2d(model, "/dec/")
    original = model.SerializeToString()
    # The resblock's Add also takes the upsampler's output: that tensor would enter unfolded.
    assert fold_time_into_rows(model, r"^/dec/resblocks\.0/convs", r"^/dec/Tanh$", 2) == 0
    assert fold_time_into_rows(model, r"^/dec/ups\.0/", r"^/nothing$", 2) == 0
    assert fold_time_into_rows(model, r"^/dec/ups\.0/", r"^/dec/Tanh$", 1) == 0
    assert model.SerializeToString() == original


def test_quantize_model_keeps_recipe_nodes_fp32(conv_voice: Path, tmp_path: Path) -> None:
    frontend, _ = _frontend(conv_voice)
    reader = CalibrationReader([f for _, f in sentence_feeds(frontend, CALIBRATION,
                                                              DETERMINISTIC)])
    out = tmp_path / "int8.onnx"
    facts = quantize_model(conv_voice, out, reader, DEFAULT_RECIPE)
    assert facts["convs_rewritten_2d"] == 4
    model = onnx.load(str(out))
    producer = {o: n for n in model.graph.node for o in n.output}

    def quantized(name: str) -> bool:
        node = next(n for n in model.graph.node if n.name == name)
        feeder = producer.get(node.input[0])
        return feeder is not None and feeder.op_type == "DequantizeLinear"

    assert quantized("/flow/flows.0/pre/Conv")
    assert quantized("/dec/conv_pre/Conv")
    assert quantized("/dec/resblocks.0/convs.0/Conv")
    assert not quantized("/enc_p/proj/MatMul")  # the encoder decides durations
    assert not quantized("/dec/conv_post/Conv")  # the final layer stays fp32
    # The upsampler became a polyphase Conv (onnxruntime has no int8 ConvTranspose on CPU).
    assert facts["upsamplers_polyphase"] == 1
    assert "ConvTranspose" not in {n.op_type for n in model.graph.node}
    assert quantized("/dec/ups.0/PolyConv")
    int8_kernels = [i for i in model.graph.initializer
                    if i.data_type == onnx.TensorProto.INT8 and len(i.dims) >= 3]
    assert len(int8_kernels) == 4  # per-channel int8 weights of the four quantized convs


def test_excluded_nodes_follow_patterns() -> None:
    names = ["/enc_p/encoder/Conv", "/dp/flows.3/Conv", "/dec/resblocks.7/convs.0/Conv",
             "/dec/resblocks.4/convs.0/Conv", "/dec/conv_post/Conv", "/flow/flows.0/pre/Conv"]
    assert DEFAULT_RECIPE.excluded_nodes(names) == [
        "/enc_p/encoder/Conv", "/dp/flows.3/Conv", "/dec/resblocks.7/convs.0/Conv",
        "/dec/conv_post/Conv"]


# --- quality gate --------------------------------------------------------------------------


def test_metrics_separate_equal_from_different_audio() -> None:
    rng = np.random.default_rng(1)
    t = np.arange(16000) / 16000
    speech = (np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)
    assert spectral_snr_db(speech, speech) == float("inf")
    assert mel_distance_db(speech, speech, 16000) == 0.0
    noisy = speech + 0.01 * rng.standard_normal(speech.size).astype(np.float32)
    garbage = rng.standard_normal(speech.size).astype(np.float32) * 0.3
    assert spectral_snr_db(speech, noisy) > 20 > spectral_snr_db(speech, garbage)
    assert mel_distance_db(speech, noisy, 16000) < mel_distance_db(speech, garbage, 16000)
    with pytest.raises(ValueError, match="length"):
        spectral_snr_db(speech, speech[:-1])


def test_gate_passes_a_model_against_itself(conv_voice: Path) -> None:
    frontend, _ = _frontend(conv_voice)
    heldout = sentence_feeds(frontend, HELDOUT, DETERMINISTIC)
    run = _runner(conv_voice)
    report = measure_quality(run, run, heldout, quant_voice.SAMPLE_RATE)
    check_quality(report, DEFAULT_BOUNDS)
    assert report.durations_match
    assert report.to_json()["mel_distance_db"]["max"] == 0.0


def test_gate_rejects_changed_durations(conv_voice: Path, tmp_path: Path) -> None:
    slower = quant_voice.build_bundle(tmp_path / "other", hop=48) / f"{quant_voice.VOICE}.onnx"
    frontend, _ = _frontend(conv_voice)
    heldout = sentence_feeds(frontend, HELDOUT, DETERMINISTIC)
    report = measure_quality(_runner(conv_voice), _runner(slower), heldout,
                             quant_voice.SAMPLE_RATE)
    assert not report.durations_match
    with pytest.raises(QualityGateError, match="durations differ on 2 sentence"):
        check_quality(report, QualityBounds(min_spectral_snr_db=-1e9, max_mel_distance_db=1e9))


def test_gate_rejects_corrupted_weights(conv_voice: Path, tmp_path: Path) -> None:
    model = onnx.load(str(conv_voice))
    rng = np.random.default_rng(3)
    for init in model.graph.initializer:
        if init.name in ("pre.w", "rb.w"):
            array = numpy_helper.to_array(init)
            init.CopyFrom(numpy_helper.from_array(
                rng.standard_normal(array.shape).astype(np.float32), init.name))
    corrupted = tmp_path / "corrupted.onnx"
    onnx.save(model, str(corrupted))
    frontend, _ = _frontend(conv_voice)
    heldout = sentence_feeds(frontend, HELDOUT, DETERMINISTIC)
    report = measure_quality(_runner(conv_voice), _runner(corrupted), heldout,
                             quant_voice.SAMPLE_RATE)
    assert report.durations_match  # same length, different sound
    with pytest.raises(QualityGateError, match="spectral SNR below") as caught:
        check_quality(report, DEFAULT_BOUNDS)
    assert caught.value.report is report


def test_gate_rejects_output_above_the_mel_bound(conv_voice: Path) -> None:
    frontend, _ = _frontend(conv_voice)
    heldout = sentence_feeds(frontend, HELDOUT, DETERMINISTIC)
    run = _runner(conv_voice)

    def hissing(feeds: dict[str, np.ndarray]) -> np.ndarray:
        audio = run(feeds)
        hiss = np.random.default_rng(0).standard_normal(audio.shape).astype(np.float32)
        return np.asarray(audio + 0.05 * hiss)

    report = measure_quality(run, hissing, heldout, quant_voice.SAMPLE_RATE)
    with pytest.raises(QualityGateError, match="mel distance above"):
        check_quality(report, QualityBounds(min_spectral_snr_db=-1e9, max_mel_distance_db=0.5))


# --- the bundle ----------------------------------------------------------------------------


def test_bundle_has_both_variants_and_records_the_recipe(conv_voice: Path) -> None:
    bundle_dir = conv_voice.parent
    bundle, report = build_int8_bundle(conv_voice, bundle_dir, calibration=CALIBRATION,
                                       heldout=HELDOUT)
    assert report.durations_match
    assert bundle.dir == bundle_dir.absolute()
    assert set(bundle.variants) == {"fp32", "int8"}
    manifest = read_manifest(bundle_dir)
    assert manifest["variants"] == {"fp32": "conv-test.onnx", "int8": "conv-test.int8.onnx"}
    assert manifest["version"] == "2.0.0"  # carried over from the input's bundle
    assert manifest["source"] == "tests/quant_voice.py"
    record = manifest["quantization"]
    assert record["recipe"] == json.loads(json.dumps(DEFAULT_RECIPE.to_json()))
    assert record["calibration"]["sha256"] == sentences_sha256(CALIBRATION)
    assert record["calibration"]["sentences"] == len(CALIBRATION)
    assert record["heldout"]["sha256"] == sentences_sha256(HELDOUT)
    assert record["quality"]["durations_match"] is True
    assert record["quality"]["sentences"] == len(HELDOUT)
    assert record["quality"]["spectral_snr_db"]["min"] >= DEFAULT_BOUNDS.min_spectral_snr_db
    assert record["bounds"] == DEFAULT_BOUNDS.to_json()
    assert verify_bundle(bundle_dir).sha256["conv-test.int8.onnx"] == sha256_file(
        bundle_dir / "conv-test.int8.onnx")
    assert not [p for p in bundle_dir.parent.iterdir() if p.name.startswith(".")]

    fp32 = Voice.load(bundle_dir, VoiceOptions(variant="fp32"))
    int8 = Voice.load(bundle_dir, VoiceOptions(variant="int8"))
    params = SynthesisParams(noise_scale=0.0, noise_w=0.0)
    a = b"".join(c.audio for c in fp32.synthesize("The ferry leaves at noon.", params))
    b = b"".join(c.audio for c in int8.synthesize("The ferry leaves at noon.", params))
    assert len(a) == len(b) > 0 and a != b


def test_rejected_model_leaves_the_bundle_untouched(conv_voice: Path) -> None:
    bundle_dir = conv_voice.parent
    before = {p.name: p.read_bytes() for p in bundle_dir.iterdir()}
    with pytest.raises(QualityGateError, match="spectral SNR below"):
        build_int8_bundle(conv_voice, bundle_dir, calibration=CALIBRATION, heldout=HELDOUT,
                          bounds=QualityBounds(min_spectral_snr_db=500.0))
    assert {p.name: p.read_bytes() for p in bundle_dir.iterdir()} == before
    assert not [p for p in bundle_dir.parent.iterdir() if p.name.startswith(".")]


def test_overlapping_sentence_sets_are_refused(conv_voice: Path, tmp_path: Path) -> None:
    with pytest.raises(QuantizeError, match="overlap"):
        build_int8_bundle(conv_voice, tmp_path / "out", calibration=CALIBRATION,
                          heldout=[CALIBRATION[0]])
    assert not (tmp_path / "out").exists()


def test_damaged_input_bundle_is_refused(conv_voice: Path, tmp_path: Path) -> None:
    with conv_voice.open("r+b") as handle:
        handle.seek(200)
        handle.write(b"\x00" * 16)
    with pytest.raises(QuantizeError, match="sha256"):
        build_int8_bundle(conv_voice, tmp_path / "out", calibration=CALIBRATION, heldout=HELDOUT)


def test_bad_recipe_is_a_quantize_error(conv_voice: Path, tmp_path: Path) -> None:
    frontend, _ = _frontend(conv_voice)
    reader = CalibrationReader([f for _, f in sentence_feeds(frontend, CALIBRATION,
                                                              DETERMINISTIC)])
    recipe = dataclasses.replace(DEFAULT_RECIPE, activation_type="float3")
    with pytest.raises(QuantizeError, match="float3"):
        quantize_model(conv_voice, tmp_path / "x.onnx", reader, recipe)


def test_cli_writes_the_bundle_and_reports_gate_failures(
    conv_voice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calibration = tmp_path / "cal.txt"
    calibration.write_text("\n".join(CALIBRATION) + "\n", encoding="utf-8")
    heldout = tmp_path / "held.txt"
    heldout.write_text("\n".join(HELDOUT) + "\n", encoding="utf-8")
    out = tmp_path / "built" / quant_voice.VOICE
    args = ["quantize", str(conv_voice), str(out), "--calibration", str(calibration),
            "--heldout", str(heldout)]
    assert cli_main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["variants"] == {"fp32": "conv-test.onnx", "int8": "conv-test.int8.onnx"}
    assert verify_bundle(out).variants.keys() == {"fp32", "int8"}

    assert cli_main([*args, "--min-spectral-snr", "500"]) == 3
    assert "spectral SNR below 500.0 dB" in capsys.readouterr().err
    assert verify_bundle(out).variants.keys() == {"fp32", "int8"}  # the earlier bundle stays


def test_the_shipped_sentence_sets_are_package_data_and_disjoint() -> None:
    calibration = read_sentences(packaged_corpus("calibration"))
    heldout = read_sentences(packaged_corpus("heldout"))
    assert calibration and heldout and not set(calibration) & set(heldout)
    assert not list((REPO / "bench" / "corpus").glob("calibration*"))  # one copy only


def test_cli_calibrates_and_gates_on_the_shipped_sentences_by_default(
    conv_voice: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "built" / quant_voice.VOICE
    assert cli_main(["quantize", str(conv_voice), str(out)]) == 0
    record = read_manifest(out)["quantization"]
    for name, corpus in (("calibration", packaged_corpus("calibration")),
                         ("heldout", packaged_corpus("heldout"))):
        shipped = read_sentences(corpus)
        assert record[name]["sha256"] == sentences_sha256(shipped)
        assert record[name]["sentences"] == len(shipped)

