"""Long-term memory: the pure engine (``backend.memory``) over a vector store
(``backend.stores``) and an embedder (``backend.embeddings``).

``memory.LongTermMemory`` is the public face the turn, the web layer and MCP use. It
composes small parts, each handed what it needs when created and none importing it:
``activation`` (retrieval), ``gated_write`` (the save gate), ``outage`` (writes queued
in the durable ``outbox`` while the store is down), ``editing``, ``versions`` (version
chains), ``upkeep`` (backfill and decay) and ``transfer`` (JSONL, in the format of
``jsonl_format``), over ``locks`` (per-namespace write locks) and ``embedding`` (an
embedder whose outage costs vectors, never a write). ``outbox_replay`` drives
``LongTermMemory`` from above to replay the outbox. See ``docs/memory-model.md`` and
``docs/reliability.md``.
"""
