"""Export and import of a namespace as JSON lines (one memory a line, in the format of
``backend.longterm.jsonl_format``): a user's backup, or a move to another store or
embedder.

Failure policy: unreadable lines never fail an import: they are counted as ``invalid``
(the first 20 reasons kept in ``errors``), and ids already present as ``duplicates``;
vectors from another embedding model are dropped and re-embedded, or left to ``backfill``
when the embedder is down. A store outage raises ``VectorStoreUnavailable``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from backend.longterm.embedding import TolerantEmbedder
from backend.longterm.jsonl_format import InvalidMemoryLine, decode_line, encode_line
from backend.longterm.locks import NamespaceLocks
from backend.memory.types import Memory, Namespace
from backend.stores.vector_port import VectorStore


@dataclass(frozen=True, slots=True)
class ImportReport:
    written: int = 0
    duplicates: int = 0
    invalid: int = 0
    errors: tuple[str, ...] = field(default=())
    # The user's entity edits taken from the file (``backend.engine.memory_transfer``).
    entity_edits: int = 0


class JsonlTransfer:
    """Export and import (no save gate) over one store."""

    def __init__(
        self, store: VectorStore, embedder: TolerantEmbedder, locks: NamespaceLocks
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.locks = locks

    def export_jsonl(self, ns: Namespace) -> Iterator[str]:
        """Every memory of the namespace as JSON lines (each ending in a newline)."""
        model = self.embedder.model
        for memory in sorted(self.store.iter_all(ns), key=lambda m: (m.created_at, m.id)):
            yield encode_line(memory, model) + "\n"

    def import_jsonl(self, ns: Namespace, lines: Iterable[str]) -> ImportReport:
        """Restore memories from JSON lines as they are (no gate): ids already present are
        skipped as duplicates, unreadable lines counted as invalid. Vectors made by another
        embedding model are dropped and re-embedded."""
        batch: list[Memory] = []
        errors: list[str] = []
        duplicates = invalid = 0
        seen: set[str] = set()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                memory, model = decode_line(line)
            except InvalidMemoryLine as exc:
                invalid += 1
                if len(errors) < 20:
                    errors.append(f"line {number}: {exc}")
                continue
            if model != self.embedder.model or (
                memory.embedding is not None
                and self.embedder.present
                and memory.embedding.shape[0] != self.embedder.dim
            ):
                memory = replace(memory, embedding=None)
            if memory.id in seen:
                duplicates += 1
                continue
            seen.add(memory.id)
            batch.append(memory)
        existing = set()
        for start in range(0, len(batch), 500):
            ids = [m.id for m in batch[start : start + 500]]
            existing.update(m.id for m in self.store.get(ns, ids))
        fresh = [m for m in batch if m.id not in existing]
        duplicates += len(batch) - len(fresh)
        vectorless = [i for i, m in enumerate(fresh) if m.embedding is None]
        vectors = self.embedder.embed([fresh[i].content for i in vectorless])
        if vectors is not None:
            for row, index in enumerate(vectorless):
                fresh[index] = replace(fresh[index], embedding=vectors[row])
        with self.locks(ns):
            for start in range(0, len(fresh), 500):
                self.store.upsert(ns, fresh[start : start + 500])
        return ImportReport(len(fresh), duplicates, invalid, tuple(errors))
