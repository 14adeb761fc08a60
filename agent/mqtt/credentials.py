"""The files an MQTT connection needs, read up front: the password file and the TLS files.

``tts-agent run`` calls :func:`check_files` before it starts any thread, so a missing or
unreadable file is one error line and exit status 2 (an exception raised later, while
onnxruntime builds a session on another thread, would end in interpreter teardown under that
thread). :func:`agent.mqtt.connect.new_paho` reads them again through the same functions
when it builds the client.

The password file is read with a bound (:data:`MAX_PASSWORD_BYTES`), only when it is a
regular file (a FIFO or a device would block or never end), and its content is never logged
or put in a message. Imports neither paho nor onnxruntime: cheap to call first.
"""

from __future__ import annotations

import os
import ssl
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.settings import MqttSettings

__all__ = ["MAX_PASSWORD_BYTES", "ClientConfigError", "check_files", "read_password",
           "tls_context"]

MAX_PASSWORD_BYTES = 4096
"""Largest password file accepted (bytes)."""


class ClientConfigError(Exception):
    """The MQTT settings cannot be used (unreadable password file, bad certificate...)."""


def read_password(settings: MqttSettings) -> str | None:
    """The broker password: ``password``, or the content of ``password_file`` without its
    final line break. Raises :class:`ClientConfigError` (saying why, never the content)."""
    path = settings.password_file
    if path is None:
        return settings.password.get_secret_value() if settings.password is not None else None
    where = f"cannot read the MQTT password file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise ClientConfigError(f"{where}: {exc.strerror or type(exc).__name__}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ClientConfigError(f"{where}: not a regular file")
        data = b""
        while len(data) <= MAX_PASSWORD_BYTES:
            block = os.read(fd, MAX_PASSWORD_BYTES + 1 - len(data))
            if not block:
                break
            data += block
    except OSError as exc:
        raise ClientConfigError(f"{where}: {exc.strerror or type(exc).__name__}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_PASSWORD_BYTES:
        raise ClientConfigError(f"{where}: larger than {MAX_PASSWORD_BYTES} bytes")
    try:
        return data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ClientConfigError(f"{where}: not UTF-8 text") from None


def tls_context(settings: MqttSettings) -> ssl.SSLContext:
    """The TLS context: the CA bundle (or the system's) and the client certificate and key.
    Raises :class:`ClientConfigError` when a file cannot be used."""
    try:
        context = ssl.create_default_context(
            cafile=str(settings.ca_file) if settings.ca_file else None
        )
        if settings.cert_file is not None and settings.key_file is not None:
            context.load_cert_chain(str(settings.cert_file), str(settings.key_file))
    except (OSError, ssl.SSLError) as exc:
        raise ClientConfigError(f"cannot set up TLS: {exc}") from exc
    return context


def check_files(settings: MqttSettings) -> None:
    """Read every file the connection needs now (nothing when MQTT is off); raises
    :class:`ClientConfigError` with a one-line reason."""
    if not settings.enabled:
        return
    if settings.tls:
        tls_context(settings)
    read_password(settings)
