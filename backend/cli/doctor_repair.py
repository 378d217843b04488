"""``limbic-memory doctor --repair`` (docs/reliability.md, "``limbic-memory doctor``"):
rebuild the embedded store from its readable records into a fresh directory, verify it
and swap it in (the old one kept as a backup), or, on a Chroma server, re-embed the
unreadable vectors in place. Only the long-term store is repaired; the checks are
``backend.cli.doctor_checks``."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.cli.doctor_checks import (
    STORE_DIR,
    Check,
    check_store,
    guarded,
    open_store,
    opened,
    shown,
)
from backend.config import Settings
from backend.memory.types import Memory, Namespace

if TYPE_CHECKING:
    from backend.embeddings.port import Embedder
    from backend.stores.chroma_store import ChromaVectorStore

EMBED_BATCH = 64


def _embedder(settings: Settings) -> Embedder:
    """The embedder of the store's vectors: the configured one, or the one the data
    directory records while a switch to the configured one is pending (tests replace this)."""
    from backend.engine.embedding_switch import recorded_embedder
    from backend.engine.services import build_embedder

    return recorded_embedder(settings) or build_embedder(settings)


class _Reembedder:
    """New vectors for memories whose vector was lost; ``None`` rows when it cannot."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder: Embedder | None = None
        self.problem: str | None = None

    def vectors(self, memories: list[Memory]) -> list[Any]:
        if self._embedder is None and self.problem is None:
            try:
                self._embedder = _embedder(self._settings)
            except Exception as exc:
                self.problem = f"the embedder cannot be loaded: {exc}"
        result: list[Any] = []
        for start in range(0, len(memories), EMBED_BATCH):
            chunk = memories[start : start + EMBED_BATCH]
            rows: Any = None
            if self._embedder is not None and self.problem is None:
                try:
                    rows = self._embedder.embed([m.content for m in chunk])
                except Exception as exc:
                    self.problem = f"the embedder failed: {exc}"
            result += [None] * len(chunk) if rows is None else list(rows)
        return result


def _write_reembedded(
    store: ChromaVectorStore, ns: Namespace, lost: list[Memory], embed: _Reembedder
) -> tuple[int, int]:
    """Upsert ``lost`` with new vectors; returns (re-embedded, stored without a vector)."""
    from backend.stores.vector_port import EmbeddingDimensionError

    vectors = embed.vectors(lost)
    memories = [replace(m, embedding=v) for m, v in zip(lost, vectors, strict=True)]
    try:
        store.upsert(ns, memories)
    except (EmbeddingDimensionError, ValueError) as exc:
        embed.problem = embed.problem or f"its vectors do not fit the namespace: {exc}"
        memories = [replace(m, embedding=None) for m in lost]
        store.upsert(ns, memories)
    done = sum(m.embedding is not None for m in memories)
    return done, len(memories) - done


def repair_store(settings: Settings, check: Check) -> tuple[list[str], Check]:
    """Repair the store; returns what was done and the store checked again."""
    from backend.stores.vector_port import VectorStoreUnavailable

    try:
        rebuild = _repair_in_place if settings.storage.chroma_url else _rebuild
        actions = rebuild(settings)
    except (VectorStoreUnavailable, OSError) as exc:
        return [f"NOT repaired: the repair failed, nothing was swapped: {exc}"], check
    return actions, guarded("long-term store", check_store, settings)


def _rebuild(settings: Settings) -> list[str]:
    """Copy every readable record into a fresh directory, verify it, swap it in."""

    data_dir = settings.storage.data_dir
    path = data_dir / STORE_DIR
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 100):  # two repairs within one second get distinct names
        suffix = stamp if n == 1 else f"{stamp}-{n}"
        fresh_path = data_dir / f"{STORE_DIR}.repair-{suffix}"
        backup = data_dir / f"{STORE_DIR}.broken-{suffix}"
        if not fresh_path.exists() and not backup.exists():
            break
    try:
        outcome = _copy_verified(settings, path, fresh_path)
    except BaseException:
        shutil.rmtree(fresh_path, ignore_errors=True)  # only ever a partial copy
        raise
    written, reembedded, without, left_behind, others, problem, verify = outcome
    if verify:
        shutil.rmtree(fresh_path, ignore_errors=True)
        return [
            f"NOT repaired: the rebuilt copy did not verify ({'; '.join(verify)}); "
            f"{path} is unchanged"
        ]
    os.replace(path, backup)
    try:
        os.replace(fresh_path, path)
    except OSError:
        os.replace(backup, path)
        raise
    actions = [
        f"rebuilt {path} from {sum(written.values())} readable memories in {len(written)} "
        f"namespace(s) (verified); the old directory is kept as {backup}"
    ]
    if reembedded:
        actions.append(f"re-embedded {reembedded} memories whose vector could not be read")
    if without:
        actions.append(
            f"stored {without} memories without a vector ({problem}); the server's "
            "backfill gives them one when it can (they are listed and found by text meanwhile)"
        )
    if left_behind:
        actions.append(
            f"NOT copied: {len(left_behind)} records without readable text, kept in "
            f"{backup}: {shown(left_behind)}"
        )
    if others:
        actions.append(
            f"NOT copied: collections that are not limbic-memory's, kept in {backup}: "
            + ", ".join(others)
        )
    return actions


