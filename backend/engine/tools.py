"""The main model's memory tools: ``memory_recall`` and ``memory_store`` (docs/architecture.md).

Executed server-side within a bounded number of rounds; results go back to the model as
``tool`` messages and never into the user-visible reply. Bad arguments from the model
become an error result the model can read, never an exception that breaks the turn.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from backend.longterm.memory import LongTermMemory, WriteOutcome
from backend.memory.types import CATEGORIES, Candidate, Memory, Namespace
from backend.storable_text import storable

MAX_TOOL_ROUNDS = 3  # tool rounds per turn before the model must answer in text

MEMORY_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "memory_recall",
            "description": "Search your long-term memory of this user for notes about a topic.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to look for"},
                    "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "memory_store",
            "description": "Remember a lasting fact about the user for future conversations.",
            "parameters": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "one standalone sentence"},
                    "category": {"type": "string", "enum": list(CATEGORIES)},
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["content"],
            },
        },
    },
]


class _RecallArgs(BaseModel):
    query: str = Field(min_length=1, max_length=2000)
    k: int = Field(5, ge=1, le=20)


class _StoreArgs(BaseModel):
    content: str = Field(min_length=1, max_length=1000)
    category: str = "general"
    importance: float = Field(0.6, ge=0, le=1)


class MemoryTools:
    """Executes tool calls for one namespace and remembers what they did for the report."""

    def __init__(self, long_term: LongTermMemory, ns: Namespace, session_id: str) -> None:
        self.long_term = long_term
        self.ns = ns
        self.session_id = session_id
        self.outcomes: list[WriteOutcome] = []
        self.recalled: list[Memory] = []

    def execute(self, name: str, arguments: str) -> str:
        """The tool's result as a JSON string (errors included, for the model to read)."""
        try:
            raw = json.loads(arguments or "{}")
            if name == "memory_recall":
                return json.dumps(self.recall(_RecallArgs.model_validate(raw)), ensure_ascii=False)
            if name == "memory_store":
                return json.dumps(self.store(_StoreArgs.model_validate(raw)), ensure_ascii=False)
            return json.dumps({"error": f"unknown tool {name!r}"})
        except (json.JSONDecodeError, ValidationError) as exc:
            return json.dumps({"error": f"bad arguments: {str(exc)[:200]}"})

    def recall(self, args: _RecallArgs) -> dict[str, Any]:
        policy = self.long_term.activation.retrieval
        from dataclasses import replace

        activation = self.long_term.activate(self.ns, args.query, policy=replace(policy, k=args.k))
        self.recalled += activation.memories
        return {
            "notes": [
                {"date": m.created_at.date().isoformat(), "category": m.category, "note": m.content}
                for m in activation.memories
            ]
        }

    def store(self, args: _StoreArgs) -> dict[str, Any]:
        candidate = Candidate(
            content=storable(args.content),  # a model's text: NUL/lone surrogates replaced
            category=args.category,
            importance=args.importance,
            confidence=0.9,  # the model chose to store it explicitly
        )
        outcome = self.long_term.write(
            self.ns, [candidate], recalled=self.recalled, source_session=self.session_id
        )[0]
        self.outcomes.append(outcome)
        return {"result": outcome.action, "reason": outcome.reason}
