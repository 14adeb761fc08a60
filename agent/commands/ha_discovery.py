"""``tts-agent ha-discovery``: the Home Assistant discovery message of this device.

    tts-agent ha-discovery             # print the discovery message the agent publishes
    tts-agent ha-discovery --remove    # remove it from the broker (empty retained payload)
    tts-agent ha-discovery --remove --group hall   # and group hall's shared notify entity

``--remove`` clears the topic the settings name and the one the agent last published to (kept
in ``<cache.dir>/devices/<device_id>/ha-discovery.json``, which it then deletes), so Home
Assistant forgets the device; ``systemd/install.sh --uninstall`` runs it. It prints each topic
it cleared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from agent.commands import NO_ANSWER, USAGE, CommandError, add_config_argument, settings_from_args

if TYPE_CHECKING:
    from agent.mqtt.topics import Topic
    from agent.settings import Settings

__all__ = ["register", "run"]

_ACK_S = 10.0
_POLL_S = 0.05


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ha-discovery", help="print or remove the Home Assistant discovery message")
    add_config_argument(parser)
    parser.add_argument("--remove", action="store_true",
                        help="remove the retained discovery message from the broker")
    parser.add_argument("--group", action="append", default=[], metavar="G",
                        help="with --remove: also remove group G's shared notify entity (its "
                             "members publish it again when they connect)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.hardware.effective import profile_or_reason
    from agent.mqtt.ha_addon import discovery_info, marker_path, published_topic
    from agent.mqtt.ha_discovery import discovery_payload
    from agent.mqtt.topics import DiscoveryTopics, Namespace, TopicError

    settings = settings_from_args(args, configure_logs=False)
    try:
        topics = Namespace(settings.mqtt.topic_prefix).device(settings.device_id)
        discovery = DiscoveryTopics(settings.mqtt.ha_prefix, settings.device_id)
        target = discovery.config
        groups = [discovery.group_config(group) for group in args.group]
    except TopicError as exc:
        raise CommandError(str(exc), status=USAGE) from exc
    if groups and not args.remove:
        raise CommandError("--group goes with --remove", status=USAGE)
    if not args.remove:
        info = discovery_info(settings, profile_or_reason(settings)[0])  # as the agent's
        print(json.dumps({"topic": target.value,
                          "payload": json.loads(discovery_payload(info, topics))}, indent=2))
        return 0
    marker = marker_path(settings)
    clear = [target]
    before = published_topic(marker)
    if before is not None and before != target:
        clear.append(before)
    clear += groups
    _clear(settings, clear)
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()
    for topic in clear:
        print(topic.value)
    return 0


def _clear(settings: Settings, topics: list[Topic]) -> None:
    """Publish an empty retained message on each of ``topics`` and wait for the broker."""
    from agent.mqtt.client import ClientConfigError, MqttClient, OutboundMessage

    mqtt = settings.mqtt
    try:
        client = MqttClient(mqtt, f"tts-agent-{settings.device_id}-ha-remove", persistent=False)
    except ClientConfigError as exc:
        raise CommandError(str(exc), status=USAGE) from exc
    where = f"{mqtt.host}:{mqtt.port}"
    try:
        client.start()
        deadline = time.monotonic() + mqtt.connect_timeout_s
        while not client.wait_ready(_POLL_S):
            if client.last_error is not None or time.monotonic() >= deadline:
                raise CommandError(f"cannot reach the broker {where}: "
                                   f"{client.last_error or 'no answer'}", status=NO_ANSWER)
        for topic in topics:
            if not client.publish(OutboundMessage(topic, b"", retain=True)).wait(_ACK_S):
                raise CommandError(f"the broker {where} did not acknowledge {topic.value}",
                                   status=NO_ANSWER)
    finally:
        client.close(timeout=3)
