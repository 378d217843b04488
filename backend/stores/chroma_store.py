"""ChromaVectorStore: the long-term ``VectorStore`` on Chroma (persistent or over HTTP).

Collection layout and record encoding: ``memory_codec``. We always pass our own
embeddings; no Chroma embedding function ever runs (the default one would download a
model). Opening the client, telemetry and error translation: ``chroma_client``; a
namespace's two collections and their cache: ``chroma_collections``.

Costs (chromadb 1.5 local engine, measured by ``bench/ann_recall.py``): a metadata
``where`` clause costs in proportion to the rows it matches and reading metadata back
costs per record, while nearest-neighbour search and id scans are cheap. Hence:

- ``query`` runs unfiltered and drops superseded hits in Python, asking for a few more
  than ``n``; only when too many of those were superseded does it repeat with the
  ``superseded`` filter (slow: it matches nearly every row, but it is always right);
- ``salient`` uses two range clauses and a ``limit``, raising the importance threshold
  until the top ``n`` are certain (``vector_port.top_by_importance``);
- ``count`` scans ids only; ``list`` reads the metadata of every memory that passes
  its filters to sort them (Chroma has no ORDER BY): O(matches), seconds at 100k.

``upsert`` moves a memory between ``_vec`` and ``_novec`` when it gains or loses its
vector: write first, then delete the other copy (a crash in between leaves two copies;
reads prefer the one with the vector).

Failure policy: construction fails fast with ``VectorStoreUnavailable`` when the server
does not answer its heartbeat within ``timeout_s`` or the path cannot be opened; later
errors are translated by ``chroma_client.chroma_errors``. A collection deleted behind our
back (a stale cached handle) is looked up again once.

Tolerant reads (``chroma_reads``; docs/reliability.md): a record the index cannot read
never fails a read; it is skipped or read without its vector, and kept in
``repair_state()`` (``/healthz``: ``needs_repair``) until it is written or deleted again.
``scan_records`` reads a whole namespace that way for ``backend.cli.doctor``
(``chroma_scan``).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from chromadb.api.models.Collection import Collection

from backend.memory.types import Memory, Namespace
from backend.stores import memory_codec as codec
from backend.stores.chroma_client import chroma_errors, close_client, open_client
from backend.stores.chroma_collections import NamespaceCollections, Pair
from backend.stores.chroma_reads import (
    DECODE_ERRORS,
    RECORD_UNREADABLE,
    Read,
    UnreadableRecords,
    decode_rows,
    read_records,
)
from backend.stores.chroma_scan import RecordScan
from backend.stores.chroma_scan import scan_records as scan_namespace
from backend.stores.memory_codec import HnswParams
from backend.stores.vector_port import (
    DEFAULT_ITER_BATCH,
    DEFAULT_LIST_LIMIT,
    batch_dimension,
    check_paging,
    last_by_id,
    prepare_vector,
    require_aware,
    salient_key,
    unique_ids,
)

logger = logging.getLogger(__name__)


class ChromaVectorStore:
    """A ``VectorStore`` on a Chroma client; build it with ``persistent`` or ``http``."""

    def __init__(
        self,
        *,
        path: str | Path | None = None,
        host: str | None = None,
        port: int = 8000,
        ssl: bool = False,
        hnsw: HnswParams | None = None,
        allow_reset: bool = False,
        timeout_s: float = 10.0,
    ) -> None:
        """Open a persistent store at ``path`` or connect to a server at ``host:port``.

        Raises ``ValueError`` unless exactly one of ``path``/``host`` is given, and
        ``VectorStoreUnavailable`` when the store cannot be opened or reached.
        """
        if (path is None) == (host is None):
            raise ValueError("give exactly one of path (persistent) or host (HTTP)")
        self._hnsw = hnsw or HnswParams()
        self._write_batch: int | None = None
        self._repair = UnreadableRecords()  # tolerant reads: what could not be read
        self._client = open_client(path, host, port, ssl, allow_reset, timeout_s)
        self._pairs = NamespaceCollections(self._client, self._hnsw)

    @classmethod
    def persistent(cls, path: str | Path, **kwargs: Any) -> ChromaVectorStore:
        """A store in a local directory (``chromadb.PersistentClient``)."""
        return cls(path=path, **kwargs)

    @classmethod
    def http(cls, host: str, port: int, **kwargs: Any) -> ChromaVectorStore:
        """A store on a Chroma server (``chromadb.HttpClient``), e.g. ``chroma run``."""
        return cls(host=host, port=port, **kwargs)

    def close(self) -> None:
        """Release the client (SQLite handles, HTTP connections). Idempotent."""
        close_client(self._client)
        self._pairs.clear()

    def __enter__(self) -> ChromaVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- tolerant reads and the repair state ------------------------------------------

    @property
    def needs_repair(self) -> bool:
        """Whether a read met a record it could not read (since start, still unwritten)."""
        return self._repair.needs_repair

    @property
    def unreadable(self) -> builtins.list[str]:
        """The ids reads could not (fully) read, sorted; see ``repair_state``."""
        return self._repair.ids

    def repair_state(self) -> dict[str, Any]:
        """For ``/healthz``: ``needs_repair``, and how many records were unreadable."""
        return self._repair.repair_state()

    def _fetch(self, ns: Namespace, pair: Pair, ids: Sequence[str]) -> dict[str, Memory]:
        """``codec.fetch`` that reads what it can (module doc, "Tolerant reads")."""
        read = read_records(pair.vec, pair.novec, ids)
        self._repair.note(ns, read.problems)
        return read.found

    # --- writes -------------------------------------------------------------------

    def upsert(self, ns: Namespace, memories: Sequence[Memory]) -> None:
        """Insert or replace by id; the batch is validated before anything is written."""
        batch = last_by_id(memories)
        if not batch:
            return
        batch_dimension(batch)
        vectors = {m.id: prepare_vector(m.embedding) for m in batch if m.embedding is not None}
        metadatas = {m.id: codec.encode_metadata(m) for m in batch}
        if self._write_batch is None:
            with chroma_errors():
                self._write_batch = max(1, min(int(self._client.get_max_batch_size()), 2000))
        size = self._write_batch

        def write(target: Collection, other: Collection, chunk: Sequence[Memory]) -> None:
            ids = [m.id for m in chunk]
            with_vectors = ids[0] in vectors  # a chunk is all one kind
            target.upsert(
                ids=ids,
                embeddings=np.stack([vectors[i] for i in ids])
                if with_vectors
                else [codec.NOVEC_MARKER] * len(ids),
                metadatas=[metadatas[i] for i in ids],  # type: ignore[misc]
                documents=[codec.document_of(m.content) for m in chunk],
            )
            codec.delete_present(other, ids)

        def op(pair: Pair) -> None:
            for chunk in codec.chunks([m for m in batch if m.id in vectors], size):
                write(pair.vec, pair.novec, chunk)
            for chunk in codec.chunks([m for m in batch if m.id not in vectors], size):
                write(pair.novec, pair.vec, chunk)

        self._pairs.run(ns, True, op, None)
        self._repair.forget(ns, [m.id for m in batch])
        logger.debug("upsert ns=%s n=%d", codec.namespace_hash(ns), len(batch))

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        """Delete these ids from both collections; returns how many existed."""
        wanted = unique_ids(ids)

        def op(pair: Pair) -> int:
            return sum(
                codec.delete_present(coll, builtins.list(chunk))
                for coll in (pair.vec, pair.novec)
                for chunk in codec.chunks(wanted, codec.IDS_CHUNK)
            )

        if not wanted:
            return 0
        deleted = self._pairs.run(ns, False, op, 0)
        self._repair.forget(ns, wanted)
        return deleted

    def drop_namespace(self, ns: Namespace) -> None:
        """Delete both collections of the namespace (missing ones are fine)."""
        self._repair.forget(ns, None)
        self._pairs.drop(ns)

    # --- reads --------------------------------------------------------------------

    def get(self, ns: Namespace, ids: Sequence[str]) -> builtins.list[Memory]:
        """The memories of these ids in the order asked; missing ids skipped."""
        wanted = unique_ids(ids)
        if not wanted:
            return []
        found = self._pairs.run(ns, False, lambda pair: self._fetch(ns, pair, wanted), {})
        return [found[i] for i in wanted if i in found]

    def query(
        self, ns: Namespace, vector: np.ndarray, n: int, *, include_superseded: bool = False
    ) -> builtins.list[tuple[Memory, float]]:
        """ANN top-``n`` in ``_vec``; similarity = 1 - cosine distance (see module doc)."""
        query = prepare_vector(vector)
        if n <= 0:
            return []
        ask = n if include_superseded else n + max(10, n // 5)

        def search(pair: Pair, k: int, where: dict[str, Any] | None) -> builtins.list[Any]:
            got = pair.vec.query(
                query_embeddings=[query],
                n_results=k,
                where=where,
                include=["metadatas", "embeddings", "distances"],
            )
            found = (got["metadatas"] or [[]])[0], (got["embeddings"] or [[]])[0]
            rows = zip(got["ids"][0], *found, (got["distances"] or [[]])[0], strict=True)
            hits: builtins.list[tuple[Memory, float]] = []
            bad: dict[str, str] = {}
            for rid, meta, emb, dist in rows:
                try:  # an index entry without a readable record is skipped
                    if meta is None:
                        raise KeyError("payload")
                    hits.append((codec.decode(rid, meta, emb), 1.0 - float(dist)))
                except DECODE_ERRORS:
                    bad[rid] = RECORD_UNREADABLE
            self._repair.note(ns, bad)
            return hits

        def op(pair: Pair) -> builtins.list[tuple[Memory, float]]:
            hits = search(pair, ask, None)
            if include_superseded:
                return hits
            live = [hit for hit in hits if not hit[0].is_superseded]
            if len(live) >= n or len(hits) < ask:
                return live[:n]
            logger.debug("query: many superseded hits, filtering in Chroma")
            return search(pair, n, {"superseded": False})

        return self._pairs.run(ns, False, op, [])

    def list(
        self,
        ns: Namespace,
        *,
        offset: int = 0,
        limit: int = DEFAULT_LIST_LIMIT,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> builtins.list[Memory]:
        """A page ordered by ``(created_at, id)``: filter in Chroma, sort here, fetch the page."""
        check_paging(offset, limit)
        if limit == 0:
            return []
        filters = codec.list_filters(category, text, include_superseded)

        def op(pair: Pair) -> builtins.list[Memory]:
            created: dict[str, float] = {}  # the _vec copy first, should both exist
            unsortable: dict[str, str] = {}
            for coll in (pair.vec, pair.novec):
                for rid, meta in codec.scan(coll, ["metadatas"], **filters):
                    try:
                        created.setdefault(rid, float(meta["created_ts"]))
                    except DECODE_ERRORS:  # no readable metadata: the other copy, or none
                        unsortable[rid] = RECORD_UNREADABLE
            self._repair.note(ns, {k: v for k, v in unsortable.items() if k not in created})
            keys = sorted((ts, rid) for rid, ts in created.items())
            page = [rid for _, rid in keys[offset : offset + limit]]
            found = self._fetch(ns, pair, page)
            return [found[i] for i in page if i in found]

        return self._pairs.run(ns, False, op, [])

    def count(
        self,
        ns: Namespace,
        *,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> int:
        """How many memories ``list`` pages through with these filters (an id scan)."""

        def op(pair: Pair) -> int:
            if category is None and not text and include_superseded:
                return pair.vec.count() + pair.novec.count()
            filters = codec.list_filters(category, text, include_superseded)
            return len(
                {
                    rid
                    for coll in (pair.vec, pair.novec)
                    for rid, _ in codec.scan(coll, [], **filters)
                }
            )

        return self._pairs.run(ns, False, op, 0)

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> builtins.list[Memory]:
        """Recent, important, live memories via two range filters with a ``limit``."""
        since_ts = require_aware(since, "since").timestamp()
        floor = max(0.0, float(min_importance))  # superseded rows sit at -1
        if n <= 0:
            return []

        def op(pair: Pair) -> builtins.list[Memory]:
            rows = [
                row
                for coll in (pair.vec, pair.novec)
                for row in codec.salient_rows(coll, since_ts, floor, n)
            ]
            ids = [row.id for row in sorted(rows, key=lambda r: r.key())[:n]]
            found = self._fetch(ns, pair, ids)
            return sorted((found[i] for i in ids if i in found), key=salient_key)

        return self._pairs.run(ns, False, op, [])

    def missing_vectors(self, ns: Namespace, limit: int) -> builtins.list[Memory]:
        """Up to ``limit`` memories of the ``_novec`` collection (order unspecified)."""
        if limit <= 0:
            return []

        def op(pair: Pair) -> builtins.list[Memory]:
            got = pair.novec.get(limit=limit, include=["metadatas"])
            metas = got["metadatas"] or [None] * len(got["ids"])
            read = Read()
            rows = [(rid, m, None) for rid, m in zip(got["ids"], metas, strict=True)]
            bad = decode_rows(rows, read, vector=False)
            self._repair.note(ns, dict.fromkeys(bad, RECORD_UNREADABLE))
            return builtins.list(read.found.values())

        return self._pairs.run(ns, False, op, [])

    def iter_all(self, ns: Namespace, batch: int = DEFAULT_ITER_BATCH) -> Iterator[Memory]:
        """Every memory: scan the ids first, then fetch ``batch`` at a time (deleted skipped)."""
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")

        def ids_of(pair: Pair) -> builtins.list[str]:
            return unique_ids(
                [rid for coll in (pair.vec, pair.novec) for rid, _ in codec.scan(coll, [])]
            )

        ids = self._pairs.run(ns, False, ids_of, [])
        for chunk in codec.chunks(ids, batch):
            found = self._pairs.run(ns, False, lambda pair, c=chunk: self._fetch(ns, pair, c), {})
            yield from (found[i] for i in chunk if i in found)

    def namespaces(self) -> builtins.list[Namespace]:
        """Namespaces that own at least one of our collections."""
        with chroma_errors():
            collections = self._client.list_collections()
        found = {codec.namespace_of(c.name, c.metadata) for c in collections}
        return sorted((s for s in found if s is not None), key=lambda s: (s.user_id, s.persona_id))

    def collections(self) -> builtins.list[tuple[str, Namespace | None]]:
        """Every collection's name with its namespace (``None``: not one of ours), by name."""
        with chroma_errors():
            collections = self._client.list_collections()
        return sorted((c.name, codec.namespace_of(c.name, c.metadata)) for c in collections)

    def scan_records(
        self,
        ns: Namespace,
        *,
        batch: int = DEFAULT_ITER_BATCH,
        on_batch: Callable[[builtins.list[Memory], set[str]], None] | None = None,
    ) -> RecordScan:
        """Read every record of ``ns`` as tolerant reads do and count what reads (doctor).

        Each collection is looked up on its own, so one whose partner is missing is
        still read (and the missing one reported). ``on_batch(memories, vector_lost)``
        gets each batch of readable memories; those in ``vector_lost`` come without the
        vector they had. Nothing is written and the repair state is left alone.
        """
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        with chroma_errors():
            return scan_namespace(self._client, ns, batch, on_batch)
