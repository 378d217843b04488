"""``limbic-memory doctor``'s embedding check: which model made the store's vectors, and
how far a re-embedding after an embedder change got (``backend.engine.embedding_switch``).

It reads the data directory's record (``embedding.json``), which the server updates as it
re-embeds; nothing here loads a model. A re-embedding under way, or due at the next start,
is a warning (nothing to repair: the server finishes it in the background).
"""

from __future__ import annotations

from backend.cli.doctor_checks import WARNING, Check
from backend.config import Settings
from backend.engine.embedding_switch import NEXT_DIR, configured_model
from backend.longterm.reembed import read_record, record_path


def check_embedding(settings: Settings) -> Check:
    data_dir = settings.storage.data_dir
    check = Check("embedding", where=str(record_path(data_dir)))
    configured = configured_model(settings)
    record = read_record(data_dir)
    check.details.update(configured=configured, recorded=None if record is None else record.model)
    if record is None or record.model is None:
        check.lines.append(f"no record yet: the next start records it (configured: {configured})")
        return check
    if record.store_dir:
        check.lines.append(
            f"a finished re-embedding ({record.model}) left its store in {record.store_dir}: "
            "the next start moves it in place"
        )
    if record.model == configured and record.target is None:
        check.lines.append(f"the store's vectors are from {configured}, the configured embedder")
        return check
    progress = record.progress
    check.details["reembedding"] = progress
    if record.target is not None and progress:
        check.problem(
            f"re-embedding from {record.model} to {record.target}: "
            f"{progress.get('memories_done', 0)} of {progress.get('memories', '?')} memories "
            f"({progress.get('percent', 0):.0f}%), {progress.get('state', 'waiting')}"
            + (f" ({progress['error']})" if progress.get("error") else "")
            + f"; the server resumes it at its next start (new store: {NEXT_DIR})",
            WARNING,
        )
    if record.target != configured and record.model != configured:
        check.problem(
            f"the store's vectors are from {record.model}, the configured embedder is "
            f"{configured}: the server re-embeds them in the background at its next start",
            WARNING,
        )
    return check
