"""The MQTT command channel: topics, protocol, the client, and the command handling behind it.

The speak job queue and the synthesis worker the dispatcher hands speak commands to are not
transport: they live in :mod:`agent.pipeline`. :mod:`agent.daemon.service` wires them together.
The modules: docs/internals.md#the-mqtt-package.
"""
