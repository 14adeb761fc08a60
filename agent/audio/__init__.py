"""Audio output through ALSA: the chunk format, device handling, conversion, volume, the player.

The package ``__init__`` imports nothing, so :mod:`.format` and :mod:`.stats` can be imported
without loading pyalsaaudio; import the modules themselves. Which module does what:
docs/internals.md#the-audio-package.
"""
