"""The embedder and the store the app starts with, when the configured embedder is not
the one that made the store's vectors (``backend.longterm.reembed``).

At start (``build_services``):

1. ``settle_directories``, before the embedded store opens: a re-embedding that finished
   in the last run left its store in ``chroma.reembed``; it becomes ``chroma`` and the old
   one is kept as ``chroma.before-<model>``.
2. ``plan``: the record says which model made the vectors. A data directory without a
   record (every store from before it) is recorded now: made by the configured model
   when it holds no memory, else by the embedder every earlier version used (MiniLM for
   the embedded provider; for a server, the configured model, which cannot have changed
   unseen). When the configured model is the recorded one, nothing else happens.
   Otherwise the app keeps searching and writing the old store with the old embedder
   (built again when it is an offline one, else none: keywords only meanwhile) while
   ``Reembedding`` fills a new store (``chroma.reembed`` for the embedded Chroma store,
   a fresh in-memory store for an in-memory one); the web app runs it in the background
   and it switches the app over when done. A store this cannot copy (a Chroma server)
   stays on the old embedder, and ``note`` says so (status page, doctor).

Failure policy: none of this stops the app, except a data directory that cannot be
written (the record), which ``build_services`` already refuses earlier.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from backend.config import Settings
from backend.embeddings.factory import DEFAULT_LOCAL_MODEL, build_embedder
from backend.embeddings.port import Embedder, EmbedderUnavailable
from backend.longterm.memory import LongTermMemory
from backend.longterm.reembed import (
    EmbeddingRecord,
    Progress,
    Reembedding,
    read_record,
    write_record,
)
from backend.stores.switching_store import SwitchingVectorStore
from backend.stores.vector_port import VectorStore

log = logging.getLogger(__name__)

STORE_DIR = "chroma"
NEXT_DIR = "chroma.reembed"
#: The model of every embedded store from before the record existed.
LEGACY_EMBEDDED_MODEL = "all-MiniLM-L6-v2-onnx-int8"
#: The offline models by the vector space name they record (``Embedder.model``).
OFFLINE_MODELS = {
    "all-MiniLM-L6-v2-onnx-int8": "all-minilm-l6-v2",
    # (e5's first space, "e5-small-v2-onnx-int8-centred", ``query: `` on every text, is
    # not here: its vectors can no longer be made, so a store in it is searched by words
    # while it is embedded again.)
    "e5-small-v2-onnx-int8-qp-centred": "e5-small-v2",
    # the two blended (``backend.embeddings.fused.space_name``)
    "all-MiniLM-L6-v2-onnx-int8+e5-small-v2-onnx-int8-qp-centred@0.7": "minilm-e5",
    # MiniLM and USE multilingual v3, split (``backend.embeddings.fused.minilm_use``)
    "all-MiniLM-L6-v2-onnx-int8+use-multilingual-v3-numpy@0.7-split": "minilm-use",
}
#: Seconds between progress writes to the record (doctor reads them).
RECORD_EVERY_S = 2.0


def _slug(model: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model or "unknown").strip("-") or "unknown"


def _save(data_dir: Path, record: EmbeddingRecord) -> None:
    """Write the record; a failure is logged, not raised (the next start writes it again,
    and a switch it could not record resumes and ends at once)."""
    try:
        write_record(data_dir, record)
    except OSError as exc:
        log.warning("cannot write the embedding record in %s: %s", data_dir, exc)


def settle_directories(data_dir: Path) -> None:
    """Move a finished re-embedding's store in place (module doc, step 1)."""
    record = read_record(data_dir)
    if record is None or record.store_dir is None:
        return
    new = data_dir / record.store_dir
    if new.is_dir():
        current = data_dir / STORE_DIR
        if current.exists():
            source = record.progress.get("source")
            backup = data_dir / f"{STORE_DIR}.before-{_slug(source)}"
            if backup.exists():
                backup = backup.with_name(f"{backup.name}-{time.strftime('%Y%m%dT%H%M%S')}")
            current.rename(backup)
            log.info("the store made by %s is kept as %s", source, backup)
        new.rename(current)
    write_record(data_dir, replace(record, store_dir=None))


@dataclass
class EmbeddingPlan:
    """What the app starts with (module doc, step 2)."""

    store: VectorStore  # what the app holds: a SwitchingVectorStore while re-embedding
    embedder: Embedder | None  # what it embeds with now (the old one while re-embedding)
    configured: Embedder | None
    data_dir: Path
    record: EmbeddingRecord | None = None
    target: VectorStore | None = None  # the new store being filled
    store_dir: str | None = None  # where ``target`` lives in the data directory
    note: str | None = None  # why a configured change is not applied
    job: Reembedding | None = None

    def attach(self, long_term: LongTermMemory) -> Reembedding | None:
        """The background job, switching ``long_term`` over when done (None: nothing to do)."""
        store = self.store
        if self.target is None or self.configured is None or self.record is None:
            return None
        assert isinstance(store, SwitchingVectorStore)  # plan() made it one
        configured, record, data_dir = self.configured, self.record, self.data_dir
        last_write = [0.0]

        def switched() -> None:  # writes are held: the store was just switched
            long_term.embedder = configured
            progress = self.job.progress() if self.job is not None else {}
            progress.update(state="done", source=record.model)
            _save(data_dir, EmbeddingRecord(configured.model, None, progress, self.store_dir))

        def done(old: VectorStore) -> None:
            close = getattr(old, "close", None)
            if callable(close):
                close()

        def progressed(progress: Progress) -> None:
            now = time.monotonic()
            if progress.state == "running" and now - last_write[0] < RECORD_EVERY_S:
                return
            last_write[0] = now
            if progress.state != "done":
                _save(data_dir, replace(record, progress=progress.as_dict()))

        self.job = Reembedding(
            store, self.target, configured, source_model=record.model,
            on_switch=switched, on_done=done, on_progress=progressed,
        )  # fmt: skip
        return self.job

    def status(self) -> dict[str, Any]:
        """For ``/healthz`` and the status page: the model that embeds now, a re-embedding's
        progress, and a ``note`` in words (the status page shows it)."""
        out: dict[str, Any] = {"model": None if self.embedder is None else self.embedder.model}
        if self.job is not None:
            progress = self.job.progress()
            out["reembedding"] = progress
            if progress["state"] == "done":
                out["model"] = progress["target"]
            else:
                out["note"] = (
                    f"re-embedding the memories with {progress['target']}: "
                    f"{progress['memories_done']} of {progress['memories']} "
                    f"({progress['percent']:.0f}%), {progress['state']}"
                    + (f" ({progress['error']})" if progress["error"] else "")
                    + (
                        "; recall uses the old vectors meanwhile"
                        if self.embedder
                        else "; recall uses words only meanwhile"
                    )
                )
        if self.note:
            out["note"] = self.note
        return out


