"""Memory formation end to end: what a replayed conversation leaves in the long-term store.

    python -m bench.memory_formation --script FILE [--config F] [--replies scripted|model]
        [--hippocampus configured|perfect] [--persona ID] [--oracle FILE] [--export OUT.jsonl]
        [--fail-every N]

The script is a conversation in the format of ``bench/data/eval/conversations/`` (the
three shipped there): a JSON list of sessions, each a list of
``{"role", "content"}`` turns, the user turns of the last session carrying
``"probe": {"expects_any": [...], "topic": ..., "stale_any": [...]}``.

It is replayed through the app's real engine and stores: the services are built by
``build_services`` from the configuration (``--config``, else ``$LM_CONFIG`` or
``./config.json``, else the embedded defaults) with ``storage.data_dir`` pointed at a
fresh temporary directory, no Chroma server and no database URL, so the hippocampus, the
save gate, the long-term Chroma store and activation are the ones the app runs. Each
session of the script is a new conversation (a new session id) of one user with one
persona (by the script's name: late_night_diary → companion, language_tutor → tutor,
fitness_coach → coach, anything else → companion; ``--persona`` overrides). Turns go
through ``TurnEngine.run``, which returns after the turn's memory merge, so each turn
starts only after the previous one's merge, as a user reading the replies would.

- ``--replies scripted`` (the default): the main model is not called; the script's
  assistant turn that follows each user turn is the reply (``ScriptedReplies``), so the
  run measures memory formation only. ``--replies model``: the configured chat model.
- ``--hippocampus perfect``: the ceiling of gate + retrieval. The hippocampus is an
  oracle (``OracleHippocampus``) answering, for the user turn being replayed,
  ``{"long_term": [...]}`` with the hand-written ideal facts of that turn
  (``bench/data/formation_oracle/<script stem>.json``, or ``--oracle``); background and
  short-term are left out, so the previous ones are kept.

- ``--fail-every N``: every N-th hippocampus run fails (``FlakyHippocampus``, as a
  provider that is down), to show that the failed turns' facts are not lost: the
  catch-up of missed turns forms them on the next working run.

At each probe turn it records, from the memories activated for that turn, whether one
contains an ``expects_any`` value (probe recall, case-insensitive) and whether a current
one contains a ``stale_any`` value and none of ``expects_any`` (stale). At the end it
judges the whole store with ``bench.formation_scoring`` (junk, wrong subject, duplicates:
definitions there) and counts the hippocampus runs whose turn report says ``ok``.

Output: one line per probe, then per-session counts, then every junk, duplicate and
subject-error memory with its reason, and last, exactly:
``probe_recall=A/B stale=S memories=N junk=J duplicates=D subject_errors=E
hippocampus_valid=V/T hippocampus_p50_s=X wrong_entity=W fragments=F precision=P
entities=G/H entity_duplicates=K`` (on one line; ``memories`` counts the current
memories; the p50 is over every hippocampus run; ``entities``: of the user's named
people and pets in the gold that a current memory names, how many the app's entity table
(``backend.memory.entities``) holds with the right relation, and ``entity_duplicates`` how
many it holds twice or more: ``bench.entity_judge.judge_table``).
``subject_errors`` is about who *said* a fact (the user or the persona); ``wrong_entity``,
``fragments`` and ``precision`` about who a fact is *about*, judged by
``bench.entity_judge`` against the script's hand-labelled gold
(``bench/data/formation_gold/<script>.json``; definitions there): precision is the share
of the user's current memories judged correct. A script without gold gets ``-`` for
``wrong_entity`` and ``precision``, and its fragments still counted. ``--export`` writes
the final store as JSON Lines in the app's export format (``LongTermMemory.export_jsonl``).

Exit status: 0 when the run completed; 2 for a missing or malformed script, oracle or
configuration, or an unknown persona; 1 when the app cannot start.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.cli.conversation_script import Probe, Script, ScriptTurn
from backend.config import ConfigError, Settings, load_settings
from backend.engine.services import Services, StartupError, build_services
from backend.engine.turn import TurnRequest
from backend.llm.port import ChatModel
from backend.memory.entities import entity_table
from backend.memory.types import Memory, Namespace
from backend.personas import UnknownPersona
from bench import entity_judge
from bench import formation_scoring as scoring
from bench.formation_models import FlakyHippocampus, OracleHippocampus, ScriptedReplies
from bench.formation_script import UsageError, load_oracle, load_script, oracle_path

REPO = Path(__file__).resolve().parent.parent
USER_ID = "bench-formation-user"
DEFAULT_PERSONAS = {
    "late_night_diary": "companion",
    "language_tutor": "tutor",
    "fitness_coach": "coach",
}
SHORT = 110  # characters of a memory shown per line

# --- the run -------------------------------------------------------------------------------


@dataclass
class TurnRecord:
    turn: ScriptTurn
    reply: str
    report: dict[str, Any]
    activated: list[Memory]


@dataclass
class ProbeRecord:
    turn: ScriptTurn
    probe: Probe
    activated: list[Memory]
    hit: int | None
    stale: int | None

    @property
    def passed(self) -> bool:
        return self.hit is not None


@dataclass
class RunResult:
    script: Script
    persona: str
    hippocampus_model: str
    turns: list[TurnRecord] = field(default_factory=list)
    probes: list[ProbeRecord] = field(default_factory=list)
    memories: list[Memory] = field(default_factory=list)  # every one, oldest first
    written_by: dict[str, int] = field(default_factory=dict)  # memory id → turn number
    judgement: scoring.Judgement | None = None
    # Who each memory is about (``bench.entity_judge``), where the script has gold data.
    entities: entity_judge.EntityJudgement | None = None
    # The app's table of people and pets (``backend.memory.entities``) against the gold.
    table: entity_judge.TableJudgement | None = None
    fragments: list[tuple[str, str]] = field(default_factory=list)  # (content, why)
    session_ids: list[str] = field(default_factory=list)


HippocampusFactory = Callable[[Script], ChatModel]


def bench_settings(config: Path | None, data_dir: Path) -> Settings:
    """The configured settings with a fresh embedded store under ``data_dir``."""
    try:
        settings = load_settings(config)
    except ConfigError as exc:
        raise UsageError(f"configuration: {exc}") from None
    storage = settings.storage.model_copy(
        update={
            "data_dir": data_dir,
            "chroma_url": None,
            "sessions_db": data_dir / "sessions.sqlite3",
            "database_url": None,
        }
    )
    server = settings.server
    if not server.personas_dir.is_dir():  # run from elsewhere: the repository's personas
        server = server.model_copy(update={"personas_dir": REPO / "personas"})
    return settings.model_copy(update={"storage": storage, "server": server})


def _use_full_hippocampus_prompt(services: Services) -> None:
    """The oracle answers the full contract, whatever the configuration says."""
    services.engine.settings = dataclasses.replace(
        services.engine.settings, hippocampus_mode="full"
    )


async def replay(
    services: Services,
    script: Script,
    persona_id: str,
    *,
    replies: ScriptedReplies | None,
    hippocampus: ChatModel,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Every user turn of ``script`` through ``services.engine.run``, in order."""
    engine = services.engine
    result = RunResult(script, persona_id, hippocampus.model)
    for session in script.sessions:
        session_id = uuid.uuid4().hex
        result.session_ids.append(session_id)
        for turn in session:
            if replies is not None:
                replies.expect(turn)
            expect = getattr(hippocampus, "expect", None)
            if callable(expect):
                expect(turn)
            done, report = await engine.run(
                TurnRequest(
                    user_id=USER_ID, text=turn.text, persona_id=persona_id, session_id=session_id
                )
            )
            activated = [] if done.activation is None else list(done.activation.memories)
            record = TurnRecord(turn, done.reply, report, activated)
            result.turns.append(record)
            for item in report.get("written", []):
                if item.get("id"):
                    result.written_by.setdefault(item["id"], turn.number)
            if turn.probe is not None:
                contents = [m.content for m in activated]
                result.probes.append(
                    ProbeRecord(
                        turn,
                        turn.probe,
                        activated,
                        scoring.probe_hit(contents, turn.probe.expects_any),
                        scoring.stale_hit(
                            [(m.content, not m.is_superseded) for m in activated],
                            turn.probe.expects_any,
                            turn.probe.stale_any,
                        ),
                    )
                )
            if progress is not None:
                hippo = report.get("hippocampus", {})
                progress(
                    f"turn {turn.number + 1}/{len(script.turns)}: hippocampus "
                    f"{hippo.get('status')} in {float(hippo.get('ms', 0)) / 1e3:.1f} s, "
                    f"{len(report.get('written', []))} written"
                )
    await engine.drain()
    return result


