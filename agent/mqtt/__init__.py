"""The MQTT command channel: topics, protocol, the client, and the command handling behind it.

- :mod:`~agent.mqtt.topics`: every topic, built and matched in one place.
- :mod:`~agent.mqtt.protocol`: command and event schemas (pydantic, strict, bounded).
- :mod:`~agent.mqtt.client`: the paho-mqtt wrapper and its network thread.
- :mod:`~agent.mqtt.connect`: how it connects (sessions, Will, TLS, credentials) and the
  jittered reconnect backoff.
- :mod:`~agent.mqtt.publisher`: events, replies, presence, the health report.
- :mod:`~agent.mqtt.intake`: network thread: parse, dedupe, hand on through a bounded queue.
- :mod:`~agent.mqtt.dispatch`: the dispatcher thread that executes commands.
- :mod:`~agent.mqtt.tracker`: exactly one final event per command.
- :mod:`~agent.mqtt.hermes`: Hermes (Rhasspy/Snips) TTS compatibility.

The speak job queue and the synthesis worker the dispatcher hands speak commands to are not
transport: they live in :mod:`agent.pipeline`. :mod:`agent.daemon.service` wires them together.
"""
