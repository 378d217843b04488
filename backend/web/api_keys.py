"""The server's API keys check: which user an API key belongs to (``server.api_keys``).

The keys are configuration (``backend.config``, ``LM_API_KEYS``); checking a caller's key
is the web layer's job: ``backend.web.deps`` (the API, the WebSocket, MCP) and the UI's
sign-in (``backend.web.ui_support``, ``backend.web.ui_pages``) all ask here.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping


def user_for_key(api_keys: Mapping[str, str], key: str) -> str | None:
    """The user id of ``key`` in ``api_keys``, or None when unknown.

    Every known key is compared, in constant time, so the time taken says nothing about
    which key (or how much of one) matched.
    """
    found = None
    for known, user in api_keys.items():
        if hmac.compare_digest(known.encode(), key.encode()):
            found = user
    return found
