"""Keep API keys out of the server's logs.

Browsers cannot set headers on a WebSocket, so a key may arrive as ``?api_key=...``, and
uvicorn logs request paths with their query strings (INFO: the WebSocket handshake,
DEBUG: the request line). This filter masks such values on uvicorn's loggers.
"""

from __future__ import annotations

import logging
import re

_SECRET_QUERY = re.compile(r"(?i)((?:api_key|apikey|key|token)=)[^&\s\"']+")
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


class MaskSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logger's problem, not ours
            return True
        masked = _SECRET_QUERY.sub(r"\1***", message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def install_log_masking() -> None:
    """Attach the filter once to uvicorn's loggers (filters survive uvicorn's log config)."""
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, MaskSecrets) for f in logger.filters):
            logger.addFilter(MaskSecrets())
