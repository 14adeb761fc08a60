"""The installed voices: :class:`.voices.VoiceLibrary` loads, caches and swaps voices (staged
versions, rollback); :mod:`.watch` reloads them when their files change.
"""
