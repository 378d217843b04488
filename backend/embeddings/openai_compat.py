"""Embedder for any OpenAI-compatible ``POST /v1/embeddings`` endpoint (openai SDK).

Works with OpenAI itself and with local servers (llama.cpp, Ollama, vLLM, LM Studio,
text-embeddings-inference): the endpoint is configuration, not code. Vectors are
requested as floats (not the SDK's default base64, which several servers lack),
re-ordered by their ``index`` and L2-normalised here, whatever the server does.

``dim`` is ``dimensions`` when given (sent with each request, for models that can
shorten their vectors); otherwise it is learned from the first response, and reading
``dim`` before any response sends one short probe request. A response whose width
differs from ``dim`` is an error, so one embedder never yields two widths.

Failure policy: connection errors, timeouts, HTTP 4xx/5xx, malformed payloads and
zero vectors raise :class:`EmbedderUnavailable` (the SDK first retries
``max_retries`` times on connection errors, 408/409/429 and 5xx). Bad arguments
raise ``ValueError`` at construction.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import numpy as np
import openai

from backend.embeddings.port import EmbedderUnavailable, check_texts, l2_normalise_rows

logger = logging.getLogger(__name__)

#: OpenAI accepts up to 2048 inputs a request; 64 keeps requests small and is what
#: local servers (llama.cpp's default batch) handle without splitting.
DEFAULT_BATCH_SIZE = 64
#: Seconds per request; an embedding of a few sentences takes well under a second.
DEFAULT_TIMEOUT = 10.0
#: One SDK retry: enough for a blip, short enough that the caller degrades quickly.
DEFAULT_MAX_RETRIES = 1
#: The text of the probe request that discovers ``dim`` when nothing else has.
_PROBE_TEXT = "dimension probe"


class OpenAICompatEmbedder:
    """Embeddings from an OpenAI-compatible HTTP API.

    The SDK client is built here (not at import) and reused; ``close()`` releases its
    connections. ``api_key`` may be empty for local servers that ignore it. ``embed``
    sends ``ceil(len(texts) / batch_size)`` requests, one after the other, and is
    thread-safe.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required (e.g. http://127.0.0.1:8080/v1)")
        if not model:
            raise ValueError("model is required")
        if dimensions is not None and dimensions < 1:
            raise ValueError(f"dimensions must be >= 1, got {dimensions}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self._model = model
        self._dimensions = dimensions
        self._dim: int | None = dimensions
        self._batch_size = batch_size
        self._timeout = timeout
        self._lock = threading.Lock()
        # The SDK refuses an empty key; local servers accept any.
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "unused",
            timeout=timeout,
            max_retries=max_retries,
        )

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        """``dimensions``, or the width of the first response (probing if none yet).

        Raises :class:`EmbedderUnavailable` if the probe fails.
        """
        if self._dim is None:
            self.embed([_PROBE_TEXT])
        assert self._dim is not None  # set by the successful embed above
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text, in input order.

        An empty ``texts`` sends nothing and gives shape ``(0, dim)``, or ``(0, 0)``
        while ``dim`` is still unknown. Raises :class:`EmbedderUnavailable` (see the
        module docstring).
        """
        items = check_texts(texts)
        if not items:
            return np.empty((0, self._dim or 0), dtype=np.float32)
        started = time.perf_counter()
        parts = [
            self._request(items[start : start + self._batch_size])
            for start in range(0, len(items), self._batch_size)
        ]
        logger.debug(
            "embedded %d texts in %d requests to %s in %.0f ms",
            len(items),
            len(parts),
            self._model,
            (time.perf_counter() - started) * 1000,
        )
        return np.concatenate(parts, axis=0)

    def close(self) -> None:
        """Release the HTTP connections; the embedder is unusable afterwards."""
        self._client.close()

    def _request(self, batch: list[str]) -> np.ndarray:
        embeddings = self._client.embeddings
        try:
            if self._dimensions is None:
                response = embeddings.create(
                    input=batch, model=self._model, encoding_format="float"
                )
            else:
                response = embeddings.create(
                    input=batch,
                    model=self._model,
                    encoding_format="float",
                    dimensions=self._dimensions,
                )
        except openai.APITimeoutError as exc:
            raise EmbedderUnavailable(
                f"embedding request to {self._model} timed out after {self._timeout:g}s"
            ) from exc
        except openai.APIConnectionError as exc:
            raise EmbedderUnavailable(f"cannot reach the embedding server: {exc}") from exc
        except openai.APIStatusError as exc:
            raise EmbedderUnavailable(
                f"embedding server answered HTTP {exc.status_code}: {exc.message}"
            ) from exc
        except openai.OpenAIError as exc:  # e.g. a response that fails validation
            raise EmbedderUnavailable(f"embedding request failed: {exc}") from exc
        return self._vectors(response, len(batch))

    def _vectors(self, response: object, expected: int) -> np.ndarray:
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise EmbedderUnavailable(f"embedding server returned {got} vectors for {expected}")
        try:
            rows = sorted(data, key=lambda item: item.index)
            matrix = np.asarray([item.embedding for item in rows], dtype=np.float64)
        except (AttributeError, TypeError, ValueError) as exc:
            raise EmbedderUnavailable(f"malformed embedding payload: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbedderUnavailable(f"malformed embedding payload: shape {matrix.shape}")
        if [item.index for item in rows] != list(range(expected)):
            raise EmbedderUnavailable("embedding server returned duplicate or missing indices")
        width = matrix.shape[1]
        with self._lock:
            if self._dim is None:
                self._dim = width
                logger.info("embedding model %s has %d dimensions", self._model, width)
        if width != self._dim:
            raise EmbedderUnavailable(
                f"embedding server returned {width}-d vectors, expected {self._dim} "
                f"(model {self._model}; does the server honour `dimensions`?)"
            )
        return l2_normalise_rows(matrix)
