"""The save gate: what happens to a long-term candidate (docs/memory-model.md, "The save gate").

Pure: the caller hands in the candidate's embedding, the memories placed in this turn's
context and the candidate's nearest stored neighbours; the store applies the decision.

Order of the rules, and why:

1. empty content, low importance or low confidence → ``reject`` (limbic's gate);
2. an explicit ``supersedes`` that names a stored memory → ``supersede <id>``; failing
   that, the same topic with a contradicting value (``backend.memory.contradiction``:
   "the wedding moved to December" against "the wedding is in October") → ``supersede``.
   This runs before the echo and duplicate rules on purpose: "moved to Hangzhou" is
   usually within cosine 0.9 of the "lives in Guangzhou" it replaces, and reinforcing the
   old fact would be exactly wrong;
3. the same fact as a memory recalled this turn, or as a candidate of this same turn
   already written (``siblings``) → ``reinforce <id>`` (the re-extraction feedback loop,
   and one fact said twice in one answer). "Same fact" is retrieval's restatement test
   (``restatements.fact_similarities``: IDF-weighted token cosine, keyword cosine, and the
   vector cosine from ``duplicate_cosine`` on, as retrieval counts it) at
   ``policy.same_fact``, or ``echo_cosine`` on the vectors alone;
4. within ``duplicate_cosine`` of a stored neighbour, or the same fact as one (the test
   of rule 3) → ``reinforce <id>``;
5. otherwise ``write``.

Rule 0 — content, grounding, subject, vocabularies, importance calibration — runs
before this, on the whole turn (``backend.memory.screening``).

Failure policy: a missing or unusable embedding never rejects a candidate; the vector
rules then fall back to comparing normalised text, so an embedder outage costs
deduplication precision, not the memory.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

import numpy as np

from backend.memory.contradiction import contradicts
from backend.memory.grounding import content_tokens, specifics
from backend.memory.hybrid import CorpusStats, memory_tokens
from backend.memory.keywords import extract_keywords
from backend.memory.restatements import fact_similarities
from backend.memory.scoring import cosine
from backend.memory.types import Candidate, GatePolicy, Memory

Action = Literal["write", "reinforce", "supersede", "reject"]

# A ``supersedes`` given as text must share at least this keyword Jaccard with the stored
# fact it names; below it we would rather write the new fact than hide the wrong old one.
SUPERSEDE_TEXT_MIN_JACCARD = 0.5
# A candidate with this many content tokens its look-alike lacks says something new.
NEW_DETAIL_TOKENS = 3
# ``same_fact`` reads its few memories as a sample of a namespace at least this large.
MIN_IDF_DOCS = 50
# A "supersede" whose new text is essentially the old text is a re-extraction, not an update.
SAME_FACT_COSINE = 0.99


@dataclass(frozen=True, slots=True)
class GateDecision:
    """What to do with a candidate. ``target_id`` names the memory reinforced or superseded."""

    action: Action
    target_id: str | None = None
    reason: str = ""
    similarity: float | None = None


def _normalise_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"[\W_]+", " ", text).strip()


def _similarity(
    vector: np.ndarray | None, content: str, memory: Memory
) -> tuple[float | None, bool]:
    """(cosine or None when MISSING, whether the normalised texts are identical)."""
    return cosine(vector, memory.embedding), _normalise_text(content) == _normalise_text(
        memory.content
    )


def _closest(
    vector: np.ndarray | None, content: str, memories: Sequence[Memory], threshold: float
) -> tuple[Memory, float | None] | None:
    """The most similar live memory at or above ``threshold`` (identical text always counts)."""
    best: tuple[Memory, float | None] | None = None
    best_sim = -np.inf
    for memory in memories:
        if memory.is_superseded:
            continue
        sim, same_text = _similarity(vector, content, memory)
        effective = 1.0 if same_text else sim
        if effective is None or effective < threshold:
            continue
        # Highest similarity wins; ties go to the lowest id so the decision is deterministic.
        if effective > best_sim or (
            effective == best_sim and best is not None and memory.id < best[0].id
        ):
            best, best_sim = (memory, sim), effective
    return best


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def find_superseded(candidate: Candidate, memories: Sequence[Memory]) -> tuple[Memory, str] | None:
    """The live memory ``candidate.supersedes`` names (by id or text), and how it matched."""
    ref = (candidate.supersedes or "").strip()
    if not ref:
        return None
    live = [m for m in memories if not m.is_superseded]
    for memory in live:
        if memory.id == ref:
            return memory, "id"
    ref_norm = _normalise_text(ref)
    for memory in live:
        if _normalise_text(memory.content) == ref_norm:
            return memory, "text"
    ref_keywords = set(extract_keywords(ref))
    best: Memory | None = None
    best_score = SUPERSEDE_TEXT_MIN_JACCARD
    for memory in sorted(live, key=lambda m: m.id):
        score = _jaccard(ref_keywords, set(extract_keywords(memory.content)) | set(memory.keywords))
        if score > best_score or (score == best_score and best is None):
            best, best_score = memory, score
    return (best, f"keywords {best_score:.2f}") if best is not None else None


def _as_memory(candidate: Candidate, vector: np.ndarray | None, now: datetime) -> Memory:
    return Memory(
        id="",
        content=candidate.content,
        category=candidate.category,
        importance=candidate.importance,
        created_at=now,
        last_accessed=now,
        keywords=candidate.keywords,
        embedding=vector,
    )


def same_fact(
    candidate: Candidate,
    vector: np.ndarray | None,
    memories: Sequence[Memory],
    *,
    threshold: float,
    context: Sequence[Memory] = (),
    cosine_min: float = 0.0,
) -> tuple[Memory, float] | None:
    """The live memory of ``memories`` that states the candidate's fact, with its
    similarity (``restatements.fact_similarities``, IDF over ``memories`` and ``context``, the
    vector cosine counted from ``cosine_min``; 1 when every content word of the candidate
    is already in the memory), or ``None`` below ``threshold`` or when the candidate adds
    detail. Ties go to the lowest id."""
    live = [m for m in memories if not m.is_superseded]
    if not live:
        return None
    epoch = min(m.created_at for m in live)
    probe = _as_memory(candidate, vector, epoch)
    pool = [probe, *live]
    seen = {m.id for m in live}
    docs = [memory_tokens(m) for m in pool]
    docs += [memory_tokens(m) for m in context if m.id not in seen]
    stats = CorpusStats.from_token_sets(docs)
    # A handful of memories says little about how rare a word is: read them as a sample
    # of a namespace of at least MIN_IDF_DOCS, so a word shared by two of them still counts.
    stats = replace(stats, n_docs=max(stats.n_docs, MIN_IDF_DOCS))
    similarity = fact_similarities(pool, stats, cosine_min=cosine_min)[1][0, 1:]
    said = content_tokens(candidate.content)
    best: tuple[Memory, float] | None = None
    for index in sorted(range(len(live)), key=lambda i: live[i].id):
        score = float(similarity[index])
        if len(said) >= 2 and said <= content_tokens(live[index].content):
            score = max(score, 1.0)  # every content word already there: nothing new
        if score < threshold or (best is not None and score <= best[1]):
            continue
        if _adds_detail(candidate.content, live[index].content):
            continue
        best = (live[index], score)
    return best


def _adds_detail(content: str, memory_content: str) -> bool:
    """Whether ``content`` says more than ``memory_content``: a name or number the memory
    lacks, or ``NEW_DETAIL_TOKENS`` or more content tokens it lacks ("Tudou is a little
    golden hamster, two years old" says more than "the user has a hamster called Tudou").
    Such a candidate is written, not folded into the memory it resembles."""
    known = content_tokens(memory_content)
    if specifics(content) - specifics(memory_content) - known:
        return True  # a name or number the memory lacks: "weight is 69.5" against "72 kg"
    return len(content_tokens(content) - known) >= NEW_DETAIL_TOKENS


def _contradicted(
    candidate: Candidate, vector: np.ndarray | None, memories: Sequence[Memory]
) -> tuple[Memory, str] | None:
    """The live memory (same subject) the candidate updates with another value, the most
    similar first; see ``backend.memory.contradiction``."""
    found: list[tuple[float, str, Memory, str]] = []
    for memory in {m.id: m for m in memories}.values():
        if memory.is_superseded or memory.subject != candidate.subject:
            continue
        kind = contradicts(candidate.content, memory.content, vector, memory.embedding)
        if kind is not None:
            found.append((-(cosine(vector, memory.embedding) or 0.0), memory.id, memory, kind))
    if not found:
        return None
    _, _, memory, kind = min(found, key=lambda f: (f[0], f[1]))
    return memory, kind


def decide(
    candidate: Candidate,
    vector: np.ndarray | None,
    *,
    recalled: Sequence[Memory] = (),
    neighbours: Sequence[Memory] = (),
    siblings: Sequence[Memory] = (),
    policy: GatePolicy = GatePolicy(),
) -> GateDecision:
    """Apply the save gate to one candidate (see the module docstring for the rule order).

    ``recalled`` are the memories placed in this turn's context; ``neighbours`` the
    candidate's nearest stored memories in the namespace; ``siblings`` the memories this
    turn's earlier candidates wrote (all with embeddings where they have them). Never
    raises on odd input: an empty or below-threshold candidate is a ``reject`` with its
    reason.
    """
    if not candidate.content.strip():
        return GateDecision("reject", reason="empty content")
    if candidate.importance < policy.min_importance:
        return GateDecision(
            "reject",
            reason=f"importance {candidate.importance:.2f} < {policy.min_importance:.2f}",
        )
    if candidate.confidence < policy.min_confidence:
        return GateDecision(
            "reject",
            reason=f"confidence {candidate.confidence:.2f} < {policy.min_confidence:.2f}",
        )

    superseded = find_superseded(candidate, [*recalled, *neighbours])
    if superseded is not None:
        old, how = superseded
        sim, same_text = _similarity(vector, candidate.content, old)
        if same_text or (sim is not None and sim >= SAME_FACT_COSINE):
            return GateDecision(
                "reinforce", old.id, reason="restates the fact it claims to update", similarity=sim
            )
        return GateDecision("supersede", old.id, reason=f"updates {old.id} ({how})", similarity=sim)

    # Not against this turn's own facts: one message does not contradict itself.
    this_turn = {m.id for m in siblings}
    updated = _contradicted(
        candidate, vector, [m for m in (*recalled, *neighbours) if m.id not in this_turn]
    )
    if updated is not None:
        old, kind = updated
        how = "given up" if kind == "ceased" else f"same topic, another {kind.split(':')[0]}"
        return GateDecision(
            "supersede",
            old.id,
            reason=f"updates {old.id} ({how})",
            similarity=cosine(vector, old.embedding),
        )

    for memories, what in ((recalled, "a memory recalled this turn"), (siblings, "this turn")):
        echo = _closest(vector, candidate.content, memories, policy.echo_cosine)
        if echo is None:
            restated = same_fact(
                candidate,
                vector,
                memories,
                threshold=policy.same_fact,
                context=neighbours,
                cosine_min=policy.duplicate_cosine,
            )
            if restated is not None:
                echo = (restated[0], cosine(vector, restated[0].embedding))
        if echo is not None:
            return GateDecision(
                "reinforce",
                echo[0].id,
                reason=f"the same fact as {what}" if memories is siblings else f"echo of {what}",
                similarity=echo[1],
            )

    duplicate = _closest(vector, candidate.content, neighbours, policy.duplicate_cosine)
    if duplicate is not None:
        return GateDecision(
            "reinforce",
            duplicate[0].id,
            reason="near-duplicate of a stored memory",
            similarity=duplicate[1],
        )
    restated = same_fact(
        candidate,
        vector,
        neighbours,
        threshold=policy.same_fact,
        cosine_min=policy.duplicate_cosine,
    )
    if restated is not None:
        return GateDecision(
            "reinforce",
            restated[0].id,
            reason="the same fact as a stored memory",
            similarity=cosine(vector, restated[0].embedding),
        )
    return GateDecision("write", reason="new fact")


def reinforce(memory: Memory, now: datetime, *, importance: float | None = None) -> Memory:
    """The memory after one more use: access count + 1, last access now, importance = max."""
    new_importance = memory.importance if importance is None else max(memory.importance, importance)
    return replace(
        memory,
        access_count=memory.access_count + 1,
        last_accessed=now,
        importance=new_importance,
    )


def link_supersession(old: Memory, new: Memory) -> tuple[Memory, Memory]:
    """Link a version chain both ways: old.superseded_by = new.id, new.supersedes = old.id."""
    return replace(old, superseded_by=new.id), replace(new, supersedes=old.id)
