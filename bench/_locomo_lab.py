"""Fusion tuning lab for LoCoMo: grids over FusionParams, in-sample and leave-one-out.

Not a benchmark (bench/locomo.py is). Signals (exact cosine, FTS5 bm25 through
walrus_mem._recall.ranking.fts_query on one shared FTS5 table, like the catalog) are
computed once; every grid point then runs the engine's recall
(bench.locomo.hybrid_rank -> ranking.fuse + context_keys) on them.

    python bench/_locomo_lab.py /work/shared/data/locomo-dev.json
    python bench/_locomo_lab.py PATH --grid dense_weight=0.4,0.5,0.6 --grid context_weight=0,0.8

Leave-one-out: for each conversation, pick the grid point with the best R@5
(categories 1-4) on the other conversations, report it on the held-out one.
Also prints how well DEFAULT_MIN_SCORE separates evidence hits from the hits
of off-topic questions (each question asked in the other conversation).
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import locomo
from walrus_mem._recall import ranking

# The parameters that move LoCoMo rankings (the gates cost nothing there: --grid
# lexical_gate=... / context_gate=... shows it; they keep unrelated facts low).
DEFAULT_GRID: dict[str, list[Any]] = {
    "dense_weight": [0.3, 0.4, 0.5, 0.6, 0.7],
    "lexical_floor": [8.0, 12.0, 16.0],
    "context_weight": [0.0, 0.6, 0.7, 0.8, 0.9, 1.0],
}


# Out-of-domain queries (written for this check): nothing in LoCoMo answers them,
# so their best hits show what "unrelated" scores look like.
OUT_OF_DOMAIN = [
    "What is the capital of Australia?",
    "How do I configure a Kubernetes ingress controller?",
    "What's the boiling point of water at high altitude?",
    "Which Python version added pattern matching?",
    "What is my blood type?",
    "How many moons does Jupiter have?",
    "What is the user's preferred database engine?",
    "Where did I park the car?",
    "What is the password policy for the VPN?",
    "Which stocks did I buy in March?",
    "What's the recipe for sourdough starter?",
    "Who won the 2018 football World Cup?",
    "How do I reset my router?",
    "What allergies does the patient have?",
    "What is the deadline for the tax return?",
    "Which flight am I booked on to Tokyo?",
    "What's the API rate limit for the billing service?",
    "Explain the CAP theorem.",
    "What is the GDP of Brazil?",
    "What time is the dentist appointment?",
    "What programming language does the backend use?",
    "What did the quarterly earnings report say about revenue?",
    "How do I compile the Rust project?",
    "What's the wifi password at the office?",
    "Which vitamins should I take daily?",
]


QSignals = locomo.QuestionSignals


def build(
    path: Path,
    captions: bool = False,
    tokenize: str = ranking.FTS_TOKENIZE,
    query: Callable[[str], str | None] = ranking.fts_query,
) -> list[QSignals]:
    return locomo.question_signals(locomo.load_locomo(path), locomo.CachedEmbedder(), captions,
                                   tokenize, query)


def evaluate(
    sigs: list[QSignals], params: ranking.FusionParams, pool: int | None = None
) -> dict[str, dict[str, float]]:
    return locomo.summarize(locomo.rank_all(sigs, params, pool=pool))


def leave_one_out(
    sigs: list[QSignals], grid: list[ranking.FusionParams], metric: str = "R@5"
) -> tuple[dict[str, dict[str, float]], list[tuple[str, ranking.FusionParams, dict[str, float]]]]:
    """Per held-out conversation: params picked on the others, scored on it; plus pooled."""
    loco = locomo.leave_one_out([locomo.rank_all(sigs, p) for p in grid], int(metric[2:]))
    picks = []
    for held, j in loco.picks.items():
        rows = [o for o in loco.outcomes if o.sample_id == held]
        picks.append((held, grid[j], locomo.summarize(rows)["1-4"]))
    return locomo.summarize(loco.outcomes), picks


def min_score_check(path: Path, params: ranking.FusionParams) -> None:
    convs = locomo.load_locomo(path)
    embedder = locomo.CachedEmbedder()
    store = locomo.StandaloneStore()
    docs = {conv.sample_id: conv.documents() for conv in convs}
    for conv in convs:
        texts = [d.text for d in docs[conv.sample_id]]
        store.add(conv.sample_id, texts, embedder.embed(texts))
    evidence_scores: list[float] = []
    off_top1: list[float] = []
    on_top1: list[float] = []
    ood_top1: list[float] = []
    ood_vecs = embedder.embed(OUT_OF_DOMAIN)
    for conv in convs:
        for text, vec in zip(OUT_OF_DOMAIN, ood_vecs, strict=True):
            ood_top1.append(store.recall(conv.sample_id, text, vec, 1, params)[0][1])
        others = [o for o in convs if o is not conv]
        qvecs = embedder.embed([q.text for q in conv.questions])
        for q, qvec in zip(conv.questions, qvecs, strict=True):
            if q.category == 5:
                continue
            hits = store.recall(conv.sample_id, q.text, qvec, 20, params)
            on_top1.append(hits[0][1])
            evidence_scores += [sc for i, sc in hits
                               if set(docs[conv.sample_id][i].dia_ids) & set(q.evidence)]
            for other in others:
                off_top1.append(store.recall(other.sample_id, q.text, qvec, 1, params)[0][1])
    pct = [10, 25, 50, 75, 90]
    print("score percentiles", pct)
    print("  evidence hits in top 20  ", np.percentile(evidence_scores, pct).round(3))
    print("  on-topic top-1           ", np.percentile(on_top1, pct).round(3))
    print("  other-conversation top-1 ", np.percentile(off_top1, pct).round(3))
    print("  out-of-domain top-1      ", np.percentile(ood_top1, pct).round(3))
    for cut in sorted({0.15, 0.2, 0.25, 0.3, 0.35, 0.4, ranking.DEFAULT_MIN_SCORE}):
        kept = np.mean(np.array(evidence_scores) >= cut)
        off = np.mean(np.array(off_top1) >= cut)
        ood = np.mean(np.array(ood_top1) >= cut)
        print(
            f"  min_score {cut:.2f}: evidence kept {kept:.3f}, other-conversation top-1 kept "
            f"{off:.3f}, out-of-domain top-1 kept {ood:.3f}"
        )


# --------------------------------------------------------------------------- --compare
# Alternatives that were tried; each maps (cosine array, {row: -bm25}) to row order.

_WORD = re.compile(r"\w+")


def _words(text: str, stop: bool) -> list[str]:
    words = dict.fromkeys(_WORD.findall(text.lower()))
    return [w for w in words if not (stop and w in ranking._STOPWORDS)]


QUERIES: dict[str, Callable[[str], str | None]] = {
    "OR, stopwords dropped (default)": ranking.fts_query,
    "OR, every word": lambda t: " OR ".join(f'"{w}"' for w in _words(t, False)) or None,
    "OR, prefix* for words >= 4 chars": lambda t: " OR ".join(
        f'"{w}"*' if len(w) >= 4 else f'"{w}"' for w in _words(t, True)
    )
    or None,
    "AND (implicit), stopwords dropped": lambda t: " ".join(f'"{w}"' for w in _words(t, True))
    or None,
}


def _ranks(values: dict[int, float] | np.ndarray, n: int) -> np.ndarray:
    r = np.full(n, np.inf)
    if isinstance(values, dict):
        order = sorted(values, key=lambda i: (-values[i], i))
    else:
        order = [int(i) for i in np.argsort(-values, kind="stable")]
    r[order] = np.arange(len(order))
    return r


def _lex_array(lex: dict[int, float], n: int) -> np.ndarray:
    arr = np.zeros(n)
    for i, v in lex.items():
        arr[i] = v
    return arr


def _minmax(x: np.ndarray) -> np.ndarray:
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


def _zscore(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


Rule = Callable[[np.ndarray, dict[int, float]], np.ndarray]


def _rrf(k0: float) -> Rule:
    def score(cos: np.ndarray, lex: dict[int, float]) -> np.ndarray:
        n = len(cos)
        return 1 / (k0 + _ranks(cos, n)) + 1 / (k0 + _ranks(lex, n))

    return score


def _sat(w: float, h: float) -> Rule:
    def score(cos: np.ndarray, lex: dict[int, float]) -> np.ndarray:
        bm = _lex_array(lex, len(cos))
        return w * cos + (1 - w) * bm / (bm + h)

    return score


def _norm(w: float, norm: Callable[[np.ndarray], np.ndarray]) -> Rule:
    def score(cos: np.ndarray, lex: dict[int, float]) -> np.ndarray:
        return w * norm(cos) + (1 - w) * norm(_lex_array(lex, len(cos)))

    return score


RULES: dict[str, list[tuple[str, Rule]]] = {
    "RRF": [(f"k={k0:g}", _rrf(k0)) for k0 in (1, 5, 10, 20, 60)],
    "cosine + bm25/(bm25+h)": [
        (f"w={w:g},h={h:g}", _sat(w, h)) for w in (0.2, 0.3, 0.4, 0.5, 0.6) for h in (1, 4, 8, 16)
    ],
    "min-max over all rows": [(f"w={w:g}", _norm(w, _minmax)) for w in (0.3, 0.4, 0.5, 0.6, 0.7)],
    "z-score over all rows": [(f"w={w:g}", _norm(w, _zscore)) for w in (0.3, 0.4, 0.5, 0.6, 0.7)],
}


def _order_eval(sigs: list[QSignals], score: Callable[[QSignals], np.ndarray]) -> float:
    rows = []
    for s in sigs:
        sc = score(s)
        order = np.lexsort((np.arange(len(sc)), -sc))[:20]
        rows.append(locomo.Outcome(s.sample_id, s.category, tuple(s.hit_ids[i] for i in order),
                                   s.evidence))
    return locomo.summarize(rows)["1-4"]["R@5"]


def _with_loo(
    sigs: list[QSignals], variants: Sequence[tuple[str, Callable[[QSignals], np.ndarray]]]
) -> tuple[str, float, str]:
    """Best variant in-sample, and the pooled leave-one-conversation-out R@5."""
    convs = sorted({s.sample_id for s in sigs})
    per = {c: [_order_eval([s for s in sigs if s.sample_id == c], f) for _, f in variants]
           for c in convs}
    allr = [_order_eval(sigs, f) for _, f in variants]
    best = int(np.argmax(allr))
    held: list[str] = []
    total = 0.0
    n = 0
    for c in convs:
        pick = int(np.argmax([np.mean([per[o][j] for o in convs if o != c])
                              for j in range(len(variants))]))
        m = sum(1 for s in sigs if s.sample_id == c and s.category != 5)
        total += per[c][pick] * m
        n += m
        held.append(variants[pick][0])
    return variants[best][0], allr[best], f"{total / n:.3f} ({'; '.join(held)})"


def compare(path: Path) -> None:
    """In-sample and leave-one-out R@5 (cats 1-4) of the alternatives, same signals."""
    def bm25_order(s: QSignals) -> np.ndarray:
        return np.where(np.isinf(r := _ranks(s.lex, len(s.cos))), -1e9, -r)

    print(f"{'variant':<58}{'best params':<18}{'R@5':>7}  LOO R@5 (params picked)")
    for tok in ("unicode61 remove_diacritics 2", ranking.FTS_TOKENIZE):
        for qname, qf in QUERIES.items():
            sigs = build(path, tokenize=tok, query=qf)
            r = _order_eval(sigs, bm25_order)
            print(f"{'bm25 [' + tok.split()[0] + '] ' + qname:<58}{'':<18}{r:7.3f}")
    sigs = build(path)
    print(f"{'dense (MiniLM cosine)':<58}{'':<18}{_order_eval(sigs, lambda s: s.cos):7.3f}")
    for name, variants in RULES.items():
        wrapped = [(lbl, partial(_apply, f)) for lbl, f in variants]
        best, r, loo = _with_loo(sigs, wrapped)
        print(f"{name:<58}{best:<18}{r:7.3f}  {loo}")
    ours = [
        (f"w={w:g},ctx={c:g}", w, c)
        for w in (0.4, 0.5, 0.6, 0.7) for c in (0.0, 0.6, 0.7, 0.8, 0.9)
    ]
    for label, ctx_on in (("ranking.fuse, no context", False), ("ranking.fuse (default)", True)):
        grid = [(lbl, replace(ranking.DEFAULT_PARAMS, dense_weight=w, context_weight=c))
                for lbl, w, c in ours if (c > 0) == ctx_on]
        fused = [(lbl, partial(_fuse_scores, params=p)) for lbl, p in grid]
        best, r, loo = _with_loo(sigs, fused)
        print(f"{label:<58}{best:<18}{r:7.3f}  {loo}")
    r = evaluate(build(path, captions=True), ranking.DEFAULT_PARAMS)["1-4"]["R@5"]
    print(f"{'default params, turns + [image: blip_caption]':<58}{'':<18}{r:7.3f}")


def _apply(rule: Rule, s: QSignals) -> np.ndarray:
    return rule(s.cos, s.lex)


def _fuse_scores(s: QSignals, params: ranking.FusionParams) -> np.ndarray:
    hits = locomo.hybrid_rank(s.cos, s.lex, 20, params)
    score = np.full(len(s.cos), -1.0)
    for pos, (i, _) in enumerate(hits):
        score[i] = 100 - pos
    return score


def recency_check(path: Path) -> None:
    """R@k when turns carry their session dates and recency weighting is on.

    Through the API every turn of the bench is written at the same instant, so
    recency cannot matter there; here each turn is dated by its session and the
    questions are asked a day after the last session.
    """
    convs = {c.sample_id: c for c in locomo.load_locomo(path)}
    sigs = build(path)
    stamps = {
        sid: [locomo.session_timestamp(d.turns[0].date_time) or 0.0 for d in c.documents()]
        for sid, c in convs.items()
    }
    print(f"{'recency_weight, half-life':<32}" + "".join(f"{'R@' + str(k):>7}" for k in locomo.KS)
          + "  cat5 R@5")
    for weight, half_life in [(0.0, 30.0), (0.1, 30.0), (0.2, 30.0), (0.5, 30.0), (0.2, 365.0),
                              (1.0, 30.0)]:
        params = replace(ranking.DEFAULT_PARAMS, recency_weight=weight,
                         recency_half_life_days=half_life)
        rows = []
        for s in sigs:
            created = stamps[s.sample_id]
            now = max(created) + 86400.0
            hits = locomo.hybrid_rank(s.cos, s.lex, 20, params, now=now, created_at=created)
            rows.append(s.outcome(i for i, _ in hits))
        t = locomo.summarize(rows)
        print(f"{f'{weight:g}, {half_life:g} days':<32}"
              + "".join(f"{t['1-4'][f'R@{k}']:7.3f}" for k in locomo.KS)
              + f"{t['5']['R@5']:10.3f}")


# --------------------------------------------------------------------------- --agent-cases

BEFORE_QUERY_FEATURES = replace(ranking.DEFAULT_PARAMS, context_depth=1, subject_weight=0.0,
                                time_weight=0.0, when_weight=0.0)
"""Recall as it was before issue 15's changes (one memory of context, no query priors)."""