def _copy_verified(
    settings: Settings, path: Path, fresh_path: Path
) -> tuple[dict[Namespace, int], int, int, list[str], list[str], str | None, list[str]]:
    """Copy ``path``'s readable records into ``fresh_path`` and read the copy back:
    (memories per namespace, re-embedded, stored without a vector, ids left behind,
    foreign collections, the embedder's problem, what did not verify)."""
    from backend.stores.chroma_store import ChromaVectorStore

    embed = _Reembedder(settings)
    written: dict[Namespace, int] = {}
    reembedded = without = 0
    left_behind: list[str] = []
    with (
        opened(ChromaVectorStore.persistent(path)) as old,
        opened(ChromaVectorStore.persistent(fresh_path)) as fresh,
    ):
        collections = old.collections()
        others = [name for name, ns in collections if ns is None]
        for ns in sorted({ns for _, ns in collections if ns is not None}, key=lambda n: n.key):
            lost: list[Memory] = []

            def copy(
                memories: list[Memory],
                vector_lost: set[str],
                ns: Namespace = ns,
                lost: list[Memory] = lost,
            ) -> None:
                keep = [m for m in memories if m.id not in vector_lost]
                lost.extend(m for m in memories if m.id in vector_lost)
                fresh.upsert(ns, keep)  # readable vectors first: they fix the dimension

            scan = old.scan_records(ns, on_batch=copy)
            for start in range(0, len(lost), EMBED_BATCH):
                done, kept = _write_reembedded(fresh, ns, lost[start : start + EMBED_BATCH], embed)
                reembedded, without = reembedded + done, without + kept
            written[ns] = scan.read
            left_behind += scan.unreadable
        verify = _verify(fresh, written)
    return written, reembedded, without, left_behind, others, embed.problem, verify


def _verify(store: ChromaVectorStore, written: dict[Namespace, int]) -> list[str]:
    """What is wrong with the rebuilt copy (empty: every memory reads back)."""
    problems = []
    for ns, expected in written.items():
        if expected == 0:  # nothing of it was readable: it lives on in the backup only
            continue
        scan = store.scan_records(ns)
        if scan.read != expected or not scan.healthy or store.count(ns) != expected:
            problems.append(f"{ns.persona_id}/{ns.user_id}: {scan.read} of {expected} read back")
    return problems


def _repair_in_place(settings: Settings) -> list[str]:
    """Over HTTP: give the records with an unreadable vector a new one, in place."""
    store, where = open_store(settings)
    assert store is not None
    embed = _Reembedder(settings)
    reembedded = without = 0
    unreadable: list[str] = []
    missing: list[str] = []
    with opened(store):
        for ns in store.namespaces():
            lost: list[Memory] = []
            scan = store.scan_records(
                ns, on_batch=lambda ms, ids, lost=lost: lost.extend(m for m in ms if m.id in ids)
            )
            for start in range(0, len(lost), EMBED_BATCH):
                done, kept = _write_reembedded(store, ns, lost[start : start + EMBED_BATCH], embed)
                reembedded, without = reembedded + done, without + kept
            unreadable += scan.unreadable
            missing += scan.missing_collections
    actions = []
    if reembedded:
        actions.append(f"re-embedded {reembedded} memories in place on {where}")
    if without:
        actions.append(
            f"moved {without} memories to the vectorless collection ({embed.problem}); the "
            "server's backfill gives them one when it can (they are listed and found by "
            "text meanwhile)"
        )
    if unreadable:
        actions.append(
            f"NOT repaired: {len(unreadable)} records without readable text on the server "
            f"(repair its directory with the server stopped): {shown(unreadable)}"
        )
    if missing:
        actions.append(f"NOT repaired: missing collections on the server: {', '.join(missing)}")
    return actions
