"""Small builders for engine tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from backend.memory.types import Emotion, Memory

NOW = datetime(2026, 8, 26, 12, 0, tzinfo=UTC)


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def memory(
    id: str,
    content: str = "",
    *,
    importance: float = 0.5,
    category: str = "general",
    vector: np.ndarray | None = None,
    days_ago: float = 0.0,
    emotion: Emotion | None = None,
    superseded_by: str | None = None,
    keywords: tuple[str, ...] = (),
) -> Memory:
    when = NOW - timedelta(days=days_ago)
    return Memory(
        id=id,
        content=content or f"memory {id}",
        category=category,
        importance=importance,
        created_at=when,
        last_accessed=when,
        embedding=vector,
        emotion=emotion,
        superseded_by=superseded_by,
        keywords=keywords,
    )
