"""Hardware detection, hardware profiles and the onnxruntime options they resolve to.

:func:`agent.hardware.effective.resolve_profile` is the entry point: it detects the machine
(:mod:`.detect`, through one root path, ``sysroot``), picks the most specific profile from the
installed ``firmware_profiles/*.toml`` (:mod:`.profiles`, :mod:`.match`), applies the local tune
override (:mod:`.tune_store`, measured by ``tts-agent tune`` with :mod:`.tuning`) and explicit
settings, and returns an immutable :class:`~agent.hardware.effective.EffectiveProfile`. Its
``runtime.options`` is a :class:`~agent.hardware.runtime.RuntimeOptions`, which
:mod:`agent.voice.onnx_session` turns into an onnxruntime session.

Imports nothing of the agent but its leaves (no voice, no onnxruntime), and this ``__init__``
stays empty so that importing :mod:`.runtime` loads nothing else.
"""
