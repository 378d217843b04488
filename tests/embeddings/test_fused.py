"""Two embedders blended (backend.embeddings.fused): the cosine of the joined vectors is
the weighted mean of the parts' cosines, queries take each part's query form, and the
app's blend of MiniLM and e5 loads by its configured name."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from backend.embeddings import build_embedder, local_e5
from backend.embeddings.fused import NAME, WEIGHT, FusedEmbedder
from backend.engine.embedding_switch import OFFLINE_MODELS
from tests.support import skip_or_fail


class Hashed:
    """A deterministic toy embedder: each text's vector from a seeded generator."""

    def __init__(self, name: str, dim: int, *, query_salt: str | None = None) -> None:
        self.model, self.dim, self._salt = name, dim, query_salt

    def _vectors(self, texts: Sequence[str], salt: str = "") -> np.ndarray:
        rows = []
        for text in texts:
            seed = sum((i + 1) * ord(ch) for i, ch in enumerate(self.model + salt + text))
            row = np.random.default_rng(seed).normal(size=self.dim)
            rows.append(row / np.linalg.norm(row))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts)


class WithQueries(Hashed):
    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._vectors(texts, "query")


def test_the_blended_cosine_is_the_weighted_mean_of_the_parts() -> None:
    a, b = Hashed("a", 8), WithQueries("b", 5)
    fused = FusedEmbedder([(a, 0.7), (b, 0.3)])
    texts = ["The user is allergic to peanuts.", "The user has a cat called Pickle."]
    joined = fused.embed(texts)
    assert joined.shape == (2, 13) and joined.dtype == np.float32 and fused.dim == 13
    np.testing.assert_allclose(np.linalg.norm(joined, axis=1), 1.0, atol=1e-6)
    pa, pb = a.embed(texts), b.embed(texts)
    expected = 0.7 * float(pa[0] @ pa[1]) + 0.3 * float(pb[0] @ pb[1])
    assert float(joined[0] @ joined[1]) == pytest.approx(expected, abs=1e-6)
    # A query: each part in its own query form (b has one, a embeds it as any text).
    query = fused.embed_queries(["peanuts?"])
    np.testing.assert_allclose(query[0, :8], np.sqrt(0.7) * a.embed(["peanuts?"])[0], atol=1e-6)
    np.testing.assert_allclose(
        query[0, 8:], np.sqrt(0.3) * b.embed_queries(["peanuts?"])[0], atol=1e-6
    )
    assert fused.model == "a*0.7+b*0.3" and fused.embed([]).shape == (0, 13)
    with pytest.raises(TypeError):
        fused.embed("a bare string")  # type: ignore[arg-type]


@pytest.mark.parametrize("weights", [(0.5, 0.6), (1.0, 0.0), (0.5,)])
def test_weights_must_be_positive_and_sum_to_one(weights: tuple[float, ...]) -> None:
    parts = [(Hashed(f"m{i}", 4), w) for i, w in enumerate(weights)]
    with pytest.raises(ValueError):
        FusedEmbedder(parts)


def test_the_apps_blend_loads_by_name_and_records_its_space() -> None:
    if not local_e5.installed():
        skip_or_fail("e5-small-v2 is not installed; run ./install.sh",
                     "LIMBIC_REQUIRE_REAL_MODEL")  # fmt: skip
    fused = build_embedder("local", model=NAME, intra_op_threads=1)
    assert isinstance(fused, FusedEmbedder) and fused.dim == 768
    minilm, e5 = fused.parts
    texts = ["The user is allergic to peanuts.", "The user has a peanut allergy."]
    joined, m, e = fused.embed(texts), minilm.embed(texts), e5.embed(texts)
    expected = WEIGHT * float(m[0] @ m[1]) + (1 - WEIGHT) * float(e[0] @ e[1])
    assert float(joined[0] @ joined[1]) == pytest.approx(expected, abs=1e-5)
    # A store in this space is searched with it while another is being filled.
    assert OFFLINE_MODELS[fused.model] == NAME
