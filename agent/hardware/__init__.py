"""Hardware detection, hardware profiles and the onnxruntime options they resolve to.

:func:`agent.hardware.effective.resolve_profile` is the entry point; it returns an immutable
:class:`~agent.hardware.effective.EffectiveProfile` whose ``runtime.options``
:mod:`agent.voice.onnx_session` turns into a session. The package imports nothing of the agent but
its leaves, and this ``__init__`` stays empty. The modules:
docs/internals.md#the-hardware-package.
"""
