"""The memory panel's channel bars: each channel's weighted share under the active mode.

The report comes from the real engine (``retrieve`` → ``report.activation_part``) and is
rendered with the app's own template environment (``make_templates``), as the panel route
does; tests/ui/test_pages.py covers the same through a whole turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from backend.engine.report import activation_part
from backend.longterm.activation import Activation
from backend.memory.retrieve import retrieve
from backend.memory.types import RetrievalPolicy
from backend.web.ui_support import make_templates
from tests.memory.helpers import NOW, memory, unit
from tests.web.harness import REPO

CHANNELS = ("recency", "importance", "relevance", "emotion", "cosine")


class DogReranker:
    """A cross-encoder stand-in: a passage about the dog is relevant, others less."""

    model = "test-reranker"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return [0.9 if "dog" in p else 0.2 for p in passages]


def activation_report(mode: str, rerank_n: int = 0) -> dict[str, Any]:
    """A report's activation part for three memories written just now (recency ~1)."""
    pool = [
        memory("a", "The user's dog Pepper likes the beach", importance=0.8, vector=unit(1, 1)),
        memory("b", "The user plays the cello", importance=0.6, vector=unit(1, 0)),
        memory("c", "The user lives in Lyon", importance=0.9),  # no vector: cosine missing
    ]
    retrieval = retrieve(
        pool,
        now=NOW,
        query_text="my dog Pepper",
        query_vector=unit(1, 1),
        target_emotion=None,
        policy=RetrievalPolicy(k=3, mode=mode, rerank_n=rerank_n),  # type: ignore[arg-type]
        reranker=DogReranker() if rerank_n else None,
    )
    return activation_part(Activation(retrieval, unit(1, 1), 1.0, 2.0, len(pool)))


def render_panel(report: dict[str, Any]) -> str:
    full = {
        "turn_id": "t1",
        "written": [],
        "reinforced": [],
        "superseded": [],
        "rejected": [],
        "queued": [],
        "hippocampus": {"status": "ok", "ms": 10.0, "error": None},
        "reply": {"status": "complete", "error": None},
        **report,
    }
    panel = {
        "session_id": "s1",
        "background": None,
        "short_term": [],
        "emotion": None,
        "report": full,
    }
    templates = make_templates(REPO / "frontend" / "templates")
    return templates.env.get_template("_panel.html").render(panel=panel)


def channel_html(html: str, content: str, channel: str) -> tuple[str, str]:
    """(the channel's class attribute, its <dd> HTML) in the item showing ``content``."""
    item = re.search(
        rf'<li class="activated-item">\s*<p class="activated-content">{re.escape(content)}</p>'
        r".*?</li>",
        html,
        re.S,
    )
    assert item is not None, content
    found = re.search(
        rf'<div class="([^"]*)">\s*<dt>{channel}</dt>\s*<dd>(.*?)</dd>', item.group(0), re.S
    )
    assert found is not None, channel
    return found.group(1), found.group(2)


@pytest.mark.parametrize("mode", ["hybrid", "limbic"])
def test_report_shares_sum_to_the_final_score(mode: str) -> None:
    report = activation_report(mode)
    assert report["activation"]["mode"] == mode
    assert len(report["activated"]) == 3
    for item in report["activated"]:
        assert item["mode"] == mode
        assert set(item["contributions"]) == set(CHANNELS) == set(item["weights"])
        shares = [v for v in item["contributions"].values() if v is not None]
        assert sum(shares) + item["remainder"] == pytest.approx(item["score"]["final"], abs=1e-9)
        assert abs(item["remainder"]) <= 2e-4  # rounding only: no clamp here
        for channel in CHANNELS:
            share, raw = item["contributions"][channel], item["score"][channel]
            if channel in item["unused"] or raw is None:
                assert share is None
            else:
                raw = max(0.0, raw) if channel == "cosine" else raw
                assert share == pytest.approx(item["weights"][channel] * raw, abs=1e-3)
        # the raw channels stay as they were (API clients read them)
        assert set(item["score"]) == {*CHANNELS, "base", "final"}
    lyon = next(i for i in report["activated"] if i["id"] == "c")
    assert lyon["score"]["cosine"] is None and lyon["contributions"]["cosine"] is None
    if mode == "hybrid":
        for item in report["activated"]:
            assert item["unused"] == ["recency", "emotion"]
            assert item["score"]["recency"] == pytest.approx(1.0)  # raw value still there
            assert item["weights"]["recency"] == 0.0
    else:
        assert all(item["unused"] == [] for item in report["activated"])


def test_hybrid_panel_shows_shares_and_recency_as_unused() -> None:
    report = activation_report("hybrid")
    html = render_panel(report)
    assert "in the <strong>hybrid</strong> mode" in html
    dog = next(i for i in report["activated"] if i["id"] == "a")
    for channel in ("recency", "emotion"):
        css, dd = channel_html(html, dog["content"].replace("'", "&#39;"), channel)
        assert css == "channel unused"
        assert ">unused<" in dd and "<meter" not in dd and "0.00" not in dd.split("title=")[0]
        assert "raw value" in dd  # the raw value stays in the tooltip
    assert not re.search(r"<dt>recency</dt>\s*<dd><meter", html)  # no recency bar at all
    css, dd = channel_html(html, dog["content"].replace("'", "&#39;"), "cosine")
    assert css == "channel"
    share = dog["contributions"]["cosine"]
    assert f'<meter min="0" max="1" value="{share}"' in dd
    assert f">{share:.2f}</span>" in dd
    assert f"raw {dog['score']['cosine']:.2f} × weight" in dd
    css, dd = channel_html(html, "The user lives in Lyon", "cosine")
    assert css == "channel missing" and ">missing<" in dd


def test_limbic_panel_weighs_every_channel() -> None:
    report = activation_report("limbic")
    html = render_panel(report)
    assert "in the <strong>limbic</strong> mode" in html
    assert ">unused<" not in html
    css, dd = channel_html(html, "The user plays the cello", "recency")
    assert css == "channel" and "<meter" in dd
    cello = next(i for i in report["activated"] if i["id"] == "b")
    assert f">{cello['contributions']['recency']:.2f}</span>" in dd


def test_an_older_report_without_shares_still_shows_raw_values() -> None:
    report = activation_report("hybrid")
    for item in report["activated"]:
        for key in ("mode", "contributions", "weights", "unused", "remainder"):
            del item[key]
    del report["activation"]["mode"]
    html = render_panel(report)
    assert ">unused<" not in html and "weighted share" not in html
    css, dd = channel_html(html, "The user plays the cello", "recency")
    assert css == "channel" and '<meter min="0" max="1" value="1.0"' in dd


def test_reranked_panel_shows_the_cross_encoders_bar_and_who_it_did_not_read() -> None:
    report = activation_report("hybrid", rerank_n=2)
    read = [i for i in report["activated"] if i["score"]["rerank"] is not None]
    unread = [i for i in report["activated"] if i["score"]["rerank"] is None]
    assert len(read) == 2 and len(unread) == 1
    html = render_panel(report)
    for item in read:
        css, dd = channel_html(html, item["content"].replace("'", "&#39;"), "rerank")
        share = item["contributions"]["rerank"]
        assert css == "channel" and f'<meter min="0" max="1" value="{share}"' in dd
    css, dd = channel_html(html, unread[0]["content"].replace("'", "&#39;"), "rerank")
    assert css == "channel missing" and "did not read" in dd
    # without the stage there is no rerank row at all
    assert "<dt>rerank</dt>" not in render_panel(activation_report("hybrid"))
