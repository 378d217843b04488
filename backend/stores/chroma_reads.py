"""Tolerant reads of Chroma records, and the repair state of what could not be read.

docs/reliability.md: an index that disagrees with the records (a second process wrote the
same embedded directory: ``Error finding id`` on every later read of what it wrote; or a
damaged directory) never fails a read. A batch ``get`` that raises is split in halves
down to the ids that fail; a record whose vector cannot be read comes back without it
(``embedding=None``: backfill, an edit or ``limbic-memory doctor --repair`` gives it a new
one); a record with no readable metadata is skipped. Those ids are logged once per
process and kept in ``UnreadableRecords`` (``/healthz``: ``needs_repair``) until they
are written or deleted again.

Used by ``ChromaVectorStore`` (``backend.stores.chroma_store``) and the doctor's scan
(``backend.stores.chroma_scan``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chromadb.api.models.Collection import Collection
from chromadb.errors import InternalError

from backend.memory.types import Memory, Namespace
from backend.stores import memory_codec as codec

logger = logging.getLogger(__name__)

# What could not be read of a listed record (``repair_state``, ``RecordScan``).
VECTOR_UNREADABLE = "vector"  # the record reads, its vector does not
RECORD_UNREADABLE = "record"  # nothing of it reads (no metadata, or an undecodable one)
DECODE_ERRORS = (KeyError, TypeError, ValueError, IndexError)  # json errors are ValueErrors


@dataclass(slots=True)
class Read:
    """What a tolerant fetch read, and the ids it could not (by what was unreadable)."""

    found: dict[str, Memory] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


def get_rows(
    coll: Collection, ids: list[str], include: list[str]
) -> tuple[list[tuple[str, Any, Any]], list[str]]:
    """``(id, metadata, embedding)`` rows of ``ids`` and the ids whose ``get`` raises
    ``InternalError`` (a failing batch is split in halves down to them)."""
    try:
        got = coll.get(ids=ids, include=include)  # type: ignore[arg-type]
    except InternalError:
        if len(ids) == 1:
            return [], ids
        half = len(ids) // 2
        rows, failed = get_rows(coll, ids[:half], include)
        more, failed_too = get_rows(coll, ids[half:], include)
        return rows + more, failed + failed_too
    metas = got["metadatas"] or [None] * len(got["ids"])
    vectors = got["embeddings"] if got["embeddings"] is not None else [None] * len(metas)
    return list(zip(got["ids"], metas, vectors, strict=True)), []


def decode_rows(rows: list[tuple[str, Any, Any]], read: Read, *, vector: bool) -> list[str]:
    """Decode into ``read.found``; returns the ids listed without a decodable record."""
    bad: list[str] = []
    for rid, meta, emb in rows:
        if rid in read.found:
            continue
        try:
            if meta is None:
                raise KeyError("payload")
            read.found[rid] = codec.decode(rid, meta, emb if vector else None)
        except DECODE_ERRORS:
            bad.append(rid)
    return bad


def read_records(vec: Collection | None, novec: Collection | None, ids: Sequence[str]) -> Read:
    """``codec.fetch`` that reads what it can (module doc): ``_vec`` first, then ``_novec``."""
    read = Read()
    vector_lost: list[str] = []
    listed_bad: set[str] = set()
    if vec is not None:
        for chunk in codec.chunks(list(ids), codec.IDS_CHUNK):
            rows, failed = get_rows(vec, list(chunk), ["metadatas", "embeddings"])
            listed_bad.update(decode_rows(rows, read, vector=True))
            if failed:  # the vector (or the whole record) cannot be read: try the record
                rows, gone = get_rows(vec, failed, ["metadatas"])
                listed_bad.update(decode_rows(rows, read, vector=False))
                listed_bad.update(gone)
                vector_lost += [rid for rid, _, _ in rows if rid in read.found]
    if novec is not None:
        rest = [i for i in ids if i not in read.found]
        for chunk in codec.chunks(rest, codec.IDS_CHUNK):
            rows, failed = get_rows(novec, list(chunk), ["metadatas"])
            listed_bad.update(decode_rows(rows, read, vector=False))
            listed_bad.update(failed)
    read.problems = {rid: VECTOR_UNREADABLE for rid in vector_lost}
    read.problems.update({rid: RECORD_UNREADABLE for rid in listed_bad if rid not in read.found})
    return read


class UnreadableRecords:
    """The records reads could not (fully) read since start, until written or deleted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (namespace key, id) -> what of it is unreadable; ids warned of.
        self._problems: dict[tuple[str, str], str] = {}
        self._warned: set[tuple[str, str]] = set()

    @property
    def needs_repair(self) -> bool:
        with self._lock:
            return bool(self._problems)

    @property
    def ids(self) -> list[str]:
        """The unreadable ids, sorted."""
        with self._lock:
            return sorted({rid for _, rid in self._problems})

    def repair_state(self) -> dict[str, Any]:
        """For ``/healthz``: ``needs_repair``, and how many records were unreadable."""
        with self._lock:
            kinds = list(self._problems.values())
        state: dict[str, Any] = {"needs_repair": bool(kinds)}
        if kinds:
            state["unreadable"] = len(kinds)
            state["vectors_unreadable"] = kinds.count(VECTOR_UNREADABLE)
        return state

    def note(self, ns: Namespace, problems: dict[str, str]) -> None:
        """Keep these ids of ``ns`` as unreadable; warn once per id and process."""
        if not problems:
            return
        fresh: list[str] = []
        with self._lock:
            for rid, what in problems.items():
                key = (ns.key, rid)
                self._problems[key] = what
                if key not in self._warned:
                    self._warned.add(key)
                    fresh.append(f"{rid} ({what})")
        if fresh:
            logger.warning(
                "chroma: %d record(s) of namespace %s cannot be read, skipped or read "
                "without their vector: %s (run `limbic-memory doctor`)",
                len(fresh),
                codec.namespace_hash(ns),
                ", ".join(fresh),
            )

    def forget(self, ns: Namespace, ids: Sequence[str] | None) -> None:
        """Written or deleted again: no longer unreadable (``None``: the whole namespace)."""
        with self._lock:
            if not self._problems:
                return
            if ids is None:
                doomed = [k for k in self._problems if k[0] == ns.key]
            else:
                doomed = [k for k in ((ns.key, i) for i in ids) if k in self._problems]
            for key in doomed:
                del self._problems[key]
                self._warned.discard(key)
