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


def error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": _TYPES.get(status, "api_error"), "code": code}}


def error_response(status: int, message: str, code: str | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(status, message, code), status_code=status, headers=headers)


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.code)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, _describe_validation(exc), "invalid_request")

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