def agent_cases(params_by_name: dict[str, ranking.FusionParams]) -> None:
    """tests/test_relevance_calibration.py's figures, for each set of parameters.

    The agent-facing check: 50 (prompt, fact) pairs and 45 unrelated prompts, all
    facts in one namespace, one batch, the hooks' default cutoff and top k.
    """
    import json
    import random
    import tempfile

    from walrus_mem.config import AgentConfig, Settings

    data = json.loads((locomo.ROOT / "tests" / "data" / "relevance_pairs.json").read_text())
    top_k = AgentConfig().max_recall_results
    cutoff = AgentConfig().min_relevance
    facts = [p["fact"] for p in data["relevant"] + data["unrelated"]]
    random.Random(0).shuffle(facts)
    embedder = locomo.CachedEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(config_file=None, data_dir=Path(tmp), publisher_url=None,
                            aggregator_urls=[])
        with locomo._memory_class()(settings, embedder=embedder,
                                    master_key=locomo.BENCH_MASTER_KEY) as mem:
            assert mem.remember_many(facts, namespace="cases").stored == len(facts)
            print(f"{'params':<28}{'in top ' + str(top_k):>10}{'kept':>7}{'top-1 kept':>12}"
                  f"{'unrelated dropped':>19}{'context noise':>15}")
            for name, params in params_by_name.items():
                kept = top1 = in_top = noise = 0
                for pair in data["relevant"]:
                    hits = mem.recall(pair["query"], namespace="cases", k=top_k, min_score=0,
                                      params=params)
                    texts = [h.text for h in hits]
                    if pair["fact"] in texts:
                        in_top += 1
                        rank = texts.index(pair["fact"])
                        kept += hits[rank].score >= cutoff
                        top1 += rank == 0 and hits[0].score >= cutoff
                    noise += sum(1 for h in hits if h.score >= cutoff and h.context >= h.score
                                 and (h.dense or 0.0) < 0.1)
                dropped = 0
                for pair in data["unrelated"]:
                    best = mem.recall(pair["query"], namespace="cases", k=1, min_score=0,
                                      params=params)
                    dropped += not best or best[0].score < cutoff
                n_rel, n_unrel = len(data["relevant"]), len(data["unrelated"])
                print(f"{name:<28}{in_top / n_rel:>10.2f}{kept / n_rel:>7.2f}"
                      f"{top1 / n_rel:>12.2f}{dropped / n_unrel:>19.2f}{noise:>15}")

