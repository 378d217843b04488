"""ChromaVectorStore: the long-term ``VectorStore`` on Chroma (persistent or over HTTP).

Collection layout and record encoding: ``memory_codec``. We always pass our own
embeddings; no Chroma embedding function ever runs (the default one would download a
model). Telemetry is off (``anonymized_telemetry=False``; in chromadb 1.5 the Python
product-telemetry client is a no-op and the Rust bindings carry none).

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
transport errors raise it too, and so does any other Chroma ``InternalError`` (callers
degrade instead of failing). A vector of the wrong dimension raises
``EmbeddingDimensionError`` (a ``ValueError``). A collection deleted behind our back (a
stale cached handle) is looked up again once.

Tolerant reads (docs/reliability.md): an index that disagrees with the records (a second
process wrote the same embedded directory: ``Error finding id`` on every later read of
what it wrote; or a damaged directory) never fails a read. A batch ``get`` that raises
is split in halves down to the ids that fail; a record whose vector cannot be read comes
back without it (``embedding=None``: backfill, an edit or ``limbic-memory doctor
--repair`` gives it a new one); a record with no readable metadata is skipped. Those ids
are logged once per process and kept in ``repair_state()`` (``/healthz``:
``needs_repair``) until they are written or deleted again. ``scan_records`` reads a whole
namespace that way for ``backend.cli.doctor``.
"""

from __future__ import annotations

import builtins
import http.client
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import chromadb
import httpx  # chromadb's HTTP transport: its errors mean "server unreachable"
import numpy as np
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings
from chromadb.errors import InternalError, InvalidArgumentError, NotFoundError

