"""Re-embedding the long-term store after the embedder changed, in the background.

Vectors of two embedding models never mix (``Embedder.model``): the data directory
records which model made its store's vectors (``embedding.json``, :class:`EmbeddingRecord`).
When the app starts with another one configured, ``Reembedding`` copies every memory of
every namespace into a new store, each with a vector from the new embedder and every
other field as it was, while the app goes on reading and writing the old store with the
old embedder (``backend.engine.embedding_switch`` sets this up): the store stays
searchable throughout. Writes made meanwhile are noted by the ``SwitchingVectorStore``
the app holds and carried over; the last of them under a hold on writes, and then the
new store and the new embedder are put in place together. Nothing is deleted: the old
store is kept (the embedded Chroma store as ``chroma.before-<model>``).

An interrupted run resumes where it was: the new store persists, and a memory already in
it with the same content keeps its vector (only its other fields are copied again).
Progress (memories done of the total) is kept in ``progress()`` for the status page and
written to the record for ``limbic-memory doctor``.

Failure policy: an embedder or store that is down stops the run with the exception
(``reembed_loop`` waits and runs it again, resuming); the app meanwhile keeps working on
the old store. A record file that cannot be read is treated as missing (logged).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from backend.embeddings.port import Embedder, EmbedderUnavailable
from backend.memory.types import Memory, Namespace
from backend.stores.switching_store import SwitchingVectorStore, Written
from backend.stores.vector_port import VectorStore, VectorStoreUnavailable

log = logging.getLogger(__name__)

RECORD_FILE = "embedding.json"
#: Memories embedded per call: one e5 batch of short texts takes ~0.3 s on 2 cores, so a
#: turn waits at most that long for the CPU.
BATCH = 32
#: Carry-over rounds before writes are held for the last one (each round is short).
CARRY_ROUNDS = 3
#: Seconds ``reembed_loop`` waits after a run stopped on an outage before resuming.
RETRY_S = 30.0


@dataclass
class EmbeddingRecord:
    """What ``embedding.json`` says: the model that made the store's vectors (``model``,
    ``None`` while unknown), and while a re-embedding runs its ``target`` and progress."""

    model: str | None
    target: str | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    # Where the store is when not where the app opens it: a finished run's new embedded
    # store, moved in place at the next start (``backend.engine.embedding_switch``).
    store_dir: str | None = None


def record_path(data_dir: Path) -> Path:
    return data_dir / RECORD_FILE


def read_record(data_dir: Path) -> EmbeddingRecord | None:
    """The data directory's record, ``None`` without one (a store from before it)."""
    path = record_path(data_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return EmbeddingRecord(
            model=data.get("model"),
            target=data.get("target"),
            progress=dict(data.get("progress") or {}),
            store_dir=data.get("store_dir"),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        log.warning("cannot read %s (%s); treating it as missing", path, exc)
        return None


def write_record(data_dir: Path, record: EmbeddingRecord) -> None:
    """Write the record atomically (a crash leaves the old one or the new one)."""
    path = record_path(data_dir)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(asdict(record), indent=1), encoding="utf-8")
    os.replace(temporary, path)


def _chunks(items: Iterator[Memory], size: int) -> Iterator[list[Memory]]:
    chunk: list[Memory] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass
class Progress:
    source: str | None
    target: str
    state: str = "waiting"  # waiting, running, paused (an outage), done
    namespaces: int = 0
    namespaces_done: int = 0
    memories: int = 0
    memories_done: int = 0
    embedded: int = 0  # vectors made this run (a resumed run skips what it has)
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["percent"] = (
            100.0 if self.state == "done" else
            round(100.0 * self.memories_done / self.memories, 1) if self.memories else 0.0
        )  # fmt: skip
        return data


class Reembedding:
    """Copies ``store``'s memories into ``target`` with vectors from ``embedder``, then
    switches the app over (``on_switch``, called with writes held, after the store switch).

    ``store`` is the ``SwitchingVectorStore`` the app writes through; ``target`` the new
    store (persistent ones make an interrupted run resume); ``on_done``: called after the
    switch, outside the hold (records the new model, closes the old store).
    """

    def __init__(
        self,
        store: SwitchingVectorStore,
        target: VectorStore,
        embedder: Embedder,
        *,
        source_model: str | None,
        on_switch: Callable[[], None],
        on_done: Callable[[VectorStore], None] = lambda old: None,
        on_progress: Callable[[Progress], None] = lambda progress: None,
        batch: int = BATCH,
    ) -> None:
        self.store = store
        self.target = target
        self.embedder = embedder
        self._on_switch = on_switch
        self._on_done = on_done
        self._on_progress = on_progress
        self.batch = batch
        self._lock = threading.Lock()
        self._progress = Progress(source=source_model, target=embedder.model)

    def progress(self) -> dict[str, Any]:
        with self._lock:
            return self._progress.as_dict()

    @property
    def done(self) -> bool:
        with self._lock:
            return self._progress.state == "done"

    def _update(self, **changes: Any) -> None:
        with self._lock:
            self._progress = replace(self._progress, **changes)
            snapshot = self._progress
        self._on_progress(snapshot)

    def run(self, stop: threading.Event | None = None) -> bool:
        """One run (blocking: call it in a thread). True when the switch happened; False
        when ``stop`` was set first (the next run resumes). Raises ``EmbedderUnavailable``
        or ``VectorStoreUnavailable`` on an outage (progress says ``paused``)."""
        stop = stop or threading.Event()
        if self.done:
            return True
        self.store.track()  # before the first read: no write can fall between the passes
        old = self.store.inner
        try:
            namespaces = old.namespaces()
            total = sum(old.count(ns) for ns in namespaces)
            self._update(
                state="running", error=None, started_at=time.time(), namespaces=len(namespaces),
                namespaces_done=0, memories=total, memories_done=0, embedded=0,
            )  # fmt: skip
            for ns in namespaces:
                if stop.is_set():
                    return False
                self._copy_namespace(old, ns, stop)
                with self._lock:
                    done = self._progress.namespaces_done + 1
                self._update(namespaces_done=done)
            self._drop_extra_namespaces(old, namespaces)
            for _ in range(CARRY_ROUNDS):
                if stop.is_set():
                    return False
                written = self.store.take_written()
                if not written:
                    break
                self._carry(old, written)
            with self.store.held():
                self._carry(old, self.store.take_written())
                previous = self.store.switch(self.target)
                self._on_switch()
        except Exception as exc:  # an outage, or a bug: the old store keeps serving
            self._update(state="paused", error=f"{type(exc).__name__}: {exc}")
            raise
        with self._lock:
            memories = self._progress.memories
        self._update(state="done", memories_done=memories, finished_at=time.time())
        log.info(
            "re-embedding done: %d memories now have %s vectors", memories, self.embedder.model
        )
        self._on_done(previous)
        return True

    def _copy(self, ns: Namespace, memories: Sequence[Memory]) -> int:
        """Put ``memories`` into the target with new vectors; returns how many were
        embedded (a memory the target has with the same content keeps its vector)."""
        have = {m.id: m for m in self.target.get(ns, [m.id for m in memories])}
        fresh = [
            m for m in memories
            if m.id not in have or have[m.id].content != m.content or have[m.id].embedding is None
        ]  # fmt: skip
        vectors = self.embedder.embed([m.content for m in fresh]) if fresh else []
        new = {m.id: vector for m, vector in zip(fresh, vectors, strict=True)}
        rows = [
            replace(m, embedding=new[m.id] if m.id in new else have[m.id].embedding)
            for m in memories
        ]
        self.target.upsert(ns, rows)
        return len(fresh)

    def _copy_namespace(self, old: VectorStore, ns: Namespace, stop: threading.Event) -> None:
        seen: set[str] = set()
        for chunk in _chunks(old.iter_all(ns, batch=max(self.batch, 100)), self.batch):
            if stop.is_set():
                return
            embedded = self._copy(ns, chunk)
            seen.update(m.id for m in chunk)
            with self._lock:
                done = self._progress.memories_done + len(chunk)
                made = self._progress.embedded + embedded
            self._update(memories_done=done, embedded=made)
        extra = [m.id for m in self.target.iter_all(ns) if m.id not in seen]
        if extra:  # deleted since an interrupted run copied them
            self.target.delete(ns, extra)

    def _drop_extra_namespaces(self, old: VectorStore, namespaces: Sequence[Namespace]) -> None:
        for ns in set(self.target.namespaces()) - set(namespaces):
            self.target.drop_namespace(ns)

    def _carry(self, old: VectorStore, written: Written) -> None:
        """Bring the target up to date with what writes touched during the copy."""
        for ns in written.dropped:
            self.target.drop_namespace(ns)
        for ns, ids in written.ids.items():
            current = old.get(ns, sorted(ids))
            gone = sorted(ids - {m.id for m in current})
            if gone:
                self.target.delete(ns, gone)
            for start in range(0, len(current), self.batch):
                self._copy(ns, current[start : start + self.batch])


async def reembed_loop(job: Reembedding, *, retry_s: float = RETRY_S) -> None:
    """Run ``job`` in a worker thread until it has switched the app over, resuming after
    an outage; cancelling the task stops the run at its next batch (it resumes at the
    next start)."""
    stop = threading.Event()
    try:
        while True:
            try:
                if await asyncio.to_thread(job.run, stop):
                    return
            except (EmbedderUnavailable, VectorStoreUnavailable) as exc:
                log.warning("re-embedding paused (%s); retrying in %.0f s", exc, retry_s)
            except Exception:  # never takes the app down; the old store keeps serving
                log.exception("re-embedding failed; retrying in %.0f s", retry_s)
            await asyncio.sleep(retry_s)
    finally:
        stop.set()