# --------------------------------------------------------------------------- --changes

# Issue 15's changes, one at a time: each step's parameter is picked by
# leave-one-conversation-out among its values (the others as in the step).
CHANGES: list[tuple[str, dict[str, Any], dict[str, tuple[Any, ...]]]] = [
    ("before (fusion weights by LOCO)", {}, {"dense_weight": (0.4, 0.5, 0.6),
                                              "lexical_floor": (8.0, 12.0, 16.0),
                                              "context_weight": (0.6, 0.7, 0.8, 0.9)}),
    ("+ context from the previous two memories", {"context_depth": 2},
     {"context_depth": (1, 2, 3, 4)}),
    ("+ subject prior (named person starts the memory)", {"subject_weight": 0.25},
     {"subject_weight": (0.0, 0.1, 0.15, 0.2, 0.25, 0.3)}),
    ("+ time prior (named date vs the memory's date)", {"time_weight": 0.5},
     {"time_weight": (0.0, 0.2, 0.3, 0.4, 0.5)}),
    ("+ when prior (a 'when' question wants a dated memory)", {"when_weight": 0.3},
     {"when_weight": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)}),
    ("all weights by LOCO", {}, {"dense_weight": (0.4, 0.5, 0.6),
                                  "lexical_floor": (8.0, 12.0, 16.0),
                                  "subject_weight": (0.15, 0.25), "time_weight": (0.3, 0.5),
                                  "when_weight": (0.2, 0.3)}),
]


