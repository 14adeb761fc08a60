"""Audio output through ALSA: the chunk format, device handling, conversion, volume, the player.

- :mod:`.format`: :class:`~.format.AudioChunk` / :class:`~.format.AudioFormat` (no dependencies;
  the voice produces them).
- :mod:`.item`: :class:`~.item.PlayItem`, one utterance on its way to the speaker, and its
  :class:`~.item.PlaybackEvent` s.
- :mod:`.player`: :class:`~.player.AudioPlayer`, the ``player`` thread (contract there), built
  from :mod:`.queue` (the bounded play queue), :mod:`.utterance` (one utterance and when it
  ends early), :mod:`.output` (the device and what is written to it), :mod:`.events`,
  :mod:`.volume` and :mod:`.stats` (:class:`~.stats.PlayerStats`, what ``stats()`` returns).
- :mod:`.device` (the PCM) and :mod:`.convert` (rate, channels and sample format in software).

The package ``__init__`` imports nothing, so :mod:`.format` and :mod:`.stats` can be imported
without loading pyalsaaudio; import the modules themselves.
"""
