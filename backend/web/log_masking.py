"""Keep API keys out of the server's logs.

Browsers cannot set headers on a WebSocket, so a key may arrive as ``?api_key=...`` (also
accepted on the HTTP chat routes: ``backend.web.deps``), and uvicorn logs request paths
with their query strings (``uvicorn.access``: every request line; ``uvicorn.error``: the
WebSocket handshake). This filter masks such values on uvicorn's loggers.

The access log's formatter unpacks the record's ``args`` as a 5-tuple (client, method,
path, version, status), so the secret is masked *inside* the arguments, keeping their
shape; only a message whose secret is in no string argument is flattened into ``msg``.
"""

from __future__ import annotations

import logging
import re

_SECRET_QUERY = re.compile(r"(?i)((?:api_key|apikey|key|token)=)[^&\s\"']+")
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def mask(text: str) -> str:
    """``text`` with the values of secret-looking query parameters replaced by ``***``."""
    return _SECRET_QUERY.sub(r"\1***", text)


class MaskSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not record.args and isinstance(record.msg, str):  # msg is no format string then
            record.msg = mask(record.msg)
        elif isinstance(record.args, tuple):
            record.args = tuple(mask(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: mask(v) if isinstance(v, str) else v for k, v in record.args.items()}
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logger's problem, not ours
            return True
        masked = mask(message)
        if masked != message:  # the secret came from a non-string argument
            record.msg, record.args = masked, None
        return True


def install_log_masking() -> None:
    """Attach the filter once to uvicorn's loggers (filters survive uvicorn's log config)."""
    for name in UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, MaskSecrets) for f in logger.filters):
            logger.addFilter(MaskSecrets())
