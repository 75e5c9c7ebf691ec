"""The client's address behind a reverse proxy (``AICONSOLE_TRUSTED_PROXIES``).

Sign-in throttling and the audit log key on the caller's address. Behind a proxy every request
comes from the proxy's address, so the proxy says who its client was in ``X-Forwarded-For``; but
anyone can send that header, so it is believed only from the addresses the operator named. This
ASGI middleware wraps the whole application (``console/asgi.py``): the pages, the API, the fast
paths and the WebSockets all see the same ``client``, and Django's ``REMOTE_ADDR`` is it. Unset,
no header is believed (uvicorn's own handling, which trusts 127.0.0.1, is turned off in
``console/cli/server.py``).

The header is read from the right, as each proxy appends the address it was called from: the
first address that is not a trusted proxy is the client. An entry that is not an address ends
the walk at the trusted proxy that wrote it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """``10.0.0.5``, ``10.0.0.0/8`` or ``::1`` each; raises ``ValueError`` naming a bad entry."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not an IP address or network (such as 10.0.0.5 or 10.0.0.0/8)") from None
    return tuple(networks)


def _address(text: str):
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [::1]:port, as some proxies write IPv6
        text = text[1 : text.index("]")]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _trusted(address, networks: tuple[Network, ...]) -> bool:
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def client_address(peer: str, forwarded_for: str, networks: tuple[Network, ...]) -> str:
    """The client's address: ``peer`` unless it is a trusted proxy that forwarded the request."""
    if not forwarded_for or not _trusted(_address(peer), networks):
        return peer
    client = peer
    for entry in reversed(forwarded_for.split(",")):
        address = _address(entry)
        if address is None:
            return client  # the trusted proxy that wrote this cannot say who its client was
        client = str(address)
        if not _trusted(address, networks):
            return client
    return client  # every hop a trusted proxy: the first of them


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return parse_networks(entries)


class TrustedProxyMiddleware:
    """ASGI: a request from a trusted proxy gets its client's address as ``scope["client"]``."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            networks = _networks(tuple(settings.TRUSTED_PROXIES))
            if networks:
                forwarded = ",".join(
                    value.decode("latin-1") for name, value in scope.get("headers", ()) if name == b"x-forwarded-for"
                )
                peer = scope["client"][0]
                address = client_address(peer, forwarded, networks)
                if address != peer:
                    scope = {**scope, "client": (address, 0)}
        await self.app(scope, receive, send)
