"""Reading a whole namespace record by record, for ``limbic-memory doctor``.

``ChromaVectorStore.scan_records`` (``backend.stores.chroma_store``) reads every record of
a namespace the way tolerant reads do (``backend.stores.chroma_reads``; docs/reliability.md)
and counts what reads, what reads without its vector and what does not read at all, so
that ``backend.cli.doctor`` can report it and ``--repair`` re-embed the lost vectors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.errors import NotFoundError

from backend.memory.types import Memory, Namespace
from backend.stores import memory_codec as codec
from backend.stores.chroma_reads import RECORD_UNREADABLE, VECTOR_UNREADABLE, read_records
from backend.stores.vector_port import unique_ids


@dataclass(slots=True)
class RecordScan:
    """Every record of one namespace as ``scan_records`` read it (``backend.cli.doctor``)."""

    namespace: Namespace
    listed: int = 0  # distinct ids the two collections list
    read: int = 0  # of those, read back as a memory (with or without a vector)
    with_vector: int = 0  # read with a readable vector
    without_vector: int = 0  # stored without one (``_novec``: valid, backfill embeds it)
    vector_unreadable: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # no record
    missing_collections: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not (self.vector_unreadable or self.unreadable or self.missing_collections)


def scan_records(
    client: ClientAPI,
    ns: Namespace,
    batch: int,
    on_batch: Callable[[list[Memory], set[str]], None] | None,
) -> RecordScan:
    """The body of ``ChromaVectorStore.scan_records`` (its docstring), run within the
    store's error translation."""
    scan = RecordScan(ns)
    found: dict[str, Collection | None] = {}
    for role in (codec.ROLE_VECTORS, codec.ROLE_NOVECTORS):
        name = codec.collection_name(ns, role)
        try:
            found[role] = client.get_collection(name, embedding_function=None)
        except NotFoundError:
            found[role] = None
            scan.missing_collections.append(name)
    vec, novec = found[codec.ROLE_VECTORS], found[codec.ROLE_NOVECTORS]
    ids = unique_ids(
        [rid for coll in (vec, novec) if coll is not None for rid, _ in codec.scan(coll, [])]
    )
    scan.listed = len(ids)
    for chunk in codec.chunks(ids, batch):
        read = read_records(vec, novec, chunk)
        lost = {i for i, what in read.problems.items() if what == VECTOR_UNREADABLE}
        memories = [read.found[i] for i in chunk if i in read.found]
        scan.read += len(memories)
        scan.with_vector += sum(m.embedding is not None for m in memories)
        scan.without_vector += sum(m.embedding is None and m.id not in lost for m in memories)
        scan.vector_unreadable += [i for i in chunk if i in lost]
        scan.unreadable += [i for i in chunk if read.problems.get(i) == RECORD_UNREADABLE]
        if on_batch is not None and memories:
            on_batch(memories, lost)
    return scan
