"""Errors in the OpenAI shape ``{"error": {"message", "type", "code"}}``, for every route."""

from __future__ import annotations

import errno
import logging
import sqlite3
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
    507: "insufficient_storage",
}


class APIError(Exception):
    """Raised by routes; rendered as an OpenAI error object with ``status``."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def error_body(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    error = {"message": message, "type": _TYPES.get(status, "api_error"), "code": code}
    if param is not None:  # OpenAI names the offending parameter
        error["param"] = param
    return {"error": error}


def error_response(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(
        error_body(status, message, code, param), status_code=status, headers=headers
    )


def _where(error: Any) -> str:
    return ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"


def _describe_validation(exc: RequestValidationError) -> str:
    parts = [f"{_where(error)}: {error.get('msg', 'invalid')}" for error in exc.errors()[:5]]
    return "; ".join(parts) or "invalid request"


def _param(exc: RequestValidationError) -> str | None:
    """The first offending field, as OpenAI's ``param`` (``stream``, ``messages.0.role``);
    a union's member type that pydantic appends to the path is left out."""
    errors = exc.errors()
    if not errors:
        return None
    loc = [p for p in errors[0].get("loc", ()) if p != "body"]
    while loc and isinstance(loc[-1], str) and ("[" in loc[-1] or loc[-1] in _TYPE_NAMES):
        loc.pop()
    return ".".join(str(p) for p in loc) or None


_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "list", "dict", "function-after"})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.code)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, _describe_validation(exc), "invalid_request", _param(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), None)

    async def _storage(_request: Request, exc: Exception) -> JSONResponse:
        if not is_disk_full(exc):
            raise exc  # to the catch-all below: a 500
        # The failed statement was rolled back, nothing half-written: say what to fix.
        log.error("disk full: %s", type(exc).__name__)
        return error_response(
            507, "the server's disk is full; retry once space has been freed",
            "insufficient_storage",
        )  # fmt: skip

    # Database and OS errors (SQLAlchemy wraps the driver's, ``__cause__`` keeps it).
    for kind in (OSError, sqlite3.Error, DBAPIError):
        app.add_exception_handler(kind, _storage)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(500, "internal error", "internal_error")


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it, e.g. under an SQLAlchemy wrapper) is a full disk:
    ``ENOSPC``/``EDQUOT`` from the OS or SQLite's ``SQLITE_FULL``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(current, sqlite3.Error) and (
            getattr(current, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            or "disk is full" in str(current)
        ):
            return True
        current = current.__cause__ or current.__context__
    return False
