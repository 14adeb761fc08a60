"""Speak jobs from acceptance to the player: the request and the bounded job queue
(:mod:`.jobs`), the synthesis worker (:mod:`.worker`) and the phrase cache
(:mod:`.phrase_cache`). Knows nothing of MQTT: the transport turns its command into a
:class:`~.jobs.SpeakRequest`, and the worker reports through the :class:`~.worker.Reporter`
protocol that the transport implements.
"""
