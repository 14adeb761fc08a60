"""What a reload changes in the running agent.

- SIGHUP (:meth:`agent.daemon.service.AgentService.reload`): the settings file is read again and
  every voice re-checked. Of the settings only ``[log]`` (level, format) and the Home
  Assistant discovery fields of ``[mqtt]`` (:data:`LIVE_MQTT_FIELDS`) are applied at once;
  other changed sections are logged as needing a restart (the running parts keep the
  settings they were built with). An unreadable or invalid file keeps the old settings.
- The ``reload`` command (dispatch thread): re-check one voice or all of them, or switch a
  staged voice to another installed version.
- Both read the device lexicon (``text.lexicon``) again when all voices are re-checked
  (:class:`agent.library.lexicon.LexiconHolder`: a refused file keeps the lexicon in service).

Voices are validated and swapped by :class:`agent.library.voices.VoiceLibrary`; this module
only decides what to ask it and how the outcome reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agent.library.lexicon import holder_of
from agent.library.voices import VoiceNotFound
from agent.logs import configure_logging, get_logger
from agent.mqtt.dispatch import ReloadError

if TYPE_CHECKING:
    from agent.library.voices import ReloadResult, VoiceLibrary
    from agent.mqtt.protocol import ReloadCommand
    from agent.settings import Settings

__all__ = ["LIVE_MQTT_FIELDS", "lexicon_summary", "reload_command", "reload_settings",
           "voices_summary"]

log = get_logger(__name__)

LIVE_MQTT_FIELDS = ("ha_discovery", "ha_prefix", "ha_device_name", "ha_priority")
"""``[mqtt]`` fields a reload applies at once (Home Assistant discovery, via its add-on)."""


def reload_settings(current: Settings, load_settings: Callable[[], Settings],
                    ) -> tuple[Settings, str]:
    """The settings to run with after re-reading them, and one line saying what changed.

    Logging is reconfigured when ``[log]`` changed; nothing else is applied.
    """
    try:
        new = load_settings()
    except Exception as exc:  # ConfigError, or anything a broken file provokes
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.error("settings_reload_failed", error=str(exc))
        return current, f"settings kept ({first})"
    changed = [name for name in type(current).model_fields
               if getattr(new, name) != getattr(current, name)]
    if "log" in changed:
        configure_logging(new.log.level, new.log.format)
        current = current.model_copy(update={"log": new.log})
    if "mqtt" in changed and new.mqtt.topic_prefix == current.mqtt.topic_prefix:
        live = {name: getattr(new.mqtt, name) for name in LIVE_MQTT_FIELDS}
        current = current.model_copy(update={"mqtt": current.mqtt.model_copy(update=live)})
    restart = [name for name in changed if name != "log"
               and getattr(new, name) != getattr(current, name)]
    if restart:
        log.warning("settings_need_restart", sections=restart)
    log.info("settings_reloaded", changed=changed, log_level=current.log.level)
    text = f"log level {current.log.level}"
    return current, text + (f", restart needed for {', '.join(restart)}" if restart else "")


def voices_summary(results: Sequence[ReloadResult]) -> str:
    """``voices 1 loaded, 2 unchanged`` (or ``voices none installed``); rejections logged."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
    rejected = [f"{r.voice}: {r.reason}" for r in results if r.outcome == "rejected"]
    if rejected:
        log.warning("reload_rejected_voices", rejected=rejected)
    return "voices " + (", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
                        or "none installed")


def lexicon_summary(voices: VoiceLibrary) -> list[str]:
    """Read the device lexicon again: ``["lexicon loaded"]`` (``unchanged``, or ``rejected:
    why``); ``[]`` when no lexicon is set."""
    holder = holder_of(voices)
    if holder is None:
        return []
    outcome = holder.reload()
    return [f"lexicon {outcome}" + (f": {holder.last_error}" if outcome == "rejected" else "")]


def reload_command(voices: VoiceLibrary, command: ReloadCommand,
                   default_voice: str) -> list[str]:
    """Re-check the models directory now, or switch a staged voice to ``command.version``.

    Re-checking every voice reads the device lexicon again too. Returns the installed voice
    names; raises :class:`ReloadError` when the voice is not installed, a voice was rejected
    or the lexicon file was refused (the lexicon in service is kept).
    """
    if command.voice is not None and command.voice not in voices.names():
        raise ReloadError(f"no voice named {command.voice!r} is installed")
    try:
        if command.version is not None:
            results = [voices.activate(command.voice or default_voice, command.version)]
        else:
            results = voices.reload(command.voice)
    except VoiceNotFound as exc:
        raise ReloadError(str(exc)) from exc
    problems = [f"{r.voice}: {r.reason}" for r in results if r.outcome == "rejected"]
    if command.voice is None and command.version is None:
        problems += [line for line in lexicon_summary(voices) if line.startswith("lexicon rej")]
    if problems:
        raise ReloadError("; ".join(problems))
    return voices.names()
