"""The MQTT command channel: topics, protocol, client, and the command pipeline behind it.

- :mod:`~agent.mqtt.topics`: every topic, built and matched in one place.
- :mod:`~agent.mqtt.protocol`: command and event schemas (pydantic, strict, bounded).
- :mod:`~agent.mqtt.client`: the paho-mqtt wrapper (sessions, Will, TLS, jittered reconnect).
- :mod:`~agent.mqtt.publisher`: events, replies, presence and retained snapshots.
- :mod:`~agent.mqtt.intake`: network thread: parse, dedupe, hand on through a bounded queue.
- :mod:`~agent.mqtt.dispatch`: the dispatcher thread that executes commands.
- :mod:`~agent.pipeline.worker`: the speak job queue and the synthesis worker thread.
- :mod:`~agent.mqtt.tracker`: exactly one final event per command.
- :mod:`~agent.mqtt.hermes`: Hermes (Rhasspy/Snips) TTS compatibility.

:mod:`agent.service` wires them together.
"""