def changes(path: Path) -> None:
    """Before/after per change, pooled and leave-one-conversation-out, per category."""
    sigs = build(path)
    cats = ["1-4", "1", "2", "3", "4", "5"]
    bm25 = locomo.summarize(locomo.baseline_outcomes(sigs)["bm25"])
    print(f"{'R@5':<52}" + "".join(f"{c:>14}" for c in cats) + "   LOCO gain (1-4)")
    print(f"{'BM25 alone':<52}" + "".join(
        f"{bm25[c]['R@5']:>8.3f}±{bm25[c]['se@5']:.3f}" for c in cats))
    base = BEFORE_QUERY_FEATURES
    previous: list[locomo.Outcome] | None = None
    for label, fixed, grid in CHANGES:
        base = replace(base, **fixed)
        points = locomo.grid_points(grid, base)
        loco = locomo.leave_one_out([locomo.rank_all(sigs, q) for q in points])
        pooled = locomo.summarize(locomo.rank_all(sigs, base))
        held = locomo.summarize(loco.outcomes)
        gain = ""
        if previous is not None:
            g, se = locomo.paired_gain(previous, loco.outcomes)
            gain = f"   {g:+.3f} ± {se:.3f}"
        previous = loco.outcomes
        print(f"{label:<52}")
        print(f"{'  pooled (the default value)':<52}" + "".join(
            f"{pooled[c]['R@5']:>8.3f}±{pooled[c]['se@5']:.3f}" for c in cats))
        print(f"{'  leave-one-conversation-out':<52}" + "".join(
            f"{held[c]['R@5']:>8.3f}±{held[c]['se@5']:.3f}" for c in cats) + gain)
        picked = {conv: {n: getattr(points[j], n) for n in grid} for conv, j in loco.picks.items()}
        print(f"  picked: {picked}")


