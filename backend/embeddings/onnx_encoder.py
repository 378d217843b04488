"""A BERT-style sentence encoder on onnxruntime: what the local embedders share.

``OnnxTextEncoder`` runs one verified ONNX file with its ``tokenizer.json``: WordPiece,
truncation to ``max_tokens``, texts sorted by token count and run ``batch_size`` at a
time (each batch padded to its own longest text, so padding never changes a vector),
pooled (``mean`` over the attention mask, or the ``cls`` token) and L2-normalised; rows
come back in input order. The adapters (``local_minilm``, ``local_e5``) say which files,
which pooling and which prefix.

Failure policy: a file that is missing or does not match its pinned sha256 raises
:class:`ModelFilesError` (:func:`read_verified`); an onnxruntime that cannot load the
verified file, or fails while encoding, raises :class:`EmbedderUnavailable`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from backend.embeddings.port import EmbedderUnavailable, ModelFilesError, l2_normalise_rows

logger = logging.getLogger(__name__)

Pooling = Literal["mean", "cls"]

#: Measured on the 2-core target with MiniLM: 2 threads give 4.2 ms per short query
#: against 4.8 ms with 1; more threads than cores only adds contention.
DEFAULT_INTRA_OP_THREADS = min(2, os.cpu_count() or 1)


def read_verified(path: Path, expected_sha256: str, hint: str) -> bytes:
    """The file's bytes, after checking them against ``expected_sha256``.

    ``hint`` tells the user how to get the right file back (it ends the error message).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFilesError(f"cannot read model file {path} ({exc}); {hint}") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise ModelFilesError(
            f"model file {path} is altered: sha256 {actual}, expected {expected_sha256}; {hint}"
        )
    return data


def session_options(threads: int) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: no console chatter
    # Idle worker threads would otherwise spin after each run, stealing a core from
    # the event loop and the store on a 2-core machine.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class OnnxTextEncoder:
    """Verified ONNX bytes and tokenizer text in, pooled unit vectors out; thread-safe."""

    def __init__(
        self,
        *,
        name: str,
        onnx_bytes: bytes,
        tokenizer_json: str,
        dim: int,
        max_tokens: int,
        pooling: Pooling,
        threads: int,
        batch_size: int,
        source: str = "",
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if threads < 1:
            raise ValueError(f"intra_op_threads must be >= 1, got {threads}")
        tokenizer = Tokenizer.from_str(tokenizer_json)
        # Shipped tokenizer files pad (to 128 or 512) and truncate; we pad per batch
        # ourselves and truncate where the model was trained to.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer = tokenizer
        try:
            self._session = ort.InferenceSession(
                onnx_bytes,
                sess_options=session_options(threads),
                providers=["CPUExecutionProvider"],
            )
        except Exception as exc:  # a verified file that this onnxruntime cannot run
            raise EmbedderUnavailable(
                f"onnxruntime {ort.__version__} cannot load {source or name}: {exc}"
            ) from exc
        self.name = name
        self.dim = dim
        self.threads = threads
        self._pooling = pooling
        self._batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows of shape ``(len(texts), dim)``, in input order."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        started = time.perf_counter()
        if len(texts) == 1:  # encode() skips encode_batch's thread-pool hop (~0.1 ms)
            token_ids = [self._tokenizer.encode(texts[0]).ids]
        else:
            token_ids = [encoding.ids for encoding in self._tokenizer.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            out[chunk] = self._run([token_ids[i] for i in chunk])
        logger.debug(
            "%s: embedded %d texts in %.1f ms",
            self.name,
            len(texts),
            (time.perf_counter() - started) * 1000,
        )
        return out

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        try:
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
        except Exception as exc:  # onnxruntime's errors derive from Exception only
            raise EmbedderUnavailable(f"onnxruntime failed on {self.name}: {exc}") from exc
        if self._pooling == "cls":
            return l2_normalise_rows(hidden[:, 0, :])
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        return l2_normalise_rows(pooled)
