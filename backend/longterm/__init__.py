"""Long-term memory: the pure engine (``backend.memory``) over a vector store
(``backend.stores``) and an embedder (``backend.embeddings``).

``memory.LongTermMemory`` is the public face the turn, the web layer and MCP use; the
parts behind it each do one job: activation, the gated write, upkeep (backfill and
decay), JSONL import/export, and the outbox that keeps writes while the store is down.
"""
