"""Build the app's services from settings: the one place that wires the components.

Called from the FastAPI lifespan and the CLI, never at import time. Tests and benches
call the same ``build_services`` and hand in only the parts they replace (a scripted
model, a fake embedder, an in-memory store): everything else, the write outbox and the
cluster wrapping included, is built as production builds it, so they run what the app
runs (docs/architecture.md).

Failure policy: bad configuration or a broken install (model files missing or altered,
a data directory that cannot be written) raises ``StartupError`` with a message that
says what to do; nothing is half-created. A Chroma *server* that is down at start is
the exception: the app starts and activation degrades until it is back.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from backend.clock import Clock, SystemClock
from backend.config import EmbeddedHippocampus, OpenAIChat, OpenAIHippocampus, Settings
from backend.data_dir_lock import DataDirBusy, DataDirLock, acquire_data_dir, needs_owner_lock
from backend.embeddings.port import Embedder, EmbedderUnavailable
from backend.engine.embedding_switch import NEXT_DIR, EmbeddingPlan, plan, settle_directories
from backend.engine.turn import TurnEngine, TurnSettings
from backend.llm.llama_model import all_threads
from backend.llm.port import ChatModel, LLMError
from backend.llm.reply_first import ReplyFirst
from backend.llm.server_address import is_local_url
from backend.longterm.memory import LongTermMemory
from backend.longterm.outbox import OutboxError, WriteOutbox
from backend.memory.rerank import Reranker
from backend.personas import PersonaError, PersonaRegistry
from backend.runtime import limit_blas_threads
from backend.sessions.store import SessionStore, SessionStoreError
from backend.stores.change_feed import ChangeFeed, ChangeLoggingVectorStore, SharedLexicalIndex
from backend.stores.in_memory import InMemoryVectorStore
from backend.stores.lexical_index import LexicalIndex
from backend.stores.vector_port import VectorStore

log = logging.getLogger(__name__)


class StartupError(RuntimeError):
    """The app cannot start; the message says why and what to do."""


@dataclass
class Services:
    """The engine plus what only the app needs. The session store, the long-term memory,
    the models, the personas and the clock are the engine's own (read through it), so
    the app and the turns can never hold two different copies."""

    settings: Settings
    engine: TurnEngine
    store: VectorStore  # under the long-term memory's wrappers: for health, and closed here
    # The data directory's owner lock (backend.data_dir_lock), held until close(); None
    # when the stores are shared by design (cluster).
    lock: DataDirLock | None = None
    # The embedder switch (backend.engine.embedding_switch): its background re-embedding.
    embedding: EmbeddingPlan | None = None
    # Why activation's reranking stage is off (turned off, not installed); None while on.
    reranker_off: str | None = None

    @property
    def sessions(self) -> SessionStore:
        return self.engine.sessions

    @property
    def long_term(self) -> LongTermMemory:
        return self.engine.long_term

    @property
    def embedder(self) -> Embedder | None:
        return self.engine.long_term.embedder

    @property
    def chat(self) -> ChatModel:
        return self.engine.chat

    @property
    def hippocampus(self) -> ChatModel:
        return self.engine.hippocampus

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    @property
    def personas(self) -> PersonaRegistry:
        return self.engine.personas

    @personas.setter
    def personas(self, registry: PersonaRegistry) -> None:  # tests swap in their cards
        self.engine.personas = registry

    async def aclose(self) -> None:
        """Finish in-flight merges, close the models, then ``close()``."""
        try:
            await self.engine.drain()
            for model in {id(m): m for m in (self.chat, self.hippocampus)}.values():
                await model.aclose()
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        self.close()

    def close(self) -> None:
        """Close the stores, then release the data directory."""
        try:
            close = getattr(self.store, "close", None)
            if callable(close):
                close()
            if self.long_term.outbox is not None:
                self.long_term.outbox.close()
            self.sessions.close()
        finally:
            if self.lock is not None:  # only once every store is closed
                self.lock.release()


# Below this the first turns would fill the disk: a new Chroma store alone takes a few
# MiB (its SQLite file and HNSW segments), the session database and the WAL more.
MIN_FREE_BYTES = 16 * 2**20


def _check_writable(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"cannot create the data directory {directory}: {exc}") from exc
    if not os.access(directory, os.W_OK):
        raise StartupError(
            f"the data directory {directory} is read-only; point storage.data_dir "
            "(or LM_DATA_DIR) at a writable directory"
        )
    probe = directory / ".write-probe"
    try:
        with probe.open("wb") as handle:  # written through to the disk: a full one says so
            handle.write(b"ok")
            handle.flush()
            os.fsync(handle.fileno())
        probe.unlink()
    except OSError as exc:
        probe.unlink(missing_ok=True)  # no trace left behind
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StartupError(
                f"the disk holding {directory} is full ({exc.strerror}); free some space "
                "or point storage.data_dir (or LM_DATA_DIR) at another disk"
            ) from exc
        raise StartupError(
            f"cannot write to {directory} ({exc.strerror}); is the disk full?"
        ) from exc
    free = shutil.disk_usage(directory).free
    if free < MIN_FREE_BYTES:
        raise StartupError(
            f"only {free / 2**20:.1f} MiB free on the disk holding {directory} (the app "
            f"needs at least {MIN_FREE_BYTES // 2**20} MiB to start safely); free some "
            "space or point storage.data_dir (or LM_DATA_DIR) at another disk"
        )


def build_embedder(settings: Settings) -> Embedder:
    role = settings.embedding
    if role.provider == "embedded":
        from backend.embeddings.factory import build_embedder as build_local

        try:
            return build_local("local", model=role.model, intra_op_threads=role.threads)
        except EmbedderUnavailable as exc:
            raise StartupError(str(exc)) from exc
    from backend.embeddings.openai_compat import OpenAICompatEmbedder

    return OpenAICompatEmbedder(
        base_url=role.base_url,
        model=role.model,
        api_key=role.api_key_value(),
        dimensions=role.dimensions,
        timeout=role.timeout,
        batch_size=role.batch_size,
        max_retries=role.max_retries,
    )


def _reembed_target(
    settings: Settings, store: VectorStore, own_store: bool
) -> Callable[[], VectorStore] | None:
    """A new empty store of the same kind to re-embed into (embedding_switch), or None
    for a store this cannot copy (a Chroma server, a cluster's, a test's own kind)."""
    if settings.storage.database_url is not None:
        return None
    if own_store:
        from backend.stores.chroma_store import ChromaVectorStore

        return lambda: ChromaVectorStore.persistent(settings.storage.data_dir / NEXT_DIR)
    if isinstance(store, InMemoryVectorStore):
        return InMemoryVectorStore
    return None


# The loaded cross-encoder, shared by every build in this process (tests and benches build
# many): its 35 MB are read, checked and compiled once.
_RERANKERS: dict[str, Reranker] = {}


def build_reranker(settings: Settings) -> tuple[Reranker | None, str | None]:
    """The cross-encoder of activation's reranking stage, or ``None`` and why not.

    Off when the configuration turns it off (``memory.rerank_n`` 0, or the limbic mode);
    a model that is not installed or does not load leaves the stage off with a warning:
    the app runs without it (/healthz says so)."""
    memory = settings.memory
    if memory.mode != "hybrid" or memory.rerank_n <= 0 or memory.rerank_weight <= 0:
        return None, "turned off (memory.rerank_n is 0)"
    from backend.reranking.cross_encoder import MODEL_ID, CrossEncoderReranker
    from backend.reranking.port import RerankerUnavailable
    from backend.wheel_models import WheelModelError

    cached = _RERANKERS.get(MODEL_ID)
    if cached is not None:
        return cached, None
    try:
        reranker = CrossEncoderReranker()
    except (WheelModelError, RerankerUnavailable) as exc:
        log.warning("memory reranking is off: %s", exc)
        return None, f"not available: {exc}"
    _RERANKERS[MODEL_ID] = reranker
    return reranker, None


def build_store(settings: Settings) -> VectorStore:
    from backend.stores.chroma_store import ChromaVectorStore

    url = settings.storage.chroma_url
    if url:
        from backend.stores.lazy_store import LazyVectorStore, http_heartbeat

        parts = urlsplit(url)
        host, https = parts.hostname or "127.0.0.1", parts.scheme == "https"
        port = parts.port or (443 if https else 8000)
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # IPv6 in brackets
        # Lazy: a server down at start is retried on use instead of stopping the app; and
        # while it is down (or hung) calls fail fast until its heartbeat answers again.
        return LazyVectorStore(
            lambda: ChromaVectorStore.http(host, port, ssl=https),
            probe=http_heartbeat(f"{parts.scheme}://{authority}/api/v2/heartbeat"),
        )
    return ChromaVectorStore.persistent(settings.storage.data_dir / "chroma")


# Below this many cores, two local models cannot each have the 4 threads they use.
ROOM_FOR_BOTH_CORES = 8


def _both_local(settings: Settings) -> bool:
    return settings.chat.provider == "embedded" and settings.hippocampus.provider == "embedded"


def one_local_server(settings: Settings) -> bool:
    """Both roles on one server on this machine or the local network: such servers
    (llama-cpp-python's, llama-server, LM Studio) mostly serve one request at a time,
    and llama-cpp-python's cuts a running stream short when another request comes in."""
    chat, hippocampus = settings.chat, settings.hippocampus
    if not (isinstance(chat, OpenAIChat) and isinstance(hippocampus, OpenAIHippocampus)):
        return False
    return chat.base_url == hippocampus.base_url and is_local_url(chat.base_url)


def reply_first(settings: Settings) -> ReplyFirst | None:
    """The turn-taking of the two roles (``backend.llm.reply_first``): two local models
    on a small machine share its cores; two roles on one local server share its one
    slot (a hippocampus request waits for the streaming reply). None when they run side
    by side: separate servers, a big machine, or turned off."""
    if one_local_server(settings):
        return ReplyFirst()
    hippocampus = settings.hippocampus
    if not _both_local(settings) or not isinstance(hippocampus, EmbeddedHippocampus):
        return None
    wanted = hippocampus.yield_to_reply
    if wanted == "auto":
        wanted = (os.cpu_count() or 1) < ROOM_FOR_BOTH_CORES
    return ReplyFirst() if wanted else None


# config's hippocampus.json_mode → where the client starts (backend.llm.openai_negotiation).
JSON_MODES = {"schema": "json_schema", "object": "json_object", "none": "prompt"}


def build_chat_model(
    settings: Settings, role_name: str, turns: ReplyFirst | None = None
) -> ChatModel:
    from backend.llm.factory import build_chat_model as build
    from backend.llm.presets import default_preset

    role: Any = getattr(settings, role_name)
    options: dict[str, Any]
    if role.provider == "embedded":
        options = {
            "model_path": role.model_path,
            # With no model_path, the role's default preset when none is named.
            "preset": role.model or (None if role.model_path else default_preset(role_name)),
            "n_ctx": role.n_ctx,
            "n_threads": role.n_threads,
            "temperature": role.temperature,
            "max_tokens": role.max_tokens,
            "repeat_penalty": role.repeat_penalty,
        }
        if turns is not None:
            options["reply_first"] = turns
            options["background"] = role_name == "hippocampus"
        elif role.n_threads is None and not _both_local(settings):
            options["n_threads"] = all_threads()  # the only local model: every core
    else:
        options = {
            "base_url": role.base_url,
            "model": role.model,
            "api_key": role.api_key_value() or "",
            "temperature": role.temperature,
            "max_tokens": role.max_tokens,
            "timeout": role.timeout,
            "max_retries": role.max_retries,
        }
        if role_name == "chat":
            options["supports_tools"] = role.tools
            options["supports_images"] = role.vision
        if role_name == "hippocampus":
            options["json_mode"] = JSON_MODES[role.json_mode]
        if turns is not None:
            options["reply_first"] = turns
            options["background"] = role_name == "hippocampus"
    try:
        return build(role.provider, **options)
    except LLMError as exc:
        raise StartupError(f"{role_name}: {exc}") from exc


def open_session_store(settings: Settings, clock: Clock) -> SessionStore:
    """SQLite at ``storage.sessions_db``, or PostgreSQL at ``storage.database_url``."""
    url = settings.storage.database_url
    target = settings.storage.sessions_db if url is None else url.get_secret_value()
    try:
        return SessionStore(target, clock)
    except SessionStoreError as exc:  # its message names the database, password masked
        raise StartupError(str(exc)) from exc


def cluster_wrapping(
    settings: Settings, sessions: SessionStore, store: VectorStore, lexical_pool: int
) -> tuple[VectorStore, LexicalIndex | None]:
    """With a shared (PostgreSQL) session database, several processes write the long-term
    store: log each write, and keep the lexical index current with the others' writes
    (``backend.stores.change_feed``). Otherwise the store as it is."""
    if settings.storage.database_url is None:
        return store, None
    feed = ChangeFeed(sessions.db)
    lexical = SharedLexicalIndex(feed, store) if lexical_pool > 0 else None
    return ChangeLoggingVectorStore(store, feed), lexical


def turn_settings(settings: Settings) -> TurnSettings:
    chat = settings.chat
    return TurnSettings(
        token_budget=settings.memory.short_term_token_budget,
        hippocampus_timeout_s=settings.hippocampus.timeout,
        hippocampus_mode=hippocampus_mode(settings),
        hippocampus_auto=settings.hippocampus.mode == "auto",
        compact_subjects=settings.hippocampus.compact_subjects,
        use_tools=isinstance(chat, OpenAIChat) and chat.tools,
        reply_guard=chat.reply_guard,
        # Known to the turn, so that a retry of the reply guard can sample a little warmer.
        chat_temperature=chat.temperature,
        # ... and its reply cap, so that a reply cut by it ends at a whole sentence.
        chat_max_tokens=chat.max_tokens,
        retry_deadline_s=chat.retry_deadline,
    )


def hippocampus_mode(settings: Settings) -> Literal["full", "compact"]:
    """``hippocampus.mode``; ``auto``: compact for a model on this machine or the local
    network (embedded, or a server on a loopback or private address: small models on
    small hardware, where a full-contract run reads ~1,600 prompt tokens and takes tens
    of seconds), the full contract (docs/memory-formation.md) for a hosted provider."""
    role = settings.hippocampus
    if role.mode != "auto":
        return role.mode
    if isinstance(role, EmbeddedHippocampus) or is_local_url(role.base_url):
        return "compact"
    return "full"


def acquire_owner_lock(settings: Settings, command: str) -> DataDirLock | None:
    """The data directory for this process alone while it has the embedded stores open
    (``backend.data_dir_lock``); None when they are shared by design (cluster)."""
    if not needs_owner_lock(settings):
        return None
    try:
        return acquire_data_dir(settings.storage.data_dir, command=command)
    except DataDirBusy as exc:
        raise StartupError(str(exc)) from exc
    except OSError as exc:
        raise StartupError(
            f"cannot lock the data directory {settings.storage.data_dir}: {exc}"
        ) from exc


def build_services(
    settings: Settings,
    *,
    clock: Clock | None = None,
    command: str = "serve",
    chat: ChatModel | None = None,
    hippocampus: ChatModel | None = None,
    embedder: Embedder | None = None,
    store: VectorStore | None = None,
    memory_ids: Callable[[], str] | None = None,
    old_embedder: Callable[[str | None], Embedder | None] | None = None,
) -> Services:
    """Every component, wired. Raises ``StartupError`` with a clear message (also when
    another process owns the data directory). ``command``: for the owner record.

    A part given here (a test's or a bench's) replaces the one ``settings`` would build;
    the Services own it from then on (``aclose`` closes it). The data directory is locked
    as in production whatever is replaced: it still holds the outbox, so a test gives
    each build a data directory of its own. ``memory_ids``: new memory ids (a bench's
    deterministic ones). ``old_embedder``: the embedder of a model the store's vectors
    are recorded from, when it is not the configured one (backend.engine.embedding_switch;
    default: the offline ones)."""
    clock = clock or SystemClock()
    limit_blas_threads()
    _check_writable(settings.storage.data_dir)
    lock = acquire_owner_lock(settings, command)
    try:
        try:
            personas = PersonaRegistry.load(
                Path(settings.server.personas_dir),
                settings.server.default_persona,
                base_memory=settings.memory,
            )
        except PersonaError as exc:
            raise StartupError(str(exc)) from exc
        embedder = build_embedder(settings) if embedder is None else embedder
        from_settings = store is None  # not a test's or a bench's
        own_store = from_settings and settings.storage.chroma_url is None
        if own_store:  # a finished re-embedding's store moves in place first
            settle_directories(settings.storage.data_dir)
        store = build_store(settings) if store is None else store
        embedding = plan(
            settings, store, embedder, _reembed_target(settings, store, own_store),
            from_settings=from_settings, old_embedder=old_embedder,
        )  # fmt: skip
        if own_store and embedding.target is not None:
            embedding.store_dir = NEXT_DIR
        sessions = open_session_store(settings, clock)
        interrupted = sessions.mark_incomplete_pending()
        if interrupted:
            log.warning("marked %d interrupted replies as incomplete", interrupted)
        try:  # long-term writes wait here while the store is down (backend.longterm.outbox)
            outbox = WriteOutbox(settings.storage.data_dir / "outbox.sqlite3")
        except OutboxError as exc:
            sessions.close()
            raise StartupError(str(exc)) from exc
        activation = settings.memory.activation_policy()
        reranker, reranker_off = build_reranker(settings)
        shared, lexical = cluster_wrapping(
            settings, sessions, embedding.store, activation.lexical_pool
        )
        ids = {} if memory_ids is None else {"id_factory": memory_ids}
        long_term = LongTermMemory(
            shared,
            embedding.embedder,
            clock,
            gate_policy=settings.memory.gate_policy(),
            activation=activation,
            lexical=lexical,
            outbox=outbox,
            # Recall reads the user's edits of the people and pets of their life.
            entity_edits=lambda ns: sessions.entity_edits(ns.user_id, ns.persona_id),
            reranker=reranker,
            **ids,
        )
        # One model instance per role (each keeps its own prompt cache); two local ones
        # on a small machine take turns, the reply first.
        turns = reply_first(settings)
        engine = TurnEngine(
            sessions=sessions,
            long_term=long_term,
            chat=build_chat_model(settings, "chat", turns) if chat is None else chat,
            hippocampus=(
                build_chat_model(settings, "hippocampus", turns)
                if hippocampus is None
                else hippocampus
            ),
            personas=personas,
            clock=clock,
            settings=turn_settings(settings),
        )
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    embedding.attach(long_term)
    return Services(
        settings, engine, embedding.store, lock, embedding=embedding, reranker_off=reranker_off
    )