# --------------------------------------------------------------------------- --misses


def misses(path: Path, params: ranking.FusionParams = ranking.DEFAULT_PARAMS) -> None:
    """Where the evidence turns that miss the top 5 are, per category (what limits R@5).

    Positions are the engine's fusion over every turn of the conversation;
    "outside pools" counts evidence in neither the dense top 80 nor the bm25
    top 80 (the engine's candidate lists at k = 20), which only the context
    step can still bring in.
    """
    sigs = build(path)
    bins = [(0, 5, "top 5"), (5, 10, "6-10"), (10, 20, "11-20"), (20, 10**9, "21+")]
    print(f"{'category':<16}{'evidence':>9}" + "".join(f"{b[2]:>8}" for b in bins)
          + f"{'outside pools':>15}{'questions w/ >1 evidence':>26}")
    for cat in ("1", "2", "3", "4", "1-4"):
        rows = [x for x in sigs if (str(x.category) == cat or (cat == "1-4" and x.category != 5))]
        counts = [0] * len(bins)
        outside = multi = total = 0
        for x in rows:
            n = len(x.cos)
            ranked = [i for i, _ in locomo.hybrid_rank(x.cos, x.lex, n, params, pool=n,
                                                       prior=x.prior(params))]
            pos = {ev: r for r, i in enumerate(ranked) for ev in x.hit_ids[i]}
            pools = set(np.argsort(-x.cos, kind="stable")[:80].tolist()) | set(
                sorted(x.lex, key=lambda i: (-x.lex[i], i))[:80])
            multi += len(x.evidence) > 1
            for ev in x.evidence:
                total += 1
                row = next(i for i, ids in enumerate(x.hit_ids) if ev in ids)
                outside += row not in pools
                r = pos.get(ev, n)
                counts[next(j for j, (lo, hi, _) in enumerate(bins) if lo <= r < hi)] += 1
        print(f"{locomo._label(cat):<16}{total:>9}" + "".join(f"{c / total:>8.3f}" for c in counts)
              + f"{outside / total:>15.3f}{multi / max(len(rows), 1):>26.3f}")

