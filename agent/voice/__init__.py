"""One Piper voice on onnxruntime: its bundle on disk (:mod:`.bundle`), the sessions built from
the hardware profile's options (:mod:`.onnx_session`, :mod:`.sessions`), the switchable
front/decoder graph (:mod:`.split`), windowed decoding (:mod:`.streaming`) and
:class:`.voice.Voice`, which turns text into audio chunks.

Second stage of the data flow; imports :mod:`agent.text`, :mod:`agent.audio.format` and
:mod:`agent.hardware`. This package's ``__init__`` stays empty so importing one module does not
load onnxruntime.
"""
