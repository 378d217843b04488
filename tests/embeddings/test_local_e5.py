"""The e5-small-v2 adapter: pinned files, prefix, pooling, and the centring (issue 27)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from backend.embeddings import ModelFilesError, build_embedder, local_e5
from backend.embeddings.e5_centre import CENTRE, SENTENCES, SENTENCES_SHA256
from backend.embeddings.local_e5 import LocalE5Embedder, compute_centre
from backend.embeddings.port import embed_queries
from tests.support import skip_or_fail


@pytest.fixture(scope="module")
def embedder() -> Iterator[LocalE5Embedder]:
    if not local_e5.installed():
        skip_or_fail(
            f"e5-small-v2 is not installed in {local_e5.default_model_dir()}; run ./install.sh",
            "LIMBIC_REQUIRE_REAL_MODEL",
        )
    yield LocalE5Embedder(intra_op_threads=1)


def test_shape_dtype_unit_length_and_name(embedder: LocalE5Embedder) -> None:
    vectors = embedder.embed(["The user's sister lives in Osaka", "hello", ""])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.model == local_e5.MODEL_ID and embedder.dim == 384
    assert embedder.embed([]).shape == (0, 384)
    with pytest.raises(TypeError):
        embedder.embed("a bare string")  # type: ignore[arg-type]


def test_stored_texts_are_passages_and_searches_queries(embedder: LocalE5Embedder) -> None:
    raw = LocalE5Embedder(intra_op_threads=1, centre=False, prefix="")
    # one text a run: int8 dynamic quantisation scales by what else is in the batch
    passage = raw.raw(["passage: my cat is called Tom"])[0]
    query = raw.raw(["query: my cat is called Tom"])[0]
    np.testing.assert_allclose(embedder.raw(["my cat is called Tom"])[0], passage, atol=1e-6)
    centre = np.asarray(CENTRE, dtype=np.float32)
    for made, by_hand in (
        (embedder.embed(["my cat is called Tom"])[0], passage),
        (embed_queries(embedder, ["my cat is called Tom"])[0], query),
    ):
        expected = (by_hand - centre) / np.linalg.norm(by_hand - centre)
        np.testing.assert_allclose(made, expected, atol=1e-5)


def test_a_query_finds_its_passage_above_a_restated_query(embedder: LocalE5Embedder) -> None:
    # The model card's use: a question against the statements that answer it.
    question = embed_queries(embedder, ["What is my sister's name?"])[0]
    notes = embedder.embed(["The user's sister is called Mei.", "The user is a grumpy old pug."])
    assert float(question @ notes[0]) > float(question @ notes[1]) + 0.2


def test_centring_puts_unrelated_text_near_zero_and_keeps_paraphrases(
    embedder: LocalE5Embedder,
) -> None:
    boss = embed_queries(embedder, ["I had a rough day, my boss yelled at me"])[0]
    pug, sister, again = embedder.embed([
        "The user is a grumpy old pug",
        "The user's sister Mei lives in Osaka",
        "The user's sister lives in Osaka, Japan",
    ])  # fmt: skip
    # Raw e5 puts the two unrelated sentences at 0.78: above the gate's thresholds'
    # scale (MiniLM: 0.22). Centred, unrelated is near 0 and a paraphrase stays high.
    raw = LocalE5Embedder(intra_op_threads=1, centre=False).raw([
        "I had a rough day, my boss yelled at me", "The user is a grumpy old pug",
    ])  # fmt: skip
    assert float(raw[0] @ raw[1]) > 0.7
    assert abs(float(boss @ pug)) < 0.15
    assert float(sister @ again) > 0.8


def test_the_centre_is_the_mean_of_its_sentences(embedder: LocalE5Embedder) -> None:
    # The sentences exactly (an edited list needs a new CENTRE) ...
    digest = hashlib.sha256("\n".join(SENTENCES).encode("utf-8")).hexdigest()
    assert digest == SENTENCES_SHA256
    # ... and the model's mean of them, up to what onnxruntime releases move it (e5_centre).
    np.testing.assert_allclose(np.asarray(compute_centre()), np.asarray(CENTRE), atol=3e-3)


def test_factory_builds_it(embedder: LocalE5Embedder) -> None:
    built = build_embedder("local", model="e5-small-v2", intra_op_threads=1)
    assert isinstance(built, LocalE5Embedder)
    np.testing.assert_allclose(built.embed(["tea"]), embedder.embed(["tea"]), atol=1e-6)
    with pytest.raises(ValueError, match="unknown local embedding model"):
        build_embedder("local", model="no-such-model")


@pytest.fixture
def copied(tmp_path: Path, embedder: LocalE5Embedder) -> Path:
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copy(local_e5.default_model_dir() / name, tmp_path / name)
    return tmp_path


def test_altered_or_missing_files_are_refused(copied: Path) -> None:
    LocalE5Embedder(model_dir=copied, intra_op_threads=1)  # the copies load
    with (copied / "tokenizer.json").open("a", encoding="utf-8") as handle:
        handle.write(" ")
    with pytest.raises(ModelFilesError, match=local_e5.TOKENIZER_SHA256):
        LocalE5Embedder(model_dir=copied, intra_op_threads=1)
    (copied / "model.onnx").unlink()
    with pytest.raises(ModelFilesError, match="not found"):
        LocalE5Embedder(model_dir=copied, intra_op_threads=1)