# --------------------------------------------------------------------------- --latency


def latency(path: Path) -> None:
    """CPU time of recall through the API before issue 15, with context depth 2 only, and now.

    Every question is asked once with each parameter set, in alternating order,
    twice; the second pass is timed with the thread's CPU time (wall time on
    a shared machine measures the neighbours).
    """
    import tempfile
    import time

    from walrus_mem.config import Settings

    convs = locomo.load_locomo(path)
    embedder = locomo.CachedEmbedder()
    variants = {
        "before issue 15": BEFORE_QUERY_FEATURES,
        "context depth 2, no priors": replace(ranking.DEFAULT_PARAMS, subject_weight=0.0,
                                              time_weight=0.0, when_weight=0.0),
        "default": ranking.DEFAULT_PARAMS,
    }
    spent: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(config_file=None, data_dir=Path(tmp), publisher_url=None,
                            aggregator_urls=[])
        with locomo._memory_class()(settings, embedder=embedder,
                                    master_key=locomo.BENCH_MASTER_KEY) as mem:
            for conv in convs:
                mem.remember_many([{"text": d.text, "metadata": d.metadata()}
                                   for d in conv.documents()], namespace=conv.sample_id)
            questions = [(c.sample_id, q.text) for c in convs for q in c.questions]
            for timed in (False, True):
                for i, (ns, text) in enumerate(questions):
                    names = list(variants) if i % 2 == 0 else list(variants)[::-1]
                    for name in names:
                        started = time.thread_time()
                        mem.recall(text, namespace=ns, k=5, params=variants[name])
                        if timed:
                            spent[name].append(time.thread_time() - started)
    for name, values in spent.items():
        ms = np.array(values) * 1000
        print(f"{name:<28} n {len(ms)}  CPU ms p50 {np.percentile(ms, 50):.2f}  "
              f"p95 {np.percentile(ms, 95):.2f}  mean {ms.mean():.2f}")