def judge_store(services: Services, result: RunResult, persona_text: str) -> None:
    ns = Namespace(USER_ID, result.persona)
    memories = sorted(services.long_term.store.iter_all(ns), key=lambda m: (m.created_at, m.id))
    result.memories = memories
    current = [m for m in memories if not m.is_superseded]
    vectors: dict[str, list[float]] = {}
    embedded = services.long_term.embed([m.content for m in current])
    if embedded is not None:
        vectors = {m.id: [float(x) for x in row] for m, row in zip(current, embedded, strict=True)}
    transcript: list[scoring.Utterance] = []
    for record in result.turns:
        transcript.append(scoring.Utterance("user", record.turn.text, record.turn.number))
        if record.reply:
            transcript.append(scoring.Utterance("assistant", record.reply, record.turn.number))
    stored = [
        scoring.StoredMemory(
            m.id, m.content, m.subject, not m.is_superseded, result.written_by.get(m.id)
        )
        for m in memories
    ]
    result.judgement = scoring.judge(stored, transcript, vectors=vectors, persona_text=persona_text)
    judge_entities(result, current)


def judge_entities(result: RunResult, current: Sequence[Memory]) -> None:
    """Who each current memory is about, against the script's gold (``bench.entity_judge``);
    without gold, only the fragments are found."""
    path = entity_judge.gold_path(result.script)
    gold = entity_judge.load_gold(path, result.script) if path.is_file() else None
    if gold is not None:
        rows = [(m.content, m.subject, result.written_by.get(m.id)) for m in current]
        result.entities = entity_judge.judge_store(rows, gold)
        result.fragments = [(t, j.reason) for t, j in result.entities.of("fragment")]
        users = [m for m in current if m.subject != "persona"]
        table = [
            entity_judge.TableEntity(e.name, e.relation, tuple(e.described_as))
            for e in entity_table(users)
        ]
        result.table = entity_judge.judge_table(table, gold, [m.content for m in users])
        return
    for memory in current:
        why = entity_judge.fragment_reason(memory.content)
        if memory.subject != "persona" and why is not None:
            result.fragments.append((memory.content, why))


