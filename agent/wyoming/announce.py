"""The Wyoming server announced over mDNS (zeroconf) as ``_wyoming._tcp``, so Home Assistant
discovers it (``wyoming.zeroconf``, off by default; tcp:// servers only).

The service instance is named after the device id; its address is the one the server listens
on, or, for a server on every interface (``0.0.0.0``), the address this host would reach the
mDNS group from. IPv4 only, as Home Assistant's Wyoming discovery reads it. Runs on the
server's event loop (python-zeroconf's asyncio API).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING, Any

from agent import __version__

if TYPE_CHECKING:
    from zeroconf.asyncio import AsyncZeroconf

__all__ = ["SERVICE", "Announcer", "instance_name"]

SERVICE = "_wyoming._tcp.local."
_MDNS_GROUP = "224.0.0.251"
_ANY = ("0.0.0.0", "")  # noqa: S104 (names the wildcard address; binds nothing)


def instance_name(device_id: str) -> str:
    """The service instance's name: the device id as one DNS label."""
    return device_id.replace(".", "-")[:63]


def _local_address() -> str:
    """The address this host would send to the mDNS group from (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((_MDNS_GROUP, 1))
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


class Announcer:
    """Registers the service at :meth:`start` and withdraws it at :meth:`stop`."""

    def __init__(self, device_id: str, host: str, port: int) -> None:
        self.name = instance_name(device_id)
        self.host, self.port = host, port
        self._zc: AsyncZeroconf | None = None
        self.address: str | None = None

    async def start(self) -> None:
        """Raises ValueError (an address mDNS cannot announce), ImportError, OSError or
        python-zeroconf's errors (a name already taken) with the reason."""
        from zeroconf import IPVersion
        from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

        address = _local_address() if self.host in _ANY else self.host
        try:
            version = ipaddress.ip_address(address).version
        except ValueError:  # a host name: the server binds it, mDNS needs an address
            raise ValueError(f"zeroconf needs an IPv4 address in wyoming.uri, not the name "
                             f"{address!r}") from None
        if version != 4:
            raise ValueError(f"zeroconf announces IPv4 addresses only, not {address}")
        interfaces: Any = [address] if self.host not in _ANY else None
        zc = (AsyncZeroconf(ip_version=IPVersion.V4Only, interfaces=interfaces)
              if interfaces else AsyncZeroconf(ip_version=IPVersion.V4Only))
        info = AsyncServiceInfo(SERVICE, f"{self.name}.{SERVICE}",
                                addresses=[socket.inet_aton(address)], port=self.port,
                                server=f"{self.name}.local.",
                                properties={"program": "tts-agent", "version": __version__})
        try:
            await zc.async_register_service(info)
        except BaseException:
            await zc.async_close()
            raise
        self._zc, self.address = zc, address

    async def stop(self) -> None:
        zc, self._zc = self._zc, None
        if zc is not None:
            await zc.async_unregister_all_services()
            await zc.async_close()
