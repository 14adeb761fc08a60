"""Speak jobs from acceptance to the player: the bounded job queue and the synthesis worker
(:mod:`.worker`), and the phrase cache (:mod:`.phrase_cache`). Knows nothing of MQTT: the
worker reports through a typed protocol that the transport implements.
"""