async def run(
    script: Script,
    *,
    config: Path | None = None,
    replies: str = "scripted",
    hippocampus: str = "configured",
    persona: str | None = None,
    oracle: Path | None = None,
    export: Path | None = None,
    hippocampus_factory: HippocampusFactory | None = None,
    progress: Callable[[str], None] | None = None,
    fail_every: int | None = None,
) -> RunResult:
    """Replay ``script`` on a fresh store and judge it. ``hippocampus_factory`` (tests
    only) replaces the hippocampus model with the one it builds for the script."""
    persona_id = persona or DEFAULT_PERSONAS.get(script.stem, "companion")
    facts = None
    if hippocampus == "perfect" and hippocampus_factory is None:
        facts = load_oracle(oracle or oracle_path(script), script)
    with tempfile.TemporaryDirectory(prefix="lm-formation-") as tmp:
        settings = bench_settings(config, Path(tmp) / "data")
        try:
            services = build_services(settings)
        except StartupError as exc:
            raise RuntimeError(f"the app cannot start: {exc}") from None
        try:
            try:
                persona_obj = services.personas.resolve(persona_id)
            except UnknownPersona:
                known = ", ".join(p.id for p in services.personas)
                raise UsageError(f"unknown persona {persona_id!r} (known: {known})") from None
            scripted = ScriptedReplies() if replies == "scripted" else None
            if scripted is not None:
                services.engine.chat = scripted
            model: ChatModel = services.hippocampus
            if hippocampus_factory is not None:
                model = hippocampus_factory(script)
            elif facts is not None:
                model = OracleHippocampus(facts)
                _use_full_hippocampus_prompt(services)
            services.engine.hippocampus = model
            if fail_every:
                model = FlakyHippocampus(model, fail_every)
                services.engine.hippocampus = model
            result = await replay(
                services,
                script,
                persona_obj.id,
                replies=scripted,
                hippocampus=model,
                progress=progress,
            )
            p = persona_obj  # its card: the persona's own words, as the app counts them
            card = "\n".join(t for t in (p.name, p.description, p.system_prompt, p.greeting) if t)
            judge_store(services, result, card)
            if export is not None:
                ns = Namespace(USER_ID, persona_obj.id)
                with export.open("w", encoding="utf-8") as handle:
                    for line in services.long_term.export_jsonl(ns):
                        handle.write(line)
        finally:
            await services.aclose()
    return result


