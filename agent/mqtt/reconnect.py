"""When to reconnect, and what the connection's history says: the backoff, session takeovers, and
the log lines (with a hint) for every way a connection fails or ends.

:class:`Backoff` (full jitter, fast at first, reset by a stable connection),
:class:`TakeoverWatch` (two clients with one client id) and :class:`ConnectionMonitor` (what the
MQTT network thread reports, turned into those and ``last_error``). Network thread only, but the
health report reads the monitor's properties from any thread. Design:
docs/internals.md#reconnecting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.logs import get_logger
from agent.mqtt.connect import closed_hint, failure_hint, refusal_hint

if TYPE_CHECKING:
    from agent.settings import MqttSettings

__all__ = ["FAST_S", "STABLE_S", "TAKEOVER_STREAK", "Backoff", "ConnectionMonitor",
           "TakeoverWatch"]

log = get_logger(__name__)

FAST_S = 5.0
"""For this long after an outage begins, every retry waits at most the base delay, so a broker
restart or a short network blip is bridged within about ``mqtt.reconnect_min_s``."""
STABLE_S = 2.0
"""A connection that stays up this long is stable: it resets the backoff. One that ends sooner,
while the broker is reachable, may have been taken over."""
TAKEOVER_STREAK = 3
"""Unstable connections in a row, each taken from us while the broker was up, that make a
takeover episode (one "Session taken over" reason code counts as one of them)."""
MIN_CLEAR_S = 30.0
"""A takeover episode ends after a connection stays up ``max(MIN_CLEAR_S, 2 *
mqtt.reconnect_max_s)``: longer than the other client's longest wait between retries."""
SESSION_TAKEN_OVER = 0x8E
"""MQTT 5 DISCONNECT reason code "Session taken over"."""


