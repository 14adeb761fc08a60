"""Audio output through ALSA: the chunk format, device handling, conversion, volume, the player.

- :mod:`.format`: :class:`~.format.AudioChunk` / :class:`~.format.AudioFormat` (no dependencies;
  the voice produces them).
- :mod:`.item`: :class:`~.item.PlayItem`, one utterance on its way to the speaker.
- :mod:`.player`: :class:`~.player.AudioPlayer`, the ``player`` thread (contract there).

The package ``__init__`` imports nothing, so :mod:`.format` can be imported without loading
pyalsaaudio; import the modules themselves.
"""