def _offline(model: str | None, settings: Settings) -> Embedder | None:
    """The offline embedder that made ``model`` vectors, or None (not one, or not loadable)."""
    name = OFFLINE_MODELS.get(model or "")
    if name is None:
        return None
    threads = getattr(settings.embedding, "threads", None)
    try:
        return build_embedder("local", model=name, intra_op_threads=threads)
    except EmbedderUnavailable as exc:
        log.warning("cannot load %s to search the store while it is re-embedded: %s", name, exc)
        return None


def plan(
    settings: Settings,
    store: VectorStore,
    embedder: Embedder | None,
    make_target: Callable[[], VectorStore] | None,
    *,
    from_settings: bool = True,
    old_embedder: Callable[[str | None], Embedder | None] | None = None,
) -> EmbeddingPlan:
    """The store and embedder the app starts with (module doc, step 2). ``make_target``:
    a new empty store to re-embed into (None: this store cannot be copied);
    ``from_settings``: the store is the configuration's (False: a test's or a bench's,
    whose memories are recorded as the configured embedder's); ``old_embedder``: builds
    the embedder of a recorded model (tests pass theirs)."""
    data_dir = settings.storage.data_dir
    result = EmbeddingPlan(store, embedder, embedder, data_dir)
    if embedder is None:
        return result
    configured = embedder.model
    record = read_record(data_dir)
    if record is None or record.model is None:
        embedded = settings.embedding.provider == "embedded"
        legacy = LEGACY_EMBEDDED_MODEL if embedded and from_settings else configured
        if legacy != configured and not any(store.count(ns) for ns in store.namespaces()):
            legacy = configured  # nothing to re-embed
        record = EmbeddingRecord(legacy)
        _save(data_dir, record)
        log.info("recorded that the store's vectors are from %s", record.model)
    if record.model == configured:
        if record.target is not None:  # a switch given up before it finished
            shutil.rmtree(data_dir / NEXT_DIR, ignore_errors=True)
            _save(data_dir, EmbeddingRecord(configured))
        return result
    build_old = old_embedder or (lambda model: _offline(model, settings))
    result.embedder = build_old(record.model)
    if make_target is None:
        result.note = (
            f"the store's vectors are from {record.model}; re-embedding them with {configured} "
            f"is not supported for this store, so the app still embeds with {record.model}"
            if result.embedder is not None
            else f"the store's vectors are from {record.model}, which cannot be loaded here, and "
            f"re-embedding them with {configured} is not supported for this store: "
            "memories are recalled by their words only"
        )
        log.warning("%s", result.note)
        return result
    if record.target != configured:  # a leftover of a switch to another model
        shutil.rmtree(data_dir / NEXT_DIR, ignore_errors=True)
        record = replace(record, target=configured, progress={})
        _save(data_dir, record)
    result.record = record
    result.target = make_target()
    result.store = SwitchingVectorStore(store, standby=result.target)
    log.info(
        "the store's vectors are from %s, the configured embedder is %s: re-embedding in the "
        "background (searching with %s meanwhile)",
        record.model, configured,
        "the old embedder" if result.embedder is not None else "keywords only",
    )  # fmt: skip
    return result


def configured_model(settings: Settings) -> str:
    """The vector space name (``Embedder.model``) the configured embedder has, without
    loading it."""
    role = settings.embedding
    if role.provider == "embedded":
        name = role.model or DEFAULT_LOCAL_MODEL
        return next(space for space, local in OFFLINE_MODELS.items() if local == name)
    return role.model


def recorded_embedder(settings: Settings) -> Embedder | None:
    """The embedder whose vectors ``<data_dir>/chroma`` holds when it is not the configured
    one (a switch still to run, or to finish); ``None`` when it is the configured one.
    ``limbic-memory doctor --repair`` re-embeds lost vectors with it, so that they match
    the rest of the store. Raises ``EmbedderUnavailable`` when that model cannot be loaded.
    """
    record = read_record(settings.storage.data_dir)
    if record is None or record.model is None:
        return None
    model = record.progress.get("source") if record.store_dir else record.model
    if model == configured_model(settings):
        return None
    embedder = _offline(model, settings)
    if embedder is None:
        raise EmbedderUnavailable(f"the store's vectors are from {model}, which cannot be loaded")
    return embedder
