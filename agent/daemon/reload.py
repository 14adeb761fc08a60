"""What a reload changes in the running agent: SIGHUP (:meth:`agent.daemon.service.AgentService.
reload`: the settings read again, every voice and the device lexicon re-checked) and the
``reload`` command (one voice or all of them re-checked, or a staged voice switched).

Each step answers with a value (:class:`SettingsChange`, :class:`LexiconChange`, the voices'
:class:`~agent.library.voices.ReloadResult`, together a :class:`ReloadReport`); callers decide
on those values, and the one-line STATUS is rendered from them (:meth:`ReloadReport.line`).
What a reload applies: docs/internals.md#reloads.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.library.lexicon import holder_of
from agent.library.voices import VoiceNotFound
from agent.logs import configure_logging, get_logger
from agent.mqtt.dispatch import ReloadError
from agent.voice.signature import SignatureError

if TYPE_CHECKING:
    from agent.health.report import SettingsSection
    from agent.library.lexicon import LexiconOutcome
    from agent.library.voices import ReloadResult, VoiceLibrary
    from agent.mqtt.protocol import ReloadCommand
    from agent.settings import Settings

__all__ = ["LIVE_MQTT_FIELDS", "TRUST_FIELDS", "LexiconChange", "ReloadReport", "SettingsChange",
           "SettingsCheck", "reload_all", "reload_command", "reload_lexicon", "reload_settings"]

log = get_logger(__name__)

LIVE_MQTT_FIELDS = ("ha_discovery", "ha_prefix", "ha_device_name", "ha_priority")
"""``[mqtt]`` fields a reload applies at once (Home Assistant discovery, via its add-on)."""
TRUST_FIELDS = ("trusted_keys", "require_signature")
"""``[models]`` fields a reload applies at once (every live voice is checked again)."""


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """What re-reading the settings file did."""

    log_level: str
    """The log level in force afterwards."""
    restart: tuple[str, ...] = ()
    """Changed sections that are not applied until a restart."""
    kept: str | None = None
    """Why the file could not be used (its error's first line); then nothing changed."""
    trust: tuple[tuple[Path, ...], bool] | None = None
    """``models.trusted_keys`` and ``require_signature`` as read (None: kept): applied at once
    (:meth:`~agent.library.voices.VoiceLibrary.retrust`, by :func:`reload_all`)."""
    problem: str | None = None
    """Of a file that could not be used: every problem on one line, naming the file without
    its directory (health's ``settings`` section, :class:`SettingsCheck`)."""

    def line(self) -> str:
        """``log level info, restart needed for mqtt`` or ``settings kept (why)``."""
        if self.kept is not None:
            return f"settings kept ({self.kept})"
        restart = f", restart needed for {', '.join(self.restart)}" if self.restart else ""
        return f"log level {self.log_level}{restart}"


@dataclass(frozen=True, slots=True)
class LexiconChange:
    """What reading the device lexicon again did."""

    outcome: LexiconOutcome
    error: str | None = None
    """Of a ``rejected`` file: why (the lexicon in service is kept)."""

    def line(self) -> str:
        """``lexicon loaded`` (``unchanged``, or ``rejected: why``)."""
        why = f": {self.error}" if self.outcome == "rejected" else ""
        return f"lexicon {self.outcome}{why}"


@dataclass(frozen=True, slots=True)
class ReloadReport:
    """One reload: the settings (None: not re-read), each voice, the lexicon (None: unset or
    not re-read)."""

    voices: tuple[ReloadResult, ...]
    settings: SettingsChange | None = None
    lexicon: LexiconChange | None = None
    trust: str | None = None
    """What changed in the trusted keys (every voice re-checked), None when nothing did."""

    @property
    def rejected(self) -> list[str]:
        """``voice: why`` of every rejected voice, then the lexicon's refusal."""
        found = [f"{r.voice}: {r.reason}" for r in self.voices if r.outcome == "rejected"]
        if self.lexicon is not None and self.lexicon.outcome == "rejected":
            found.append(self.lexicon.line())
        return found

    def voices_line(self) -> str:
        """``voices 1 loaded, 2 unchanged`` (or ``voices none installed``)."""
        counts: dict[str, int] = {}
        for result in self.voices:
            counts[result.outcome] = counts.get(result.outcome, 0) + 1
        return "voices " + (", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
                            or "none installed")

    def line(self) -> str:
        """The one-line result (SIGHUP's STATUS): ``reloaded: log level info; voices 1
        unchanged; lexicon loaded``."""
        parts = [self.settings.line()] if self.settings is not None else []
        if self.trust is not None:
            parts.append(self.trust)
        parts.append(self.voices_line())
        if self.lexicon is not None:
            parts.append(self.lexicon.line())
        return "reloaded: " + "; ".join(parts)


def reload_settings(current: Settings, load_settings: Callable[[], Settings],
                    ) -> tuple[Settings, SettingsChange]:
    """The settings to run with after re-reading them, and what changed.

    Logging is reconfigured when ``[log]`` changed, the Home Assistant fields of ``[mqtt]``
    (:data:`LIVE_MQTT_FIELDS`) and the trust fields of ``[models]`` (:data:`TRUST_FIELDS`, for
    :func:`reload_all`) are taken over; nothing else is applied.
    """
    try:
        new = load_settings()
    except Exception as exc:  # ConfigError, or anything a broken file provokes
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.error("settings_reload_failed", error=str(exc))
        return current, SettingsChange(current.log.level, kept=first,
                                       problem=_problem_line(exc))
    changed = [name for name in type(current).model_fields
               if getattr(new, name) != getattr(current, name)]
    if "log" in changed:
        configure_logging(new.log.level, new.log.format)
        current = current.model_copy(update={"log": new.log})
    if "mqtt" in changed and new.mqtt.topic_prefix == current.mqtt.topic_prefix:
        live = {name: getattr(new.mqtt, name) for name in LIVE_MQTT_FIELDS}
        current = current.model_copy(update={"mqtt": current.mqtt.model_copy(update=live)})
    if "models" in changed:
        trust = {name: getattr(new.models, name) for name in TRUST_FIELDS}
        current = current.model_copy(update={"models": current.models.model_copy(update=trust)})
    restart = tuple(name for name in changed if name != "log"
                    and getattr(new, name) != getattr(current, name))
    if restart:
        log.warning("settings_need_restart", sections=list(restart))
    log.info("settings_reloaded", changed=changed, log_level=current.log.level)
    keys = (tuple(current.models.trusted_keys), current.models.require_signature)
    return current, SettingsChange(current.log.level, restart, trust=keys)


_LOCAL_DIRS = re.compile(r"(?<![\w.~-])/(?:[^\s/:'\"(),;]+/)+(?=[^\s/:'\"(),;])")
"""The directories of an absolute path in a message (``/etc/tts-agent/`` of
``/etc/tts-agent/agent.toml``): left out of what goes over the network."""


def _problem_line(exc: Exception) -> str:
    """Every problem of a settings file that could not be used, on one line, each file named
    without its directory, and what that means for the agent."""
    problems = "; ".join(line for line in str(exc).splitlines() if line) or type(exc).__name__
    return (f"{_LOCAL_DIRS.sub('', problems)} (the agent runs on the settings it read before "
            "and would not start with this file)")


class SettingsCheck:
    """Whether the settings file would start the agent, as the last reload that read it found:
    health's ``settings`` section (``degraded`` with the reason until a reload reads a good
    file). ``load_settings`` reads the file (None: there is none to check)."""

    def __init__(self, load_settings: Callable[[], Settings] | None = None) -> None:
        self.load_settings = load_settings
        self.problem: str | None = None
        """Why not (:attr:`SettingsChange.problem`), None while it would."""

    def check(self) -> str | None:
        """Read the file to check it (the ``reload`` command, which applies nothing of it):
        None when it would start the agent, else why not. Dispatch thread."""
        if self.load_settings is None:
            return None
        try:
            self.load_settings()
        except Exception as exc:  # ConfigError, or anything a broken file provokes
            log.error("settings_check_failed", error=str(exc))
            self.problem = _problem_line(exc)
        else:
            self.problem = None
        return self.problem

    def section(self) -> SettingsSection:
        """Health's ``settings`` section."""
        return {"state": "degraded" if self.problem else "ok", "reason": self.problem}


def reload_lexicon(voices: VoiceLibrary) -> LexiconChange | None:
    """Read the device lexicon again (None when no lexicon is set)."""
    holder = holder_of(voices)
    if holder is None:
        return None
    outcome = holder.reload()
    return LexiconChange(outcome, holder.last_error if outcome == "rejected" else None)


def reload_all(voices: VoiceLibrary, settings: SettingsChange | None = None) -> ReloadReport:
    """SIGHUP, after the settings: apply changed trusted keys, re-check every voice (rejections
    logged; a live voice no longer trusted keeps serving, rejected), then the lexicon."""
    trust = None
    if settings is not None and settings.trust is not None:
        try:
            trust = voices.retrust(*settings.trust)
        except SignatureError as exc:  # a key file gone since the settings were read
            log.error("trusted_keys_kept", error=str(exc))
            trust = f"trusted keys kept ({exc})"
    results = tuple(voices.reload())
    rejected = [f"{r.voice}: {r.reason}" for r in results if r.outcome == "rejected"]
    if rejected:
        log.warning("reload_rejected_voices", rejected=rejected)
    return ReloadReport(results, settings, reload_lexicon(voices), trust)


def reload_command(voices: VoiceLibrary, command: ReloadCommand, default_voice: str,
                   check_settings: Callable[[], str | None] | None = None) -> list[str]:
    """Re-check the models directory now, or switch a staged voice to ``command.version``
    (:meth:`~agent.library.voices.VoiceLibrary.activate`, as ``models activate`` does: done
    only once that version serves, used before or not).

    Re-checking every voice reads the device lexicon again too, and ``check_settings`` checks
    the settings file (:meth:`SettingsCheck.check`). Returns the installed voice names; raises
    :class:`ReloadError` when the voice is not installed, a voice was rejected, the lexicon
    file was refused (the lexicon in service is kept) or the settings file would not start
    the agent.
    """
    if command.voice is not None and command.voice not in voices.names():
        raise ReloadError(f"no voice named {command.voice!r} is installed")
    everything = command.voice is None and command.version is None
    problem = check_settings() if everything and check_settings is not None else None
    try:
        if command.version is not None:
            results = [voices.activate(command.voice or default_voice, command.version)]
        else:
            results = voices.reload(command.voice)
    except VoiceNotFound as exc:
        raise ReloadError(str(exc)) from exc
    report = ReloadReport(tuple(results), lexicon=reload_lexicon(voices) if everything else None)
    rejected = report.rejected + ([f"settings file not usable: {problem}"] if problem else [])
    if rejected:
        raise ReloadError("; ".join(rejected))
    return voices.names()
