"""The reconnect policy without a network: the backoff's fast start and its reset once a
connection is stable, the takeover watch, and the hints logged with connect failures."""

from __future__ import annotations

import random
import socket
import ssl

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from agent.mqtt.connect import closed_hint, failure_hint, refusal_hint
from agent.mqtt.reconnect import (
    FAST_S,
    MIN_CLEAR_S,
    STABLE_S,
    TAKEOVER_STREAK,
    Backoff,
    ConnectionMonitor,
    TakeoverWatch,
)
from agent.settings import MqttSettings
from tests.support.clock import FakeClock


def retry(backoff: Backoff, clock: FakeClock) -> float:
    """One failed retry: take the wait and let it pass."""
    delay = backoff.next_delay()
    clock.advance(delay)
    return delay


def test_first_retries_of_an_outage_stay_at_the_base_delay() -> None:
    clock = FakeClock()
    backoff = Backoff(1.0, 60.0, random.Random(1), fast_s=5.0, clock=clock)
    ceilings = []
    while clock.now < 1000.0 + 5.0:
        retry(backoff, clock)
        assert backoff.last_ceiling_s is not None
        ceilings.append(backoff.last_ceiling_s)
    assert len(ceilings) >= 5 and set(ceilings) == {1.0}
    # past the fast window the ceiling doubles from the base up to the cap
    slow = []
    for _ in range(8):
        retry(backoff, clock)
        slow.append(backoff.last_ceiling_s)
    assert slow == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert backoff.attempt == len(ceilings) + 8


def test_a_stable_connection_resets_the_backoff_and_a_short_one_does_not() -> None:
    clock = FakeClock()
    backoff = Backoff(1.0, 60.0, random.Random(2), fast_s=5.0, stable_s=2.0, clock=clock)
    for _ in range(30):  # a long outage: deep into the slow phase
        retry(backoff, clock)
    assert backoff.last_ceiling_s == 60.0
    backoff.note_connected()
    clock.advance(1.0)
    assert not backoff.settle()  # up for less than stable_s
    backoff.note_lost()  # dropped again at once: still the same outage, still slow
    retry(backoff, clock)
    assert backoff.last_ceiling_s == 60.0 and backoff.attempt == 31
    backoff.note_connected()
    clock.advance(2.0)
    assert backoff.settle()
    assert backoff.attempt == 0 and backoff.last_ceiling_s is None
    assert not backoff.settle()  # nothing left to reset
    backoff.note_lost()
    retry(backoff, clock)  # the next outage starts fast again
    assert backoff.last_ceiling_s == 1.0 and backoff.attempt == 1


def test_many_short_outages_with_stable_connections_never_accumulate() -> None:
    clock = FakeClock()
    backoff = Backoff(1.0, 60.0, random.Random(3), fast_s=5.0, stable_s=2.0, clock=clock)
    for _ in range(50):
        for _ in range(3):  # a sub-second blip: a few failed retries
            retry(backoff, clock)
            assert backoff.last_ceiling_s == 1.0
        backoff.note_connected()
        clock.advance(2.5)
        assert backoff.settle()
        backoff.note_lost()


def test_for_settings_uses_the_fast_window_and_the_stability_threshold() -> None:
    backoff = Backoff.for_settings(MqttSettings(reconnect_min_s=0.5, reconnect_max_s=0.2))
    assert (backoff.base_s, backoff.cap_s) == (0.5, 0.5)
    assert (backoff.fast_s, backoff.stable_s) == (FAST_S, STABLE_S)
    with pytest.raises(ValueError):
        Backoff(1.0, 2.0, fast_s=-1.0)


def kick(watch: TakeoverWatch, clock: FakeClock, up_s: float = 0.3) -> bool:
    """Connected, then taken away after ``up_s``; True when the loss started an episode."""
    started = watch.connected()
    clock.advance(up_s)
    return watch.lost(taken_over=False) or started


def test_repeated_short_connections_with_the_broker_up_are_a_takeover() -> None:
    clock = FakeClock()
    watch = TakeoverWatch(clear_s=60.0, clock=clock)
    starts = [kick(watch, clock) for _ in range(TAKEOVER_STREAK)]
    assert not any(starts) and not watch.active  # the last loss is confirmed at the reconnect
    assert watch.connected() and watch.active
    assert watch.takeovers == TAKEOVER_STREAK
    clock.advance(0.3)
    assert not watch.lost(taken_over=False)  # one episode, started once
    assert not kick(watch, clock) and watch.active
    # the episode ends only after a connection stays up clear_s
    watch.connected()
    clock.advance(59.0)
    assert not watch.tick() and watch.active
    clock.advance(1.0)
    assert watch.tick() and not watch.active
    assert not watch.tick()