class Backoff:
    """Reconnect waits with full jitter (the wait is uniform in ``[0, ceiling]``).

    :meth:`ceiling` and :meth:`delay` are the exponential part, ``min(cap, base * 2**n)``.
    :meth:`next_delay` applies the policy: every retry within ``fast_s`` of the outage's first
    retry has the ceiling ``base``; later ones ``ceiling(0)``, ``ceiling(1)``, ... The outage
    lasts until :meth:`settle` sees a connection that has been up ``stable_s`` and resets.
    Full jitter spreads a fleet's reconnects over the window instead of in lock-step.
    """

    def __init__(self, base_s: float, cap_s: float, rng: random.Random | None = None, *,
                 fast_s: float = 0.0, stable_s: float = STABLE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if base_s <= 0 or cap_s < base_s:
            raise ValueError("backoff needs 0 < base <= cap")
        if fast_s < 0 or stable_s <= 0:
            raise ValueError("backoff needs fast_s >= 0 and stable_s > 0")
        self.base_s = base_s
        self.cap_s = cap_s
        self.fast_s = fast_s
        self.stable_s = stable_s
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._clock = clock
        self.attempt = 0
        """Retries since the last reset."""
        self.last_ceiling_s: float | None = None
        """The ceiling of the latest retry's wait (``None`` after a reset)."""
        self._outage_since: float | None = None
        self._slow = 0
        self._connected_at: float | None = None

    @classmethod
    def for_settings(cls, settings: MqttSettings) -> Backoff:
        """``mqtt.reconnect_min_s`` .. ``mqtt.reconnect_max_s`` (a smaller max counts as min),
        fast for :data:`FAST_S`, reset after :data:`STABLE_S`."""
        return cls(settings.reconnect_min_s,
                   max(settings.reconnect_min_s, settings.reconnect_max_s),
                   fast_s=FAST_S, stable_s=STABLE_S)

    def ceiling(self, attempt: int) -> float:
        """The exponential ceiling for slow retry ``attempt`` (0-based)."""
        return min(self.cap_s, self.base_s * 2.0 ** min(attempt, 62))

    def delay(self, attempt: int) -> float:
        """A random wait in ``[0, ceiling(attempt)]``."""
        return self._rng.uniform(0.0, self.ceiling(attempt))

    def next_delay(self) -> float:
        """The wait before the next retry, counted as one (the policy in the class docstring)."""
        now = self._clock()
        if self._outage_since is None:
            self._outage_since = now
        if now - self._outage_since < self.fast_s:
            ceiling = min(self.base_s, self.cap_s)
        else:
            ceiling = self.ceiling(self._slow)
            self._slow += 1
        self.attempt += 1
        self.last_ceiling_s = ceiling
        return self._rng.uniform(0.0, ceiling)

    def note_connected(self) -> None:
        self._connected_at = self._clock()

    def note_lost(self) -> None:
        self._connected_at = None

    def connected_for(self) -> float | None:
        """Seconds the current connection has been up (``None`` while disconnected)."""
        return None if self._connected_at is None else self._clock() - self._connected_at

    def settle(self) -> bool:
        """Reset once the current connection has been up ``stable_s``; True when it did."""
        up = self.connected_for()
        if up is None or up < self.stable_s or (self._outage_since is None and not self.attempt):
            return False
        self.reset()
        return True

    def reset(self) -> None:
        self.attempt = 0
        self.last_ceiling_s = None
        self._outage_since = None
        self._slow = 0


class TakeoverWatch:
    """Tells a session taken over again and again from an ordinary outage (module docstring).

    ``connected``/``lost``/``failed``/``tick`` are the connection's history, in order.
    """

    def __init__(self, *, kick_s: float = STABLE_S, streak: int = TAKEOVER_STREAK,
                 clear_s: float = MIN_CLEAR_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kick_s = kick_s
        self.streak = streak
        self.clear_s = clear_s
        self._clock = clock
        self.active = False
        """A takeover episode is on."""
        self.takeovers = 0
        """Connections taken from us since start (suspected or reported by the broker)."""
        self._run = 0
        self._pending = False
        self._connected_at: float | None = None

    def connected(self) -> bool:
        """A connection was made; True when this starts an episode."""
        self._connected_at = self._clock()
        if self._pending:  # the broker was up all along: the last loss was a takeover
            self._pending = False
            return self._count()
        return False

    def lost(self, taken_over: bool) -> bool:
        """The broker ended the connection; ``taken_over``: it said "Session taken over".
        True when this starts an episode."""
        up = None if self._connected_at is None else self._clock() - self._connected_at
        self._connected_at = None
        if taken_over:
            return self._count()
        if up is not None and up < self.kick_s:
            self._pending = True
        else:
            self._run = 0
        return False

    def failed(self) -> None:
        """A connect attempt failed: the broker was unreachable, so the loss was an outage."""
        self._pending = False
        self._run = 0

    def tick(self) -> bool:
        """While connected: True when a connection up for ``clear_s`` ends the episode."""
        if (self.active and self._connected_at is not None
                and self._clock() - self._connected_at >= self.clear_s):
            self.active = False
            self._run = 0
            return True
        return False

    def _count(self) -> bool:
        self.takeovers += 1
        self._run += 1
        if self._run >= self.streak and not self.active:
            self.active = True
            return True
        return False


class ConnectionMonitor:
    """The network thread's connection history: backoff, takeovers, ``last_error``, log lines.

    Call order per attempt: :meth:`attempting`, then :meth:`attempt_failed`, or :meth:`refused`,
    or :meth:`connected` (then :meth:`tick` per loop turn) and :meth:`lost`; then
    :meth:`next_delay`.
    """

    def __init__(self, settings: MqttSettings, client_id: str, backoff: Backoff,
                 watch: TakeoverWatch | None = None) -> None:
        self.settings = settings
        self.client_id = client_id
        self.backoff = backoff
        self.watch = watch or TakeoverWatch(
            kick_s=backoff.stable_s, clear_s=max(MIN_CLEAR_S, 2 * backoff.cap_s))
        self.last_error: str | None = None
        self._reported = False
        self._last_failure: str | None = None

    @property
    def problem(self) -> str | None:
        """Why the connection is not healthy though it may be up (a takeover episode)."""
        if not self.watch.active:
            return None
        return (f"session taken over repeatedly ({self.watch.takeovers} times): another agent "
                f"or client likely uses client id {self.client_id!r}")

    def attempting(self) -> None:
        self._reported = False

    def attempt_failed(self, exc: BaseException) -> None:
        """The TCP/TLS connect raised: log it with a hint (a warning the first time in a row)."""
        self.last_error = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, (OSError, ValueError)):  # not a network failure: a bug
            log.error("mqtt_connect_error", exc_info=exc)
        self._failure("mqtt_connect_failed", self.last_error, failure_hint(exc, self.settings))

    def refused(self, reason: Any) -> None:
        """CONNACK with a failure reason code."""
        self.last_error = f"connection refused: {reason}"
        self._failure("mqtt_connect_refused", self.last_error,
                      refusal_hint(reason, self.settings), first=log.error)

    def connected(self) -> None:
        self._last_failure = None
        self.backoff.note_connected()
        if self.watch.connected():
            self._episode_started()

    def lost(self, reason: Any, *, from_server: bool, was_connected: bool) -> None:
        """The connection ended, not by us. Before CONNACK it is a failed handshake."""
        if not was_connected:
            if not self._reported:
                self.last_error = "connection closed before CONNACK"
                self._failure("mqtt_handshake_failed", self.last_error,
                              closed_hint(self.settings))
            return
        up = self.backoff.connected_for()
        self.backoff.note_lost()
        taken = getattr(reason, "value", None) == SESSION_TAKEN_OVER
        text = str(reason) if from_server else "connection closed without a DISCONNECT"
        self.last_error = f"connection lost: {text}"
        if self.watch.lost(taken):
            self._episode_started()
        level = log.info if self.watch.active else log.warning
        level("mqtt_disconnected", reason=text, from_server=from_server,
              connected_s=None if up is None else round(up, 3))

    def loop_failed(self, exc: BaseException, *, was_connected: bool) -> None:
        """paho's loop raised (e.g. an SSL error it does not map): the connection is gone."""
        if not was_connected:
            self.attempt_failed(exc)
            return
        log.error("mqtt_loop_error", exc_info=exc)
        self.lost(f"{type(exc).__name__}: {exc}", from_server=True, was_connected=True)

    def tick(self) -> None:
        """A loop turn while connected: end a takeover episode, reset a stable backoff."""
        if self.watch.tick():
            self.backoff.reset()
            log.info("mqtt_session_takeover_ended", client_id=self.client_id,
                     takeovers=self.watch.takeovers)
        elif not self.watch.active and self.backoff.settle():
            log.debug("mqtt_connection_stable", stable_s=self.backoff.stable_s)

    def next_delay(self) -> float:
        delay = self.backoff.next_delay()
        log.info("mqtt_reconnect_wait", delay_s=round(delay, 3), attempt=self.backoff.attempt,
                 ceiling_s=self.backoff.last_ceiling_s)
        return delay

    def _failure(self, event: str, error: str, hint: str, first: Any = None) -> None:
        """A failed attempt: a warning (``first``) when it differs from the last one, info when
        it repeats."""
        self._reported = True
        self.watch.failed()
        level = log.info if error == self._last_failure else (first or log.warning)
        self._last_failure = error
        level(event, host=self.settings.host, port=self.settings.port, error=error, hint=hint,
              attempt=self.backoff.attempt)

    def _episode_started(self) -> None:
        log.warning("mqtt_session_taken_over", client_id=self.client_id,
                    takeovers=self.watch.takeovers,
                    hint="another agent or MQTT client uses this client id; give each device "
                         "its own device_id (or mqtt.client_id)")