# --- the report ------------------------------------------------------------------------------


def _short(text: str, limit: int = SHORT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def hippocampus_times(result: RunResult) -> tuple[int, int, float]:
    """(runs with status ok, runs, p50 seconds over every run)."""
    infos = [r.report.get("hippocampus") or {} for r in result.turns]
    valid = sum(1 for info in infos if info.get("status") == "ok")
    times = [float(info["ms"]) / 1e3 for info in infos if "ms" in info]
    return valid, len(infos), scoring.percentile(times, 0.5)


def final_line(result: RunResult) -> str:
    judged = result.judgement or scoring.Judgement(memories=0)
    valid, total, p50 = hippocampus_times(result)
    passed = sum(1 for p in result.probes if p.passed)
    stale = sum(1 for p in result.probes if p.stale is not None)
    entities = result.entities
    wrong = "-" if entities is None else str(len(entities.of("wrong_entity")))
    precision = "-" if entities is None else f"{entities.precision:.3f}"
    table = result.table
    people = "-" if table is None else f"{len(table.found)}/{len(table.expected)}"
    doubled = "-" if table is None else str(len(table.duplicates))
    return (
        f"probe_recall={passed}/{len(result.probes)} stale={stale} memories={judged.memories} "
        f"junk={len(judged.junk)} duplicates={len(judged.duplicates)} "
        f"subject_errors={len(judged.subject_errors)} hippocampus_valid={valid}/{total} "
        f"hippocampus_p50_s={p50:.2f} wrong_entity={wrong} fragments={len(result.fragments)} "
        f"precision={precision} entities={people} entity_duplicates={doubled}"
    )


def gate_lines(result: RunResult) -> list[str]:
    """Every candidate the gate rejected, reinforced or used to supersede, with its reason;
    and hippocampus runs that were not ``ok``."""
    contents = {m.id: m.content for m in result.memories}
    lines = []
    for record in result.turns:
        where = f"{record.turn.session + 1}.{record.turn.index + 1}"
        report = record.report
        info = report.get("hippocampus") or {}
        if info.get("status") != "ok":
            error = f": {_short(str(info['error']), 80)}" if info.get("error") else ""
            lines.append(f"{where} hippocampus {info.get('status')}{error}")
        for item in report.get("rejected", []):
            lines.append(f"{where} rejected {_short(item['content'])!r}: {item['reason']}")
        for item in report.get("reinforced", []):
            target = contents.get(item.get("id") or "", "?")
            lines.append(
                f"{where} reinforced {_short(target, 60)!r} instead of writing "
                f"{_short(item['content'], 80)!r}: {item['reason']}"
            )
        for item in report.get("superseded", []):
            old = contents.get(item.get("id") or "", "?")
            lines.append(f"{where} superseded {_short(old, 80)!r}: {item['reason']}")
    return lines


def render(result: RunResult) -> str:
    lines = [
        f"script {result.script.path} ({len(result.script.sessions)} sessions, "
        f"{len(result.script.turns)} user turns), persona {result.persona}, "
        f"hippocampus {result.hippocampus_model}",
        "",
        f"Probes ({len(result.probes)}):",
    ]
    for n, p in enumerate(result.probes, 1):
        topic = p.probe.topic or _short(p.turn.text, 40)
        verdict = "PASS" if p.passed else "FAIL"
        stale = "STALE" if p.stale is not None else "not stale"
        if p.hit is not None:
            best = f"#{p.hit + 1} {_short(p.activated[p.hit].content)}"
        elif p.activated:
            best = f"(no match) #1 {_short(p.activated[0].content)}"
        else:
            best = "(nothing activated)"
        lines.append(
            f"probe {n} [{topic}] {verdict} {stale} | {len(p.activated)} activated | {best}"
        )
        if p.stale is not None:
            lines.append(f"    stale: {_short(p.activated[p.stale].content)}")
    lines += ["", "Sessions:"]
    current_ids = {m.id for m in result.memories if not m.is_superseded}
    for s, session_id in enumerate(result.session_ids):
        records = [r for r in result.turns if r.turn.session == s]
        ok = sum(1 for r in records if (r.report.get("hippocampus") or {}).get("status") == "ok")
        kinds = ("written", "superseded", "reinforced", "rejected", "queued")
        count = {k: sum(len(r.report.get(k, [])) for r in records) for k in kinds}
        kept = sum(
            1 for m in result.memories if m.source_session == session_id and m.id in current_ids
        )
        lines.append(
            f"session {s + 1}: turns={len(records)} hippocampus_ok={ok}/{len(records)} "
            f"written={count['written']} superseded={count['superseded']} "
            f"reinforced={count['reinforced']} rejected={count['rejected']} "
            f"queued={count['queued']} current_at_end={kept}"
        )
    lines += ["", "Gate decisions other than a plain write (session.turn, from the turn reports):"]
    lines += gate_lines(result) or ["(none)"]
    judged = result.judgement
    if judged is not None:
        for title, findings in (
            ("Junk", judged.junk),
            ("Duplicates", judged.duplicates),
            ("Subject errors", judged.subject_errors),
        ):
            lines += ["", f"{title} ({len(findings)}):"]
            for f in findings:
                other = f" (of {f.other_id[:8]})" if f.other_id else ""
                lines.append(f"- {f.memory_id[:8]} {_short(f.content)!r}: {f.reason}{other}")
    entities = result.entities
    if entities is not None:
        for verdict in ("wrong_entity", "unsupported"):
            found = entities.of(verdict)  # type: ignore[arg-type]
            lines += ["", f"{verdict} ({len(found)}):"]
            lines += [f"- {_short(text)!r}: {j.reason}" for text, j in found]
    table = result.table
    if table is not None:
        missing = [i for i in table.expected if i not in table.found]
        lines += ["", f"entity table: {len(table.found)}/{len(table.expected)} found"]
        lines += [f"- missing: {i}" for i in missing]
        lines += [f"- wrong relation: {i} as {row}" for i, row in table.wrong_relation]
        lines += [f"- duplicated: {i}" for i in table.duplicates]
        lines += [f"- not in the gold: {row}" for row in table.unknown]
    lines += ["", f"fragments ({len(result.fragments)}):"]
    lines += [f"- {_short(text)!r}: {why}" for text, why in result.fragments]
    lines += ["", final_line(result)]
    return "\n".join(lines)


def main(
    argv: Sequence[str] | None = None, *, hippocampus_factory: HippocampusFactory | None = None
) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.memory_formation",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--script", type=Path, required=True, help="a conversation script")
    parser.add_argument("--config", type=Path, default=None, help="config.json to use")
    parser.add_argument("--replies", choices=("scripted", "model"), default="scripted")
    parser.add_argument("--hippocampus", choices=("configured", "perfect"), default="configured")
    parser.add_argument("--persona", default=None, help="persona id (default: by script name)")
    parser.add_argument("--oracle", type=Path, default=None, help="ideal facts for 'perfect'")
    parser.add_argument("--export", type=Path, default=None, help="write the store as JSONL")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--fail-every",
        type=int,
        default=None,
        metavar="N",
        help="make every N-th hippocampus run fail (the catch-up must recover its facts)",
    )
    args = parser.parse_args(argv)
    if args.fail_every is not None and args.fail_every < 1:
        parser.error("--fail-every must be at least 1")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        if args.config is not None and not args.config.is_file():
            raise UsageError(f"{args.config}: no such configuration file")
        script = load_script(args.script)
        result = asyncio.run(
            run(
                script,
                config=args.config,
                replies=args.replies,
                hippocampus=args.hippocampus,
                persona=args.persona,
                oracle=args.oracle,
                export=args.export,
                hippocampus_factory=hippocampus_factory,
                progress=None if args.quiet else progress,
                fail_every=args.fail_every,
            )
        )
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
