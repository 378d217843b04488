"""``limbic-memory doctor``'s reranker check: whether the cross-encoder's files are
installed and intact (``backend.reranking.cross_encoder``; install.sh puts them in place).

Reads and hashes the two files (about 0.1 s); loads no model. A missing or altered file is
a warning, not a repair: the app runs without the reranking stage, and ``./install.sh``
puts the files back. Turned off in the configuration (``memory.rerank_n`` 0), nothing is
checked.
"""

from __future__ import annotations

from backend.cli.doctor_checks import WARNING, Check
from backend.config import Settings


def check_reranker(settings: Settings) -> Check:
    from backend.reranking.cross_encoder import MODEL_ID, default_folder, installed

    check = Check("reranker", where=str(default_folder()))
    memory = settings.memory
    if memory.mode != "hybrid" or memory.rerank_n <= 0:
        check.lines.append("turned off in the configuration (memory.rerank_n is 0)")
        check.details["on"] = False
        return check
    missing = installed()
    check.details["on"] = missing is None
    if missing is None:
        check.lines.append(f"{MODEL_ID}: installed and intact")
    else:
        check.problem(f"{missing}; until then the app ranks without the reranker", WARNING)
    return check
