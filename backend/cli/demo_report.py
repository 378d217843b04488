"""The demo's results and their report (docs/demos.md): what each probe got, the memories
the run formed, and the text ``limbic-memory demo`` prints, ending ``probes passed N/M``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TextIO

from backend.cli.conversation_script import Probe

SHORT = 160  # characters of a reply or memory shown per line


@dataclass
class ProbeResult:
    question: str
    probe: Probe
    reply: str
    activated: list[dict[str, Any]]
    passed: bool
    stale_mentioned: list[str] = field(default_factory=list)


@dataclass
class DemoResult:
    persona: str
    sessions: list[str]
    memories: list[dict[str, Any]]
    probes: list[ProbeResult]

    @property
    def passed(self) -> int:
        return sum(1 for p in self.probes if p.passed)


def short(text: str, limit: int = SHORT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _memory_line(memory: dict[str, Any]) -> str:
    return (
        f"[{memory.get('category', '?')}, importance {float(memory.get('importance', 0)):.2f}] "
        f"{short(memory.get('content', ''))}"
    )


def render(result: DemoResult, out: TextIO) -> None:
    """The report; its last line is ``probes passed N/M``."""
    print(f"\nLong-term memories formed ({len(result.memories)}):", file=out)
    if not result.memories:
        print("  (none)", file=out)
    for memory in result.memories:
        print(f"  - {_memory_line(memory)}", file=out)
        versions = memory.get("versions") or []
        if len(versions) > 1:
            print(f"      version chain ({len(versions)}, oldest first):", file=out)
            for v in versions:
                print(f"        {short(v.get('content', ''), 120)}", file=out)
    print(f"\nProbes ({len(result.probes)}):", file=out)
    for i, p in enumerate(result.probes, 1):
        topic = f" [{p.probe.topic}]" if p.probe.topic else ""
        print(f"  {i}.{topic} Q: {short(p.question)}", file=out)
        print(f"     activated ({len(p.activated)}):", file=out)
        for m in p.activated[:5]:
            final = (m.get("score") or {}).get("final")
            at = f" (score {final:.2f})" if isinstance(final, (int, float)) else ""
            print(f"       - {short(m.get('content', ''), 110)}{at}", file=out)
        if len(p.activated) > 5:
            print(f"       … and {len(p.activated) - 5} more", file=out)
        print(f"     reply: {short(p.reply, 240)}", file=out)
        verdict = "PASS" if p.passed else "FAIL"
        wanted = ", ".join(repr(e) for e in p.probe.expects_any)
        print(f"     {verdict} (expects any of: {wanted})", file=out)
        if p.stale_mentioned:
            print(
                f"     note: mentions old value(s) {p.stale_mentioned}: check by hand whether "
                "they are presented as current",
                file=out,
            )
    print(f"probes passed {result.passed}/{len(result.probes)}", file=out)
