"""The ``[wyoming]`` section of the deployment settings: the Wyoming TTS server
(:mod:`agent.wyoming`), Home Assistant's way of talking to TTS engines.

Every field has a description and its bounds; unknown keys are errors.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent.text.limits import DEFAULT_MAX_TEXT_CHARS, HARD_MAX_TEXT_CHARS

__all__ = ["MAX_UNIX_PATH_BYTES", "WyomingSettings", "parse_uri"]

MAX_UNIX_PATH_BYTES = 107
"""The longest path a unix socket address holds (``sun_path`` less its NUL)."""


def parse_uri(uri: str) -> tuple[str, str, int]:
    """``(scheme, host or path, port)`` of a server address: ``tcp://HOST:PORT`` or
    ``unix:///ABSOLUTE/PATH`` (port 0). Raises ValueError with the reason."""
    try:
        parts = urlsplit(uri)
        port = parts.port if parts.scheme == "tcp" else 0
    except ValueError as exc:
        raise ValueError(f"not a server address: {uri!r} ({exc})") from exc
    if parts.query or parts.fragment:
        raise ValueError(f"{uri!r}: no query or fragment allowed")
    if parts.scheme == "tcp":
        if not parts.hostname or port is None or parts.path not in ("", "/"):
            raise ValueError(f"{uri!r}: expected tcp://HOST:PORT (e.g. tcp://0.0.0.0:10200)")
        if not 1 <= port <= 65535:
            raise ValueError(f"{uri!r}: port outside 1..65535")
        return "tcp", parts.hostname, port
    if parts.scheme == "unix":
        path = parts.path
        if parts.netloc or not path.startswith("/") or "\0" in path:
            raise ValueError(f"{uri!r}: expected unix:///ABSOLUTE/PATH")
        if len(path.encode()) > MAX_UNIX_PATH_BYTES:
            raise ValueError(f"{uri!r}: a unix socket path holds at most "
                             f"{MAX_UNIX_PATH_BYTES} bytes")
        return "unix", path, 0
    raise ValueError(f"{uri!r}: only tcp:// and unix:// addresses are served")


class WyomingSettings(BaseModel):
    """The Wyoming TTS server (docs/home-assistant.md, Wyoming)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: str | None = Field(
        default=None, max_length=200,
        description="Where the Wyoming server listens: tcp://HOST:PORT (e.g. "
        "tcp://0.0.0.0:10200, the port Home Assistant's Wyoming integration expects) or "
        "unix:///ABSOLUTE/PATH; unset = no server.")
    max_text_chars: int = Field(
        default=DEFAULT_MAX_TEXT_CHARS, ge=1, le=HARD_MAX_TEXT_CHARS,
        description="Longest text one synthesize request (or one streamed request, all its "
        "chunks together) may have; longer is refused with an error event.")
    max_clients: int = Field(
        default=4, ge=1, le=256,
        description="Connections served at once; one more takes the place of the connection "
        "waiting longest for a request (told error \"replaced\"), or is refused with error "
        "\"busy\" when every one is serving a request.")
    max_syntheses: int = Field(
        default=1, ge=1, le=16,
        description="Wyoming syntheses running at once (one thread each, beside the speaker's "
        "own synthesis worker); further requests wait their turn, so a flood of clients "
        "cannot take every core from the device's own announcements.")
    idle_timeout_s: float = Field(
        default=60.0, ge=1.0, le=3600.0,
        description="A connection with no request for this long is closed with error "
        "\"idle\" (s); pings and describe do not keep it open, so idle clients cannot keep "
        "newcomers out.")
    write_timeout_s: float = Field(
        default=10.0, ge=0.1, le=600.0,
        description="A client that has not taken an event off the wire after this long (it "
        "does not read) is dropped and its synthesis cancelled (s).")
    max_connection_s: float = Field(
        default=600.0, ge=1.0, le=86400.0,
        description="Longest a connection may stay open, requests included; then it gets "
        "error \"time-limit\" and is closed, its synthesis cancelled (s).")
    max_event_bytes: int = Field(
        default=256 * 1024, ge=4096, le=16 << 20,
        description="Largest event a client may send (header line, data and payload, bytes); a "
        "larger one is answered with an error event and the connection closed.")
    socket_mode: int = Field(
        default=0o660, ge=0, le=0o777,
        description="Permissions of a unix socket (an octal number in TOML: 0o660).")
    length_scale: float | None = Field(
        default=None, gt=0.0, le=10.0,
        description="Phoneme duration multiplier for Wyoming requests (> 1 is slower); unset = "
        "the voice's own.")
    noise_scale: float | None = Field(
        default=None, ge=0.0, le=2.0,
        description="Generator noise for Wyoming requests (0 = deterministic); unset = the "
        "voice's own.")
    noise_w: float | None = Field(
        default=None, ge=0.0, le=2.0,
        description="Duration noise for Wyoming requests (0 = deterministic); unset = the "
        "voice's own.")

    zeroconf: bool = Field(
        default=False,
        description="Announce the server over mDNS as _wyoming._tcp (named after the device "
        "id), so Home Assistant discovers it; tcp:// with an IPv4 address (or 0.0.0.0) only.")

    @field_validator("uri")
    @classmethod
    def _uri_served(cls, uri: str | None) -> str | None:
        if uri is not None:
            parse_uri(uri)
        return uri

    @model_validator(mode="after")
    def _zeroconf_over_tcp(self) -> WyomingSettings:
        if self.zeroconf and self.uri is not None and parse_uri(self.uri)[0] != "tcp":
            raise ValueError("wyoming.zeroconf announces tcp:// servers only")
        return self