def test_broker_outages_and_long_connections_are_not_takeovers() -> None:
    clock = FakeClock()
    watch = TakeoverWatch(clock=clock)
    for _ in range(10):
        kick(watch, clock)
        watch.failed()  # the reconnect was refused: the broker was down, an outage
    for _ in range(10):
        kick(watch, clock, up_s=STABLE_S + 1)  # the connection had been stable
    watch.connected()
    assert not watch.active and watch.takeovers == 0


def test_session_taken_over_reason_counts_at_once() -> None:
    clock = FakeClock()
    watch = TakeoverWatch(clock=clock)
    for n in range(TAKEOVER_STREAK):
        watch.connected()
        clock.advance(STABLE_S * 10)  # however long the connection was up
        assert watch.lost(taken_over=True) == (n == TAKEOVER_STREAK - 1)
    assert watch.active


def test_monitor_reports_the_takeover_in_its_problem_and_holds_the_backoff() -> None:
    clock = FakeClock()
    backoff = Backoff(1.0, 10.0, random.Random(4), fast_s=5.0, stable_s=2.0, clock=clock)
    monitor = ConnectionMonitor(MqttSettings(), "tts-agent-t1", backoff,
                                TakeoverWatch(clear_s=MIN_CLEAR_S, clock=clock))
    taken = ReasonCode(PacketTypes.DISCONNECT, identifier=0x8E)
    for _ in range(TAKEOVER_STREAK):
        monitor.attempting()
        monitor.connected()
        clock.advance(STABLE_S * 2)
        monitor.tick()
        monitor.lost(taken, from_server=True, was_connected=True)
        retry(backoff, clock)
    assert monitor.problem is not None and "'tts-agent-t1'" in monitor.problem
    assert monitor.last_error == "connection lost: Session taken over"
    attempts = backoff.attempt
    monitor.connected()
    clock.advance(STABLE_S * 2)
    monitor.tick()  # stable, but the takeover holds the backoff where it is
    assert backoff.attempt == attempts
    clock.advance(MIN_CLEAR_S)
    monitor.tick()
    assert monitor.problem is None and backoff.attempt == 0


def test_handshake_closed_before_connack_is_a_failure_not_a_takeover() -> None:
    monitor = ConnectionMonitor(MqttSettings(), "x", Backoff(1.0, 2.0))
    for _ in range(TAKEOVER_STREAK + 2):
        monitor.attempting()
        monitor.lost(ReasonCode(PacketTypes.DISCONNECT, identifier=0x80), from_server=False,
                     was_connected=False)
    assert monitor.last_error == "connection closed before CONNACK"
    assert monitor.problem is None and monitor.watch.takeovers == 0


@pytest.mark.parametrize(
    ("exc", "tls", "expected"),
    [
        (ConnectionRefusedError(111, "Connection refused"), False,
         "is the broker running on broker.local:1883?"),
        (ConnectionResetError(104, "reset"), True, "is it a TLS listener?"),
        (ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), True,
         "mqtt.tls = false"),
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), True, "mqtt.ca_file"),
        (ssl.SSLError(1, "tlsv13 alert certificate required"), True, "mqtt.cert_file"),
        (ConnectionResetError(104, "reset"), False, "is it an MQTT port?"),
        (socket.gaierror(-2, "Name or service not known"), False, "check mqtt.host"),
        (TimeoutError("timed out"), False, "firewalls"),
    ],
)
def test_failure_hints_name_the_setting_to_check(exc: OSError, tls: bool, expected: str) -> None:
    settings = MqttSettings(host="broker.local", port=1883, tls=tls)
    assert expected in failure_hint(exc, settings)


def test_closed_and_refused_hints() -> None:
    assert "set mqtt.tls = true" in closed_hint(MqttSettings(port=8883))
    assert "client certificate" in closed_hint(MqttSettings(port=8883, tls=True))
    bad_password = ReasonCode(PacketTypes.CONNACK, identifier=0x86)
    assert "mqtt.password" in refusal_hint(bad_password, MqttSettings())
    version = ReasonCode(PacketTypes.CONNACK, identifier=0x84)
    assert '"3.1.1"' in refusal_hint(version, MqttSettings())
    assert "its log says why" in refusal_hint(None, MqttSettings())
