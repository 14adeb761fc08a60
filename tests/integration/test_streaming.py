"""Streaming a sentence's decoder in windows: the plan, the exact padding, the gain, the split.

Pure parts (window plan, padding search, gain) run on numpy stand-ins for a decoder. The split
and the streamed voice run on the tiny Piper-structured voice (tests/quant_voice.py), fp32 and
int8, and on the real en_US-joe-medium voice.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pytest

from agent.hardware.runtime import RuntimeOptions
from agent.voice.options import VoiceOptions
from agent.voice.split import DECODE_INPUT, LATENT_INPUT, DecoderGraph, SplitError, split_model
from agent.voice.streaming import MIN_REFERENCE_PEAK, StreamGain, WindowPlan, auto_growth, exact_pad
from agent.voice.voice import SynthesisParams, Voice
from tests.support import quant_voice

QUIET = SynthesisParams(noise_scale=0.0, noise_w=0.0)
HOP = 4


def local_decoder(radius: int):  # type: ignore[no-untyped-def]
    """A stand-in decoder whose output frame depends on latent frames within ``radius``."""
    kernel = np.linspace(1.0, 2.0, 2 * radius + 1)

    def decode(latent: np.ndarray) -> np.ndarray:
        signal = latent[0].sum(axis=0)
        frames = np.convolve(np.pad(signal, radius), kernel, mode="valid")
        return np.tanh(np.repeat(frames, HOP) * 0.1).astype(np.float32)

    return decode


# --- window plan ---------------------------------------------------------------------------


def test_windows_cover_the_sentence_in_order_without_overlap() -> None:
    plan = WindowPlan(first_frames=40, growth=8, max_window_frames=400, pad=12)
    for frames in (1, 30, 63, 64, 65, 235, 400, 1000, 5000):
        windows = plan.windows(frames)
        assert windows[0][0] == 0 and windows[-1][1] == frames
        assert all(a < b for a, b in windows)
        assert all(prev[1] == nxt[0] for prev, nxt in itertools.pairwise(windows))


def test_first_window_then_growth_then_the_memory_bound() -> None:
    plan = WindowPlan(first_frames=40, growth=2, max_window_frames=100, pad=12)
    assert plan.windows(1000)[:4] == [(0, 40), (40, 120), (120, 220), (220, 320)]
    lengths = [b - a for a, b in plan.windows(1000)]
    assert max(lengths) <= 100 + plan.pad  # a short tail may ride with the last window


def test_short_sentences_and_plans_off_decode_whole() -> None:
    plan = WindowPlan(first_frames=40, growth=8, max_window_frames=400, pad=12)
    assert plan.windows(63) == [(0, 63)]  # a cut needs pad frames on both sides of it
    assert plan.windows(64) == [(0, 40), (40, 64)]
    assert WindowPlan(0, 8, 400, 12).windows(300) == [(0, 300)]


def test_automatic_growth_follows_the_boards_speed() -> None:
    assert auto_growth(compute_s=0.05, audio_s=1.0) == 8  # 20x real time: capped
    assert auto_growth(compute_s=0.125, audio_s=1.0) == 4  # 8x real time: 2x margin
    assert auto_growth(compute_s=0.4, audio_s=1.0) == 1  # barely 2.5x real time
    assert auto_growth(compute_s=2.0, audio_s=1.0) == 1  # slower than real time
    assert auto_growth(compute_s=0.0, audio_s=0.0) == 1


def test_real_voice_growth_is_measured_at_load(real_voice_dir: Path, tmp_path: Path) -> None:
    voice = Voice.load(real_voice_dir, VoiceOptions(
        variant="int8", runtime=RuntimeOptions(optimized_cache_dir=tmp_path / "ort")))
    assert voice.window_plan is not None
    assert voice.window_plan.growth == auto_growth(voice.warmup_s, voice.warmup_audio_s)
    fixed = Voice.load(real_voice_dir, VoiceOptions(
        variant="int8", stream_growth=3,
        runtime=RuntimeOptions(optimized_cache_dir=tmp_path / "ort")))
    assert fixed.window_plan is not None and fixed.window_plan.growth == 3
    assert fixed.chunking == voice.chunking  # growth only moves later cuts: same cache key
    assert fixed.streaming == {"first_window_s": 0.4644, "growth": 3, "max_window_s": 0.743,
                               "context_s": 0.0116}
    assert Voice.load(real_voice_dir, VoiceOptions(stream_first_frames=0)).streaming is None


def test_growth_keeps_later_windows_short_enough_to_be_ready_in_time() -> None:
    plan = WindowPlan(first_frames=40, growth=8, max_window_frames=400, pad=12)
    assert plan.windows(235) == [(0, 40), (40, 235)]  # 195 <= 8 x 40
    assert plan.windows(800)[:2] == [(0, 40), (40, 360)]


# --- exact padding -------------------------------------------------------------------------


@pytest.mark.parametrize("radius", [1, 2, 3, 4, 7, 11, 12, 20, 33])
def test_exact_pad_finds_the_receptive_field(radius: int) -> None:
    assert exact_pad(local_decoder(radius), frame_shape=(1, 3), hop=HOP) == radius


def test_exact_pad_gives_up_beyond_its_search_range() -> None:
    assert exact_pad(local_decoder(40), frame_shape=(1, 3), hop=HOP, max_pad=32) is None


def test_windowed_decoding_with_that_pad_is_the_whole_decoding() -> None:
    decode = local_decoder(7)
    pad = exact_pad(decode, frame_shape=(1, 3), hop=HOP)
    assert pad is not None
    latent = np.random.default_rng(1).standard_normal((1, 3, 300)).astype(np.float32)
    plan = WindowPlan(first_frames=20, growth=3, max_window_frames=64, pad=pad)
    joined = np.concatenate([plan.decode(decode, latent, a, b, HOP)
                             for a, b in plan.windows(300)])
    np.testing.assert_allclose(joined, decode(latent), atol=1e-6)
    short = WindowPlan(first_frames=20, growth=3, max_window_frames=64, pad=pad - 1)
    joined = np.concatenate([short.decode(decode, latent, a, b, HOP)
                             for a, b in short.windows(300)])
    assert np.max(np.abs(joined - decode(latent))) > 1e-4  # too little context shows


def test_a_decoder_that_is_not_local_never_streams() -> None:
    def global_offset(latent: np.ndarray) -> np.ndarray:
        signal = np.repeat(latent[0].sum(axis=0), HOP)
        return (signal + signal.sum()).astype(np.float32)  # every sample sees every frame

    assert exact_pad(global_offset, frame_shape=(1, 2), hop=HOP) is None


# --- gain ----------------------------------------------------------------------------------


def test_gain_equals_whole_sentence_normalisation_when_the_peak_comes_first() -> None:
    rng = np.random.default_rng(2)
    sentence = (rng.standard_normal(4000) * 0.1).astype(np.float32)
    sentence[100] = 0.6  # the loudest sample, in the first window
    gain = StreamGain(22050)
    streamed = np.concatenate([gain.apply(sentence[:1000]), gain.apply(sentence[1000:])])
    np.testing.assert_allclose(streamed, sentence / 0.6, atol=1e-6)


def test_a_louder_later_window_lowers_the_gain_without_clipping() -> None:
    first = np.full(1000, 0.3, np.float32) * np.sin(np.arange(1000))
    later = np.full(1000, 0.3, np.float32) * np.sin(np.arange(1000))
    later[500] = 0.9
    gain = StreamGain(22050)
    a, b = gain.apply(first), gain.apply(later)
    assert np.max(np.abs(a)) == pytest.approx(1.0, abs=1e-3)  # normalised to its own peak
    assert np.max(np.abs(b)) == pytest.approx(1.0, abs=1e-3)  # the new peak just fits
    assert np.max(np.abs(b)) <= 1.0
    audible = np.abs(later[:200]) > 0.05
    applied = b[:200][audible] / later[:200][audible]
    assert applied[0] == pytest.approx(1 / 0.3, rel=0.05)  # starts at the first window's gain
    assert applied[-1] == pytest.approx(1 / 0.9, rel=1e-3)  # ends at the new peak's
    assert np.all(np.diff(applied) <= 1e-6) and np.max(np.abs(np.diff(applied))) < 0.1  # a ramp


def test_a_quiet_first_window_is_not_blown_up_to_full_scale() -> None:
    breath = np.full(500, 0.01, np.float32)
    out = StreamGain(22050).apply(breath)
    assert np.max(np.abs(out)) == pytest.approx(0.01 / MIN_REFERENCE_PEAK)


# --- split graphs and streamed voices -------------------------------------------------------


@pytest.fixture()
def conv_bundle(tmp_path: Path) -> Path:
    return quant_voice.build_bundle(tmp_path / "models")


def test_switchable_graph_computes_the_whole_model_in_two_steps(conv_bundle: Path) -> None:
    import onnxruntime as ort

    model = conv_bundle / f"{quant_voice.VOICE}.onnx"
    measured: list[int] = []

    def measure(decoder: DecoderGraph) -> dict[str, str]:
        measured.append(decoder.frame_shape)
        alone = ort.InferenceSession(decoder.graph, providers=["CPUExecutionProvider"])
        return {"inputs": ",".join(i.name for i in alone.get_inputs())}

    graph = split_model(model, measure)
    assert measured == [(1, quant_voice.CHANNELS)]
    whole = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    switch = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    # the decoder alone reads the latent and the voice inputs its trailing nodes use
    assert switch.get_modelmeta().custom_metadata_map["inputs"] == \
        f"{LATENT_INPUT},input_lengths,scales"
    assert [i.name for i in switch.get_inputs()] == \
        [i.name for i in whole.get_inputs()] + [LATENT_INPUT, DECODE_INPUT]
    feeds = {"input": np.asarray([[1, 5, 9, 14, 2]], np.int64),
             "input_lengths": np.asarray([5], np.int64),
             "scales": np.asarray([0.0, 1.0, 0.0], np.float32)}
    idle = np.zeros((1, quant_voice.CHANNELS, 1), np.float32)
    latent = switch.run(None, {**feeds, LATENT_INPUT: idle, DECODE_INPUT: np.asarray(False)})[0]
    assert latent.shape == (1, quant_voice.CHANNELS, 5)
    audio = switch.run(None, {**feeds, LATENT_INPUT: latent, DECODE_INPUT: np.asarray(True)})[0]
    np.testing.assert_allclose(audio, whole.run(None, feeds)[0], atol=1e-6)


def test_a_graph_without_a_piper_decoder_is_not_split(tiny_voice_dir: Path) -> None:
    from tests.support import make_tiny_voice

    with pytest.raises(SplitError, match="conv_pre"):
        split_model(tiny_voice_dir / f"{make_tiny_voice.VOICE}.onnx")
    # loads whole, does not stream
    voice = Voice.load(tiny_voice_dir, VoiceOptions(stream_first_frames=8))
    assert voice.window_plan is None and not voice.engine.split
    assert len(list(voice.synthesize("A first sentence that is long enough."))) == 1


def test_a_voice_whose_switchable_graph_fails_still_loads_whole(
        conv_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> bytes:
        raise RuntimeError("onnx could not rewrite this graph")

    monkeypatch.setattr("agent.voice.sessions.split_model", broken)
    voice = Voice.load(conv_bundle, VoiceOptions(
        stream_first_frames=8, runtime=RuntimeOptions(optimized_cache_dir=tmp_path / "ort")))
    assert voice.window_plan is None and not voice.engine.split
    chunks = list(voice.synthesize("Tickets are sold at the green machines.", QUIET))
    assert len(chunks) == 1 and chunks[0].frames > 0


def _streamed_and_whole(bundle: Path, variant: str, cache: Path,
                        text: str) -> tuple[list[int], np.ndarray, np.ndarray, Voice]:
    runtime = RuntimeOptions(optimized_cache_dir=cache)
    # Settings count 256-sample frames; this voice's latent frames are 32 samples: 8 and 16 of them.
    streamed = Voice.load(bundle, VoiceOptions(variant=variant, runtime=runtime,
                                               stream_first_frames=1, stream_growth=2,
                                               stream_max_window_frames=2))
    whole = Voice.load(bundle, VoiceOptions(variant=variant, runtime=runtime,
                                            stream_first_frames=0))
    chunks = list(streamed.synthesize(text, QUIET))
    a = np.concatenate([c.samples().reshape(-1) for c in chunks]).astype(np.int32)
    b = np.concatenate([c.samples().reshape(-1) for c in whole.synthesize(text, QUIET)])
    return [c.frames for c in chunks], a, b.astype(np.int32), streamed


@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_streamed_voice_speaks_the_same_audio_in_more_chunks(conv_bundle: Path, tmp_path: Path,
                                                            variant: str) -> None:
    if variant == "int8":
        from agent.quantize.int8_bundle import build_int8_bundle

        build_int8_bundle(conv_bundle / f"{quant_voice.VOICE}.onnx", conv_bundle,
                          calibration=["Welcome aboard the evening service.",
                                       "Tickets are sold at the green machines."],
                          heldout=["Please mind the step."])
    text = "Tickets are sold at the green machines near the main entrance. Thank you."
    frames, streamed, whole, voice = _streamed_and_whole(conv_bundle, variant,
                                                         tmp_path / "ort", text)
    assert voice.window_plan is not None and voice.engine.hop == 32
    assert voice.window_plan.pad >= 2  # conv_pre alone reaches 2 frames each way
    assert len(frames) > 2 and frames[0] == 8 * 32  # the first sentence came in windows
    assert streamed.size == whole.size
    assert np.max(np.abs(streamed[:frames[0]])) >= 32000  # scaled to its peak, like Piper
    # Before any gain: the windows decode to the same samples as the whole sentence.
    ids = voice.frontend.ids(voice.sentences(text)[0])
    feeds = voice._feeds(ids, QUIET)
    latent = voice.engine.latent(feeds)
    plan = voice.window_plan
    joined = np.concatenate([plan.decode(lambda z: voice.engine.decode(z, feeds), latent, a, b,
                                         voice.engine.hop)
                             for a, b in plan.windows(latent.shape[-1])])
    whole = voice.engine.audio(feeds)  # the decoder run once over the whole sentence
    np.testing.assert_allclose(joined, whole, atol=1e-5)
    np.testing.assert_allclose(voice.ids_to_audio(ids, QUIET), whole, atol=1e-5)


def test_later_loads_take_the_switchable_graph_from_the_cache(conv_bundle: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = RuntimeOptions(optimized_cache_dir=tmp_path / "ort")
    # A fixed growth: the automatic one follows the warm-up's speed, which differs between loads.
    options = VoiceOptions(runtime=runtime, stream_first_frames=1, stream_growth=2)
    first = Voice.load(conv_bundle, options)
    assert len(list((tmp_path / "ort").glob("*.onnx"))) == 1  # the switchable graph

    def no_split(_: Path) -> None:
        raise AssertionError("split again although both halves are cached")

    monkeypatch.setattr("agent.voice.sessions.split_model", no_split)
    again = Voice.load(conv_bundle, options)
    assert again.window_plan == first.window_plan and again.engine.hop == first.engine.hop
    text = "Tickets are sold at the green machines near the main entrance."
    assert [c.audio for c in again.synthesize(text, QUIET)] == \
        [c.audio for c in first.synthesize(text, QUIET)]
    shutil.rmtree(tmp_path / "ort")
    monkeypatch.undo()
    rebuilt = Voice.load(conv_bundle, options)
    assert rebuilt.window_plan == first.window_plan  # a lost cache is rebuilt


def test_real_voice_streams_its_first_sentence_exactly(real_voice_dir: Path,
                                                       tmp_path: Path) -> None:
    runtime = RuntimeOptions(optimized_cache_dir=tmp_path / "ort")
    streamed = Voice.load(real_voice_dir, VoiceOptions(variant="int8", runtime=runtime,
                                                       stream_first_frames=40, stream_growth=8))
    whole = Voice.load(real_voice_dir, VoiceOptions(variant="int8", runtime=runtime,
                                                    stream_first_frames=0))
    assert streamed.window_plan is not None
    # cut before the decoder's second upsampler: frames of 32 samples, 8 of them as context
    assert streamed.window_plan.pad == 8 and streamed.engine.hop == 32
    assert streamed.window_plan.first_frames == 40 * 8
    text = "Good afternoon and welcome to the central library. Thank you."
    sentence = streamed.sentences(text)[0]
    ids = streamed.frontend.ids(sentence)
    # The raw decoder output, windowed against whole: the same samples.
    feeds = streamed._feeds(ids, QUIET)
    latent = streamed.engine.latent(feeds)
    plan = streamed.window_plan
    joined = np.concatenate([
        plan.decode(lambda z: streamed.engine.decode(z, feeds), latent, a, b, 32)
        for a, b in plan.windows(latent.shape[-1])])
    reference = whole.ids_to_audio(ids, QUIET)
    np.testing.assert_allclose(joined, reference, atol=1e-4 * float(np.max(np.abs(reference))))
    chunks = list(streamed.synthesize(text, QUIET))
    # the first window, windows of at most 64 frames, then sentence two in one chunk
    assert chunks[0].frames == 40 * 256 and chunks[-1].text == "Thank you."
    assert len(chunks) > 3 and max(c.frames for c in chunks[:-1]) <= 64 * 256


def test_later_long_sentences_come_in_windows_without_a_short_first_one(
        conv_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.voice.sessions import VoiceSession

    voice = Voice.load(conv_bundle, VoiceOptions(
        runtime=RuntimeOptions(optimized_cache_dir=tmp_path / "ort"),
        stream_first_frames=1, stream_growth=100, stream_max_window_frames=2))
    sentences = voice.sentences("Yes. Tickets are sold at the green machines near the main "
                                "entrance of the station.")
    frames = [len(voice.frontend.ids(s)) for s in sentences]  # one latent frame per id here
    assert frames[0] < 8 + 2 * voice.window_plan.pad and frames[1] > 16
    decoded: list[int] = []
    original = VoiceSession.decode

    def counting(self: VoiceSession, latent: np.ndarray, feeds: object) -> np.ndarray:
        decoded.append(latent.shape[-1])
        return original(self, latent, feeds)  # type: ignore[arg-type]

    monkeypatch.setattr(VoiceSession, "decode", counting)
    chunks = list(voice.synthesize_sentences(sentences, QUIET))
    hop, pad = voice.engine.hop, voice.window_plan.pad
    assert chunks[0].frames == frames[0] * hop  # too short to cut
    # The later sentence: decoded in windows of at most 16 frames (plus context), no short
    # first one, and handed on as one chunk scaled to its own peak, like Piper's.
    assert decoded[0] == frames[0] and len(decoded) > 2
    assert max(decoded[1:]) <= 16 + 2 * pad and decoded[1] > 8 + pad
    assert len(chunks) == 2 and chunks[1].frames == frames[1] * hop
    samples = chunks[1].samples()
    assert int(np.max(np.abs(samples))) >= 32766
