"""Where a server is: on this machine or the local network, or out there (no I/O)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_local_url(base_url: str) -> bool:
    """Whether ``base_url`` is on this machine or the local network."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
