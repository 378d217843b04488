"""Request-scoped dependencies: the services, the caller's user id (auth).

With API keys configured the key comes from ``Authorization: Bearer <key>``; on the chat
routes (``CHAT_PATHS``) and the WebSocket, a request without that header may give it as
``?api_key=<key>`` instead, for clients that can set a URL but no header (browsers, the
NeMo Agent Toolkit UI's WebSocket settings). The header wins when both are present.
``backend.web.log_masking`` keeps such query strings out of the access log.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, WebSocket

from backend.engine.services import Services
from backend.web.api_keys import user_for_key
from backend.web.errors import APIError

# Without API keys configured every caller is this user (a single-user, loopback app).
LOCAL_USER = "local"
# The HTTP routes that accept ``?api_key=``: the chat turns only. The REST API keeps to the
# header (its URLs end up in browser histories and bookmarks more easily).
CHAT_PATHS = frozenset(
    {"/v1/chat/completions", "/chat", "/chat/stream", "/generate", "/generate/stream"}
)


def get_services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


def user_for_authorization(services: Services, authorization: str | None) -> str | None:
    """The user id for an ``Authorization`` header, or None when it is missing/wrong."""
    api_keys = services.settings.server.api_keys
    if not api_keys:
        return LOCAL_USER
    if not authorization or not authorization.lower().startswith("bearer "):
        return None
    return user_for_key(api_keys, authorization[7:].strip())


def get_user(request: Request) -> str:
    """The authenticated user id; 401 in the OpenAI shape when keys are configured."""
    services = get_services(request)
    header = request.headers.get("authorization")
    if header is None and request.url.path in CHAT_PATHS and "api_key" in request.query_params:
        header = f"Bearer {request.query_params['api_key']}"
    user = user_for_authorization(services, header)
    if user is None:
        raise APIError(
            401,
            "missing or invalid API key (Authorization: Bearer <key>, or ?api_key=<key> on "
            "the chat routes)",
            "invalid_api_key",
        )
    return user


def websocket_user(websocket: WebSocket) -> str | None:
    services: Services = websocket.app.state.services
    header = websocket.headers.get("authorization")
    if header is None and "api_key" in websocket.query_params:
        header = f"Bearer {websocket.query_params['api_key']}"
    return user_for_authorization(services, header)


ServicesDep = Annotated[Services, Depends(get_services)]
UserDep = Annotated[str, Depends(get_user)]
