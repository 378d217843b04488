"""How memories live in Chroma: collection layout, record encoding, filters, HNSW settings.

Collections, two per namespace, named ``lm_<32 hex of sha256(user NUL persona)>_<role>``
(Chroma names allow [a-zA-Z0-9._-], 3-512 chars); the readable user/persona sit in the
collection metadata so ``namespaces()`` can list them:

- ``_vec``: memories with a vector, HNSW in cosine space (``HnswParams``);
- ``_novec``: memories without one. Chroma (checked on 1.5) cannot hold a record
  without an embedding: with ``embedding_function=None``, ``add``/``upsert`` without
  embeddings raises "You must provide an embedding function", and the vector index of
  a collection cannot be disabled. So those records carry ``NOVEC_MARKER``, a constant
  1-d vector, in a collection of their own: no zero or fake vector ever reaches the
  real index, ``query`` never sees them, and decoding ignores the marker.

A record is ``(id, document, metadata, embedding)``:

- ``document`` = ``content.casefold()``. Chroma's ``where_document={"$contains": ...}``
  is case-sensitive (and literal: ``%``/``_`` are not wildcards, CJK works, checked), so
  we search a case-folded copy with a case-folded needle.
- ``metadata`` = ``payload`` (JSON of every field, exact: ISO timestamps with
  microseconds, keywords, emotion, links) plus the few flat fields we filter on:
  ``category``, ``subject``, ``importance``, ``salient_importance`` (importance, or -1
  when superseded: one range clause serves ``salient``), ``created_ts`` /
  ``last_accessed_ts`` (float epoch seconds; Chroma keeps metadata floats as f64, so
  distinct microseconds stay distinct and ``created_ts`` sorts like ``created_at``),
  ``superseded``, ``pinned``. Few keys on purpose: Chroma's local engine pays per
  metadata key per record when it reads metadata back (measured: ~2.8x slower reads
  with the 19 flat keys of a first layout than with 3).
  Every key is written on every upsert, so Chroma's merge-on-upsert of metadata never
  leaves a stale value behind.
- ``embedding``: Chroma's cosine space normalises on insert and rescales on read, so a
  vector comes back within 1-2 float32 ulp of what was written (cosines unchanged).

Failure policy: encoding a naive timestamp is a ``ValueError``; decoding a record
without a payload raises ``KeyError`` (a corrupt store is a bug, not a degradation).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from backend.memory.types import Emotion, Memory, Namespace, abouts, normalise_subject
from backend.stores.vector_port import (
    SalientRow,
    require_aware,
    text_needle,
    top_by_importance,
)

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

# Bumped when the record layout changes; stored in every payload and collection.
SCHEMA_VERSION = 1
NOVEC_MARKER: list[float] = [1.0]
ROLE_VECTORS = "vec"
ROLE_NOVECTORS = "novec"
_PREFIX = "lm_"
T = TypeVar("T")
# Rows per scanning ``get``: one unbounded get of 100k rows fails ("too many SQL variables").
SCAN_PAGE = 5000
IDS_CHUNK = 1000  # ids per ``get(ids=...)``


@dataclass(frozen=True, slots=True)
class HnswParams:
    """HNSW settings of new ``_vec`` collections (Chroma 1.x ``configuration={"hnsw": ...}``).

    Chroma's defaults are ef_construction 100, M 16, ef_search 100. Ours come from
    ``python -m bench.ann_recall`` at 100k clustered 384-d vectors, target recall@50
    >= 0.98: on the harder set (``--noise 1.5``) Chroma's defaults reach 0.957 at
    ef_search 100 and 0.976 at 400; M 32 / ef_construction 200 reach 0.983 at 100,
    0.986 at 200 (our default: ~2 ms more than 100) and 0.991 at 400. The cost is a
    slower insert (about half the throughput); queries stay ~10-20 ms.
    All three are fixed when a collection is created; ``ef_search`` can be changed with
    ``collection.modify`` but a running client only picks it up when it reopens.
    """

    ef_construction: int = 200
    ef_search: int = 200
    max_neighbors: int = 32

    def configuration(self) -> dict[str, Any]:
        return {
            "hnsw": {
                "space": "cosine",
                "ef_construction": self.ef_construction,
                "ef_search": self.ef_search,
                "max_neighbors": self.max_neighbors,
            }
        }


# --- collections ----------------------------------------------------------------------


def namespace_hash(ns: Namespace) -> str:
    """32 hex chars of sha256(user_id NUL persona_id): a collection-name-safe id."""
    return hashlib.sha256(f"{ns.user_id}\0{ns.persona_id}".encode()).hexdigest()[:32]


def collection_name(ns: Namespace, role: str) -> str:
    """``lm_<hash>_vec`` or ``lm_<hash>_novec``."""
    return f"{_PREFIX}{namespace_hash(ns)}_{role}"


def collection_metadata(ns: Namespace, role: str) -> dict[str, str | int]:
    """Readable owner of a collection, so ``namespaces()`` can list them."""
    return {
        "lm_user_id": ns.user_id,
        "lm_persona_id": ns.persona_id,
        "lm_role": role,
        "lm_schema": SCHEMA_VERSION,
    }


def namespace_of(name: str, metadata: Mapping[str, Any] | None) -> Namespace | None:
    """The namespace a collection belongs to, ``None`` if it is not one of ours."""
    if not name.startswith(_PREFIX) or not metadata:
        return None
    user, persona = metadata.get("lm_user_id"), metadata.get("lm_persona_id")
    if not isinstance(user, str) or not isinstance(persona, str):
        return None
    ns = Namespace(user, persona)
    return ns if name == collection_name(ns, str(metadata.get("lm_role"))) else None


# --- records --------------------------------------------------------------------------


def document_of(content: str) -> str:
    """The searchable copy of the content (see module doc)."""
    return content.casefold()


def encode_metadata(memory: Memory) -> dict[str, str | int | float | bool]:
    """Chroma metadata of a memory: the exact payload plus the flat filter fields."""
    created = require_aware(memory.created_at, "created_at")
    accessed = require_aware(memory.last_accessed, "last_accessed")
    emotion = memory.emotion
    payload = {
        "v": SCHEMA_VERSION,
        "content": memory.content,
        "category": memory.category,
        "importance": memory.importance,
        "confidence": memory.confidence,
        "emotion": None if emotion is None else [emotion.label, emotion.intensity],
        "keywords": list(memory.keywords),
        "subject": memory.subject,
        "created_at": created.isoformat(timespec="microseconds"),
        "last_accessed": accessed.isoformat(timespec="microseconds"),
        "access_count": memory.access_count,
        "supersedes": memory.supersedes,
        "superseded_by": memory.superseded_by,
        "pinned": memory.pinned,
        "source_session": memory.source_session,
        "about": [a.to_list() for a in memory.about],
    }
    superseded = memory.superseded_by is not None
    return {
        "payload": json.dumps(payload, ensure_ascii=False),
        "category": memory.category,
        "subject": memory.subject,
        "importance": float(memory.importance),
        "salient_importance": -1.0 if superseded else float(memory.importance),
        "created_ts": created.timestamp(),
        "last_accessed_ts": accessed.timestamp(),
        "superseded": superseded,
        "pinned": bool(memory.pinned),
    }


def decode(record_id: str, metadata: Mapping[str, Any], embedding: Any | None = None) -> Memory:
    """The Memory of one Chroma record (``embedding`` None for the vectorless collection)."""
    p = json.loads(str(metadata["payload"]))
    emotion = None if p["emotion"] is None else Emotion(str(p["emotion"][0]), p["emotion"][1])
    vector = None if embedding is None else np.asarray(embedding, dtype=np.float32).copy()
    return Memory(
        id=record_id,
        content=p["content"],
        category=p["category"],
        importance=float(p["importance"]),
        confidence=float(p["confidence"]),
        emotion=emotion,
        keywords=tuple(p["keywords"]),
        subject=normalise_subject(p["subject"]),
        created_at=datetime.fromisoformat(p["created_at"]).astimezone(UTC),
        last_accessed=datetime.fromisoformat(p["last_accessed"]).astimezone(UTC),
        access_count=int(p["access_count"]),
        embedding=vector,
        supersedes=p["supersedes"],
        superseded_by=p["superseded_by"],
        pinned=bool(p["pinned"]),
        source_session=p["source_session"],
        about=abouts(p.get("about")),
    )


# --- filters and scans --------------------------------------------------------------------------


def where_all(*conditions: dict[str, Any] | None) -> dict[str, Any] | None:
    """A Chroma ``where`` requiring every non-None condition (``None`` when there is none)."""
    present = [c for c in conditions if c]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


def list_where(category: str | None, include_superseded: bool) -> dict[str, Any] | None:
    """The metadata filter of ``list``/``count``."""
    return where_all(
        {"category": category} if category is not None else None,
        None if include_superseded else {"superseded": False},
    )


def salient_where(since_ts: float, threshold: float, strict: bool) -> dict[str, Any]:
    """The ``salient`` filter: two range clauses (live-ness is in ``salient_importance``).

    Chroma's local engine pays for every row each clause matches, so there is no third
    ``superseded`` clause (it would match almost every row).
    """
    return {
        "$and": [
            {"last_accessed_ts": {"$gte": since_ts}},
            {"salient_importance": {"$gt" if strict else "$gte": threshold}},
        ]
    }


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size`` (Chroma caps batch and result sizes)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def list_filters(
    category: str | None, text: str | None, include_superseded: bool
) -> dict[str, Any]:
    """``where`` / ``where_document`` of ``list`` and ``count`` (text: case-folded, see codec)."""
    needle = text_needle(text)
    return {
        "where": list_where(category, include_superseded),
        "where_document": {"$contains": needle} if needle is not None else None,
    }


def scan(coll: Collection, include: list[str], **filters: Any) -> Iterator[Any]:
    """Every row passing ``filters`` as ``(id, metadata | None)``, page by page."""
    offset = 0
    while True:
        got = coll.get(include=include, limit=SCAN_PAGE, offset=offset, **filters)  # type: ignore[arg-type]
        metas = got["metadatas"] or [None] * len(got["ids"])
        yield from zip(got["ids"], metas, strict=True)
        if len(got["ids"]) < SCAN_PAGE:
            return
        offset += SCAN_PAGE


def salient_rows(coll: Collection, since_ts: float, floor: float, n: int) -> list[SalientRow]:
    """A superset of the collection's salient top ``n`` via bounded, filtered ``get``s."""

    def fetch(threshold: float, strict: bool, limit: int) -> list[SalientRow]:
        where = salient_where(since_ts, threshold, strict)
        got = coll.get(where=where, limit=limit, include=["metadatas"])  # type: ignore[arg-type]
        metas = got["metadatas"] or []
        return [
            SalientRow(rid, float(m["importance"]), float(m["last_accessed_ts"]))
            for rid, m in zip(got["ids"], metas, strict=True)
        ]

    return top_by_importance(fetch, floor, n)


def fetch(vec: Collection, novec: Collection, ids: Sequence[str]) -> dict[str, Memory]:
    """Memories by id from a namespace's two collections, the ``_vec`` copy winning."""
    found: dict[str, Memory] = {}
    for chunk in chunks(ids, IDS_CHUNK):
        got = vec.get(ids=list(chunk), include=["metadatas", "embeddings"])
        vectors = got["embeddings"] if got["embeddings"] is not None else []
        for rid, meta, emb in zip(got["ids"], got["metadatas"] or [], vectors, strict=True):
            found[rid] = decode(rid, meta, emb)
    for chunk in chunks([i for i in ids if i not in found], IDS_CHUNK):
        got = novec.get(ids=list(chunk), include=["metadatas"])
        for rid, meta in zip(got["ids"], got["metadatas"] or [], strict=True):
            found[rid] = decode(rid, meta)
    return found


def delete_present(coll: Collection, ids: list[str]) -> int:
    """Delete those of ``ids`` that exist (an id lookup is cheap); returns how many."""
    present = coll.get(ids=ids, include=[])["ids"]
    if present:
        coll.delete(ids=list(present))
    return len(present)