def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    grid = dict(DEFAULT_GRID) if not items else {}
    for item in items:
        name, _, values = item.partition("=")
        grid[name] = [type(getattr(ranking.DEFAULT_PARAMS, name))(v) for v in values.split(",")]
    return grid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--grid", action="append", default=[], help="name=v1,v2,...")
    parser.add_argument("--captions", action="store_true")
    parser.add_argument("--min-score", action="store_true", help="score distribution check")
    parser.add_argument("--compare", action="store_true", help="alternatives that were tried")
    parser.add_argument("--recency", action="store_true", help="recency weights on dated turns")
    parser.add_argument("--agent-cases", action="store_true",
                        help="tests/data/relevance_pairs.json figures before/after (real model)")
    parser.add_argument("--changes", action="store_true",
                        help="issue 15's changes one at a time, pooled and LOCO")
    parser.add_argument("--misses", action="store_true",
                        help="where the evidence that misses the top 5 ranks, per category")
    parser.add_argument("--latency", action="store_true",
                        help="recall CPU time before/after issue 15 (API, 2 x every question)")
    args = parser.parse_args()
    if args.latency:
        latency(args.path)
        return 0
    if args.misses:
        misses(args.path)
        return 0
    if args.changes:
        changes(args.path)
        return 0
    if args.agent_cases:
        agent_cases({"before issue 15": BEFORE_QUERY_FEATURES, "default": ranking.DEFAULT_PARAMS})
        return 0
    if args.recency:
        recency_check(args.path)
        return 0
    if args.compare:
        compare(args.path)
        return 0
    if args.min_score:
        min_score_check(args.path, ranking.DEFAULT_PARAMS)
        return 0

    sigs = build(args.path, args.captions)
    grid_spec = parse_grid(args.grid)
    names = list(grid_spec)
    grid = [
        replace(ranking.DEFAULT_PARAMS, **dict(zip(names, values, strict=True)))
        for values in itertools.product(*grid_spec.values())
    ]
    convs = sorted({s.sample_id for s in sigs})
    header = f"{'params':<44}" + "".join(f"{'R@' + str(k):>7}" for k in locomo.KS)
    print(header + "  cat5 R@5  " + "  ".join(f"{c} R@5" for c in convs))
    for p in grid:
        r = evaluate(sigs, p)
        per = [evaluate([s for s in sigs if s.sample_id == c], p)["1-4"]["R@5"] for c in convs]
        label = ",".join(f"{n}={getattr(p, n):g}" for n in names)
        print(
            f"{label:<44}"
            + "".join(f"{r['1-4'][f'R@{k}']:7.3f}" for k in locomo.KS)
            + f"{r['5']['R@5']:10.3f}  "
            + "  ".join(f"{x:11.3f}" for x in per)
        )
    table, picks = leave_one_out(sigs, grid)
    print("\nleave-one-conversation-out (tuned on the other conversation):")
    for held, p, stats in picks:
        label = ",".join(f"{n}={getattr(p, n):g}" for n in names)
        print(f"  held out {held}: {label}  R@5 {stats['R@5']:.3f}")
    print(locomo.format_table("pooled held-out", table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
