"""Is it a Piper voice? The check ``models import`` and ``models verify`` make before they trust
a model: onnxruntime loads it, its inputs are Piper's, its config parses and agrees with the
manifest's sample rate.

A file renamed ``.onnx`` (a WAV, an HTML error page of a failed download) passes a manifest check
written from it, and would fail only at the first request; here it is refused with a reason of
one line. The session is built with graph optimisation off and one thread, and dropped at once:
this is a check, not the serving session (:meth:`agent.voice.voice.Voice.load` makes that one,
and ``models verify --deep`` runs it with its warm-up synthesis).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agent.voice.bundle import DEFAULT_MAX_FILE_BYTES, Bundle, BundleError, verify_bundle
from agent.voice.voice import REQUIRED_INPUTS, VoiceConfig, VoiceLoadError

__all__ = ["DEFAULT_MAX_MODEL_BYTES", "NotAPiperVoice", "check_bundle", "check_config",
           "check_model"]

DEFAULT_MAX_MODEL_BYTES = DEFAULT_MAX_FILE_BYTES
"""Largest model accepted without settings (``models.max_model_bytes``' default)."""
_MAGIC = ((b"RIFF", "a WAV file"), (b"<", "an HTML or XML page"), (b"PK\x03\x04", "a zip archive"),
          (b"\x1f\x8b", "a gzip archive"), (b"{", "a JSON file"))


class NotAPiperVoice(Exception):
    """The files are not a Piper voice the agent can serve; the message says why, in one line."""


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (onnxruntime's messages may span several)."""
    return " ".join(str(exc).split())


def check_config(config_path: Path, sample_rate: int | None = None) -> VoiceConfig:
    """The parsed Piper voice config; with ``sample_rate`` (the manifest's), they must agree."""
    try:
        config = VoiceConfig.from_file(config_path)
    except VoiceLoadError as exc:
        raise NotAPiperVoice(one_line(exc)) from exc
    if sample_rate is not None and config.sample_rate != sample_rate:
        raise NotAPiperVoice(f"{config_path}: config says {config.sample_rate} Hz, "
                             f"manifest says {sample_rate} Hz")
    return config


def _kind_of(model_path: Path, max_bytes: int) -> str | None:
    """What the file looks like when it is plainly not an ONNX model; None otherwise. Refuses
    anything but a regular file (a FIFO would block, a device has no end) and oversize files."""
    try:
        st = os.stat(model_path)
        if not stat.S_ISREG(st.st_mode):
            raise NotAPiperVoice(f"{model_path}: not a regular file")
        if st.st_size > max_bytes:
            raise NotAPiperVoice(f"{model_path}: {st.st_size} bytes, larger than the "
                                 f"{max_bytes} bytes allowed (models.max_model_bytes)")
        with model_path.open("rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        raise NotAPiperVoice(f"{model_path}: unreadable: {exc.strerror or exc}") from exc
    if not head:
        return "an empty file"
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


def check_model(model_path: Path, config: VoiceConfig, *,
                max_bytes: int = DEFAULT_MAX_MODEL_BYTES) -> tuple[str, ...]:
    """Load ``model_path`` with onnxruntime and check it takes Piper's inputs (and ``sid`` for a
    multi-speaker ``config``); returns its input names. Raises :class:`NotAPiperVoice`."""
    kind = _kind_of(model_path, max_bytes)
    if kind is not None:
        raise NotAPiperVoice(f"{model_path}: {kind}, not an ONNX model")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: the reason comes back as the exception
    try:
        session = ort.InferenceSession(str(model_path), options,
                                       providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise NotAPiperVoice(f"{model_path}: not an ONNX model onnxruntime can load: "
                             f"{one_line(exc)}") from exc
    names = tuple(i.name for i in session.get_inputs())
    missing = [n for n in REQUIRED_INPUTS if n not in names]
    if missing:
        raise NotAPiperVoice(f"{model_path}: model inputs {sorted(names)} lack {missing}; "
                             "not a Piper voice")
    if config.num_speakers > 1 and "sid" not in names:
        raise NotAPiperVoice(f"{model_path}: multi-speaker config but the model has no sid "
                             "input; not a Piper voice")
    if not session.get_outputs():
        raise NotAPiperVoice(f"{model_path}: model has no outputs; not a Piper voice")
    return names


def check_bundle(bundle_dir: Path, *, max_bytes: int = DEFAULT_MAX_MODEL_BYTES) -> Bundle:
    """Every file of the bundle against its manifest (size, sha256), then the config and each
    variant's model as above. Raises :class:`NotAPiperVoice`."""
    try:
        bundle = verify_bundle(bundle_dir, max_file_bytes=max_bytes)
    except BundleError as exc:
        raise NotAPiperVoice(one_line(exc)) from exc
    config = check_config(bundle.config_path, bundle.sample_rate)
    for _, model_path in sorted(bundle.variants.items()):
        check_model(model_path, config, max_bytes=max_bytes)
    return bundle