from backend.memory.types import Memory, Namespace
from backend.stores import memory_codec as codec
from backend.stores.memory_codec import HnswParams
from backend.stores.vector_port import (
    DEFAULT_ITER_BATCH,
    DEFAULT_LIST_LIMIT,
    EmbeddingDimensionError,
    VectorStoreUnavailable,
    batch_dimension,
    check_paging,
    last_by_id,
    prepare_vector,
    require_aware,
    salient_key,
    unique_ids,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")


# What could not be read of a listed record (``repair_state``, ``RecordScan``).
VECTOR_UNREADABLE = "vector"  # the record reads, its vector does not
RECORD_UNREADABLE = "record"  # nothing of it reads (no metadata, or an undecodable one)
_DECODE_ERRORS = (KeyError, TypeError, ValueError, IndexError)  # json errors are ValueErrors


@dataclass(frozen=True, slots=True)
class _Pair:
    vec: Collection
    novec: Collection


@dataclass(slots=True)
class _Read:
    """What a tolerant fetch read, and the ids it could not (by what was unreadable)."""

    found: dict[str, Memory] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class RecordScan:
    """Every record of one namespace as ``scan_records`` read it (``backend.cli.doctor``)."""

    namespace: Namespace
    listed: int = 0  # distinct ids the two collections list
    read: int = 0  # of those, read back as a memory (with or without a vector)
    with_vector: int = 0  # read with a readable vector
    without_vector: int = 0  # stored without one (``_novec``: valid, backfill embeds it)
    vector_unreadable: builtins.list[str] = field(default_factory=builtins.list)
    unreadable: builtins.list[str] = field(default_factory=builtins.list)  # no record
    missing_collections: builtins.list[str] = field(default_factory=builtins.list)

    @property
    def healthy(self) -> bool:
        return not (self.vector_unreadable or self.unreadable or self.missing_collections)


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
        self._lock = threading.Lock()
        self._cache: dict[Namespace, _Pair] = {}
        self._write_batch: int | None = None
        # Tolerant reads: (namespace key, id) -> what of it is unreadable; ids warned of.
        self._problems: dict[tuple[str, str], str] = {}
        self._warned: set[tuple[str, str]] = set()
        settings = Settings(anonymized_telemetry=False, allow_reset=allow_reset)
        try:
            if path is not None:
                self._client = chromadb.PersistentClient(path=str(path), settings=settings)
            else:
                assert host is not None
                _probe(host, port, ssl, timeout_s)
                self._client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
                for server in self._http_servers():  # chromadb sets no timeout at all
                    server._session.timeout = httpx.Timeout(timeout_s)
        except VectorStoreUnavailable:
            raise
        except Exception as exc:  # bad path, refused connection, incompatible server
            where = path if path is not None else f"{host}:{port}"
            raise VectorStoreUnavailable(f"cannot open Chroma at {where}: {exc}") from exc
        logger.info("chroma store opened (%s)", "persistent" if path is not None else "http")

    @classmethod
    def persistent(cls, path: str | Path, **kwargs: Any) -> ChromaVectorStore:
        """A store in a local directory (``chromadb.PersistentClient``)."""
        return cls(path=path, **kwargs)

    @classmethod
    def http(cls, host: str, port: int, **kwargs: Any) -> ChromaVectorStore:
        """A store on a Chroma server (``chromadb.HttpClient``), e.g. ``chroma run``."""
        return cls(host=host, port=port, **kwargs)

    def _http_servers(self) -> builtins.list[Any]:
        # The HTTP client and its admin client each own an httpx session (private API,
        # looked up defensively) that ``Client.close`` leaves open: we close them.
        admin = getattr(self._client, "_admin_client", None)
        found = [getattr(self._client, "_server", None), getattr(admin, "_server", None)]
        return [s for s in found if s is not None and hasattr(s, "_session")]

    def close(self) -> None:
        """Release the client (SQLite handles, HTTP connections). Idempotent."""
        servers = self._http_servers()
        self._client.close()
        for server in servers:
            server._session.close()
        with self._lock:
            self._cache.clear()

    def __enter__(self) -> ChromaVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -----------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except httpx.TransportError as exc:
            logger.warning("chroma unreachable: %s", type(exc).__name__)
            raise VectorStoreUnavailable(f"Chroma server unreachable: {exc}") from exc
        except InvalidArgumentError as exc:
            if "dimension" in str(exc):
                raise EmbeddingDimensionError(str(exc)) from exc
            raise
        except InternalError as exc:  # what tolerant reads could not route around
            logger.warning("chroma internal error: %s", exc)
            raise VectorStoreUnavailable(f"Chroma internal error: {exc}") from exc

    # --- tolerant reads and the repair state ------------------------------------------

    @property
    def needs_repair(self) -> bool:
        """Whether a read met a record it could not read (since start, still unwritten)."""
        with self._lock:
            return bool(self._problems)

    @property
    def unreadable(self) -> builtins.list[str]:
        """The ids reads could not (fully) read, sorted; see ``repair_state``."""
        with self._lock:
            return sorted({rid for _, rid in self._problems})

    def repair_state(self) -> dict[str, Any]:
        """For ``/healthz``: ``needs_repair``, and how many records were unreadable."""
        with self._lock:
            kinds = builtins.list(self._problems.values())
        state: dict[str, Any] = {"needs_repair": bool(kinds)}
        if kinds:
            state["unreadable"] = len(kinds)
            state["vectors_unreadable"] = kinds.count(VECTOR_UNREADABLE)
        return state

    def _note_problems(self, ns: Namespace, problems: dict[str, str]) -> None:
        if not problems:
            return
        fresh: builtins.list[str] = []
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

    def _forget_problems(self, ns: Namespace, ids: Sequence[str] | None) -> None:
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

    @staticmethod
    def _get_rows(
        coll: Collection, ids: builtins.list[str], include: builtins.list[str]
    ) -> tuple[builtins.list[tuple[str, Any, Any]], builtins.list[str]]:
        """``(id, metadata, embedding)`` rows of ``ids`` and the ids whose ``get`` raises
        ``InternalError`` (a failing batch is split in halves down to them)."""
        try:
            got = coll.get(ids=ids, include=include)  # type: ignore[arg-type]
        except InternalError:
            if len(ids) == 1:
                return [], ids
            half = len(ids) // 2
            rows, failed = ChromaVectorStore._get_rows(coll, ids[:half], include)
            more, failed_too = ChromaVectorStore._get_rows(coll, ids[half:], include)
            return rows + more, failed + failed_too
        metas = got["metadatas"] or [None] * len(got["ids"])
        vectors = got["embeddings"] if got["embeddings"] is not None else [None] * len(metas)
        return builtins.list(zip(got["ids"], metas, vectors, strict=True)), []

    @staticmethod
    def _decode_rows(
        rows: builtins.list[tuple[str, Any, Any]], read: _Read, *, vector: bool
    ) -> builtins.list[str]:
        """Decode into ``read.found``; returns the ids listed without a decodable record."""
        bad: builtins.list[str] = []
        for rid, meta, emb in rows:
            if rid in read.found:
                continue
            try:
                if meta is None:
                    raise KeyError("payload")
                read.found[rid] = codec.decode(rid, meta, emb if vector else None)
            except _DECODE_ERRORS:
                bad.append(rid)
        return bad

    def _fetch(self, ns: Namespace, pair: _Pair, ids: Sequence[str]) -> dict[str, Memory]:
        """``codec.fetch`` that reads what it can (module doc, "Tolerant reads")."""
        read = self._read(pair.vec, pair.novec, ids)
        self._note_problems(ns, read.problems)
        return read.found

    def _read(self, vec: Collection | None, novec: Collection | None, ids: Sequence[str]) -> _Read:
        read = _Read()
        vector_lost: builtins.list[str] = []
        listed_bad: set[str] = set()
        if vec is not None:
            for chunk in codec.chunks(builtins.list(ids), codec.IDS_CHUNK):
                rows, failed = self._get_rows(
                    vec, builtins.list(chunk), ["metadatas", "embeddings"]
                )
                listed_bad.update(self._decode_rows(rows, read, vector=True))
                if failed:  # the vector (or the whole record) cannot be read: try the record
                    rows, gone = self._get_rows(vec, failed, ["metadatas"])
                    listed_bad.update(self._decode_rows(rows, read, vector=False))
                    listed_bad.update(gone)
                    vector_lost += [rid for rid, _, _ in rows if rid in read.found]
        if novec is not None:
            rest = [i for i in ids if i not in read.found]
            for chunk in codec.chunks(rest, codec.IDS_CHUNK):
                rows, failed = self._get_rows(novec, builtins.list(chunk), ["metadatas"])
                listed_bad.update(self._decode_rows(rows, read, vector=False))
                listed_bad.update(failed)
        read.problems = {rid: VECTOR_UNREADABLE for rid in vector_lost}
        read.problems.update(
            {rid: RECORD_UNREADABLE for rid in listed_bad if rid not in read.found}
        )
        return read

    def _pair(self, ns: Namespace, *, create: bool) -> _Pair | None:
        with self._lock:
            if (cached := self._cache.get(ns)) is not None:
                return cached
            vec_name = codec.collection_name(ns, codec.ROLE_VECTORS)
            novec_name = codec.collection_name(ns, codec.ROLE_NOVECTORS)
            if create:
                vec = self._client.get_or_create_collection(
                    vec_name,
                    configuration=self._hnsw.configuration(),  # type: ignore[arg-type]
                    metadata=codec.collection_metadata(ns, codec.ROLE_VECTORS),
                    embedding_function=None,
                )
                novec = self._client.get_or_create_collection(
                    novec_name,
                    metadata=codec.collection_metadata(ns, codec.ROLE_NOVECTORS),
                    embedding_function=None,
                )
            else:
                try:
                    vec = self._client.get_collection(vec_name, embedding_function=None)
                    novec = self._client.get_collection(novec_name, embedding_function=None)
                except NotFoundError:
                    return None  # reading never creates a namespace
            self._cache[ns] = pair = _Pair(vec, novec)
            return pair

    def _run(self, ns: Namespace, create: bool, op: Callable[[_Pair], T], empty: T) -> T:
        """Run ``op`` on the namespace's collections; re-resolve a stale handle once."""
        with self._errors():
            for attempt in (0, 1):
                pair = self._pair(ns, create=create)
                if pair is None:
                    return empty
                try:
                    return op(pair)
                except NotFoundError:
                    with self._lock:
                        self._cache.pop(ns, None)
                    if attempt:
                        raise
            return empty  # pragma: no cover - the loop always returns or raises

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
            with self._errors():
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

        def op(pair: _Pair) -> None:
            for chunk in codec.chunks([m for m in batch if m.id in vectors], size):
                write(pair.vec, pair.novec, chunk)
            for chunk in codec.chunks([m for m in batch if m.id not in vectors], size):
                write(pair.novec, pair.vec, chunk)

        self._run(ns, True, op, None)
        self._forget_problems(ns, [m.id for m in batch])
        logger.debug("upsert ns=%s n=%d", codec.namespace_hash(ns), len(batch))

    def delete(self, ns: Namespace, ids: Sequence[str]) -> int:
        """Delete these ids from both collections; returns how many existed."""
        wanted = unique_ids(ids)

        def op(pair: _Pair) -> int:
            return sum(
                codec.delete_present(coll, builtins.list(chunk))
                for coll in (pair.vec, pair.novec)
                for chunk in codec.chunks(wanted, codec.IDS_CHUNK)
            )

        if not wanted:
            return 0
        deleted = self._run(ns, False, op, 0)
        self._forget_problems(ns, wanted)
        return deleted

    def drop_namespace(self, ns: Namespace) -> None:
        """Delete both collections of the namespace (missing ones are fine)."""
        with self._lock:
            self._cache.pop(ns, None)
        self._forget_problems(ns, None)
        with self._errors():
            for role in (codec.ROLE_VECTORS, codec.ROLE_NOVECTORS):
                with suppress(NotFoundError):
                    self._client.delete_collection(codec.collection_name(ns, role))

    # --- reads --------------------------------------------------------------------

    def get(self, ns: Namespace, ids: Sequence[str]) -> builtins.list[Memory]:
        """The memories of these ids in the order asked; missing ids skipped."""
        wanted = unique_ids(ids)
        if not wanted:
            return []
        found = self._run(ns, False, lambda pair: self._fetch(ns, pair, wanted), {})
        return [found[i] for i in wanted if i in found]

    def query(
        self, ns: Namespace, vector: np.ndarray, n: int, *, include_superseded: bool = False
    ) -> builtins.list[tuple[Memory, float]]:
        """ANN top-``n`` in ``_vec``; similarity = 1 - cosine distance (see module doc)."""
        query = prepare_vector(vector)
        if n <= 0:
            return []
        ask = n if include_superseded else n + max(10, n // 5)

        def search(pair: _Pair, k: int, where: dict[str, Any] | None) -> builtins.list[Any]:
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
                except _DECODE_ERRORS:
                    bad[rid] = RECORD_UNREADABLE
            self._note_problems(ns, bad)
            return hits

        def op(pair: _Pair) -> builtins.list[tuple[Memory, float]]:
            hits = search(pair, ask, None)
            if include_superseded:
                return hits
            live = [hit for hit in hits if not hit[0].is_superseded]
            if len(live) >= n or len(hits) < ask:
                return live[:n]
            logger.debug("query: many superseded hits, filtering in Chroma")
            return search(pair, n, {"superseded": False})

        return self._run(ns, False, op, [])

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

        def op(pair: _Pair) -> builtins.list[Memory]:
            created: dict[str, float] = {}  # the _vec copy first, should both exist
            unsortable: dict[str, str] = {}
            for coll in (pair.vec, pair.novec):
                for rid, meta in codec.scan(coll, ["metadatas"], **filters):
                    try:
                        created.setdefault(rid, float(meta["created_ts"]))
                    except _DECODE_ERRORS:  # no readable metadata: the other copy, or none
                        unsortable[rid] = RECORD_UNREADABLE
            self._note_problems(ns, {k: v for k, v in unsortable.items() if k not in created})
            keys = sorted((ts, rid) for rid, ts in created.items())
            page = [rid for _, rid in keys[offset : offset + limit]]
            found = self._fetch(ns, pair, page)
            return [found[i] for i in page if i in found]

        return self._run(ns, False, op, [])

    def count(
        self,
        ns: Namespace,
        *,
        category: str | None = None,
        text: str | None = None,
        include_superseded: bool = True,
    ) -> int:
        """How many memories ``list`` pages through with these filters (an id scan)."""

        def op(pair: _Pair) -> int:
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

        return self._run(ns, False, op, 0)

    def salient(
        self, ns: Namespace, *, since: datetime, min_importance: float, n: int
    ) -> builtins.list[Memory]:
        """Recent, important, live memories via two range filters with a ``limit``."""
        since_ts = require_aware(since, "since").timestamp()
        floor = max(0.0, float(min_importance))  # superseded rows sit at -1
        if n <= 0:
            return []

        def op(pair: _Pair) -> builtins.list[Memory]:
            rows = [
                row
                for coll in (pair.vec, pair.novec)
                for row in codec.salient_rows(coll, since_ts, floor, n)
            ]
            ids = [row.id for row in sorted(rows, key=lambda r: r.key())[:n]]
            found = self._fetch(ns, pair, ids)
            return sorted((found[i] for i in ids if i in found), key=salient_key)

        return self._run(ns, False, op, [])

    def missing_vectors(self, ns: Namespace, limit: int) -> builtins.list[Memory]:
        """Up to ``limit`` memories of the ``_novec`` collection (order unspecified)."""
        if limit <= 0:
            return []

        def op(pair: _Pair) -> builtins.list[Memory]:
            got = pair.novec.get(limit=limit, include=["metadatas"])
            metas = got["metadatas"] or [None] * len(got["ids"])
            read = _Read()
            rows = [(rid, m, None) for rid, m in zip(got["ids"], metas, strict=True)]
            bad = self._decode_rows(rows, read, vector=False)
            self._note_problems(ns, dict.fromkeys(bad, RECORD_UNREADABLE))
            return builtins.list(read.found.values())

        return self._run(ns, False, op, [])

    def iter_all(self, ns: Namespace, batch: int = DEFAULT_ITER_BATCH) -> Iterator[Memory]:
        """Every memory: scan the ids first, then fetch ``batch`` at a time (deleted skipped)."""
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")

        def ids_of(pair: _Pair) -> builtins.list[str]:
            return unique_ids(
                [rid for coll in (pair.vec, pair.novec) for rid, _ in codec.scan(coll, [])]
            )

        ids = self._run(ns, False, ids_of, [])
        for chunk in codec.chunks(ids, batch):
            found = self._run(ns, False, lambda pair, c=chunk: self._fetch(ns, pair, c), {})
            yield from (found[i] for i in chunk if i in found)

    def namespaces(self) -> builtins.list[Namespace]:
        """Namespaces that own at least one of our collections."""
        with self._errors():
            collections = self._client.list_collections()
        found = {codec.namespace_of(c.name, c.metadata) for c in collections}
        return sorted((s for s in found if s is not None), key=lambda s: (s.user_id, s.persona_id))

    def collections(self) -> builtins.list[tuple[str, Namespace | None]]:
        """Every collection's name with its namespace (``None``: not one of ours), by name."""
        with self._errors():
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
        scan = RecordScan(ns)
        with self._errors():
            found: dict[str, Collection | None] = {}
            for role in (codec.ROLE_VECTORS, codec.ROLE_NOVECTORS):
                name = codec.collection_name(ns, role)
                try:
                    found[role] = self._client.get_collection(name, embedding_function=None)
                except NotFoundError:
                    found[role] = None
                    scan.missing_collections.append(name)
            vec, novec = found[codec.ROLE_VECTORS], found[codec.ROLE_NOVECTORS]
            ids = unique_ids(
                [
                    rid
                    for coll in (vec, novec)
                    if coll is not None
                    for rid, _ in codec.scan(coll, [])
                ]
            )
            scan.listed = len(ids)
            for chunk in codec.chunks(ids, batch):
                read = self._read(vec, novec, chunk)
                lost = {i for i, what in read.problems.items() if what == VECTOR_UNREADABLE}
                memories = [read.found[i] for i in chunk if i in read.found]
                scan.read += len(memories)
                scan.with_vector += sum(m.embedding is not None for m in memories)
                scan.without_vector += sum(
                    m.embedding is None and m.id not in lost for m in memories
                )
                scan.vector_unreadable += [i for i in chunk if i in lost]
                scan.unreadable += [i for i in chunk if read.problems.get(i) == RECORD_UNREADABLE]
                if on_batch is not None and memories:
                    on_batch(memories, lost)
        return scan


def _probe(host: str, port: int, ssl: bool, timeout_s: float) -> None:
    """Fail fast unless the server answers its heartbeat within ``timeout_s``."""
    conn_type = http.client.HTTPSConnection if ssl else http.client.HTTPConnection
    conn = conn_type(host, port, timeout=timeout_s)
    try:
        conn.request("GET", "/api/v2/heartbeat")
        status = conn.getresponse().status
    except OSError as exc:
        raise VectorStoreUnavailable(f"Chroma at {host}:{port} unreachable: {exc}") from exc
    finally:
        conn.close()
    if status != 200:
        raise VectorStoreUnavailable(f"Chroma at {host}:{port} heartbeat answered {status}")
