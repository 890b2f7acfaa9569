"""Fusion tuning lab for LoCoMo: grids over FusionParams, in-sample and leave-one-out.

Not a benchmark (bench/locomo.py is). Signals (exact cosine, FTS5 bm25 through
walrus_mem.ranking.fts_query on one shared FTS5 table, like the catalog) are
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
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo

from walrus_mem import ranking

DEFAULT_GRID: dict[str, list[Any]] = {
    "dense_weight": [0.4, 0.5, 0.6, 0.7],
    "lexical_floor": [1.0, 4.0, 8.0],
    "context_weight": [0.0, 0.6, 0.7, 0.8, 0.9],
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


@dataclass(frozen=True)
class QSignals:
    sample_id: str
    category: int
    evidence: tuple[str, ...]
    dia_ids: tuple[str, ...]
    cos: locomo.FloatArray
    lex: dict[int, float]


def build(path: Path, captions: bool = False) -> list[QSignals]:
    convs = locomo.load_locomo(path)
    embedder = locomo.CachedEmbedder()
    store = locomo.StandaloneStore()
    for conv in convs:
        docs = [t.document(captions) for t in conv.turns]
        store.add(conv.sample_id, docs, embedder.embed(docs))
    out: list[QSignals] = []
    for conv in convs:
        dia = tuple(t.dia_id for t in conv.turns)
        qvecs = embedder.embed([q.text for q in conv.questions])
        for q, qvec in zip(conv.questions, qvecs, strict=True):
            cos, lex = store.signals(conv.sample_id, q.text, qvec)
            out.append(QSignals(conv.sample_id, q.category, q.evidence, dia, cos, lex))
    embedder.save()
    return out


def evaluate(
    sigs: list[QSignals], params: ranking.FusionParams, pool: int = 50
) -> dict[str, dict[str, float]]:
    outcomes = [
        locomo.Outcome(
            s.sample_id,
            s.category,
            tuple(s.dia_ids[i] for i, _ in locomo.hybrid_rank(s.cos, s.lex, 20, params, pool=pool)),
            s.evidence,
        )
        for s in sigs
    ]
    return locomo.summarize(outcomes)


def leave_one_out(
    sigs: list[QSignals], grid: list[ranking.FusionParams], metric: str = "R@5"
) -> tuple[dict[str, dict[str, float]], list[tuple[str, ranking.FusionParams, dict[str, float]]]]:
    """Per held-out conversation: params picked on the others, scored on it; plus pooled."""
    convs = sorted({s.sample_id for s in sigs})
    per_conv = {
        c: [evaluate([s for s in sigs if s.sample_id == c], p) for p in grid] for c in convs
    }
    picks: list[tuple[str, ranking.FusionParams, dict[str, float]]] = []
    held_outcomes: list[QSignals] = []
    chosen: dict[str, ranking.FusionParams] = {}
    for held in convs:
        train = [c for c in convs if c != held]
        best = max(
            range(len(grid)),
            key=lambda j: np.mean([per_conv[c][j]["1-4"][metric] for c in train]),
        )
        chosen[held] = grid[best]
        picks.append((held, grid[best], per_conv[held][best]["1-4"]))
        held_outcomes += [s for s in sigs if s.sample_id == held]
    # pooled held-out figure: every question scored with the params chosen without it
    pooled: dict[str, list[locomo.Outcome]] = {}
    rows: list[locomo.Outcome] = []
    for s in held_outcomes:
        hits = locomo.hybrid_rank(s.cos, s.lex, 20, chosen[s.sample_id])
        rows.append(
            locomo.Outcome(
                s.sample_id, s.category, tuple(s.dia_ids[i] for i, _ in hits), s.evidence
            )
        )
    pooled["loo"] = rows
    return locomo.summarize(rows), picks


def min_score_check(path: Path, params: ranking.FusionParams) -> None:
    convs = locomo.load_locomo(path)
    embedder = locomo.CachedEmbedder()
    store = locomo.StandaloneStore()
    for conv in convs:
        docs = [t.document() for t in conv.turns]
        store.add(conv.sample_id, docs, embedder.embed(docs))
    evidence_scores: list[float] = []
    off_top1: list[float] = []
    on_top1: list[float] = []
    ood_top1: list[float] = []
    ood_vecs = embedder.embed(OUT_OF_DOMAIN)
    for conv in convs:
        for text, vec in zip(OUT_OF_DOMAIN, ood_vecs, strict=True):
            ood_top1.append(store.recall(conv.sample_id, text, vec, 1, params)[0][1].score)
        others = [o for o in convs if o is not conv]
        qvecs = embedder.embed([q.text for q in conv.questions])
        for q, qvec in zip(conv.questions, qvecs, strict=True):
            if q.category == 5:
                continue
            hits = store.recall(conv.sample_id, q.text, qvec, 20, params)
            on_top1.append(hits[0][1].score)
            evidence_scores += [s.score for i, s in hits if conv.turns[i].dia_id in q.evidence]
            for other in others:
                off_top1.append(store.recall(other.sample_id, q.text, qvec, 1, params)[0][1].score)
    pct = [10, 25, 50, 75, 90]
    print("score percentiles", pct)
    print("  evidence hits in top 20  ", np.percentile(evidence_scores, pct).round(3))
    print("  on-topic top-1           ", np.percentile(on_top1, pct).round(3))
    print("  other-conversation top-1 ", np.percentile(off_top1, pct).round(3))
    print("  out-of-domain top-1      ", np.percentile(ood_top1, pct).round(3))
    for cut in sorted({0.1, 0.15, 0.2, 0.25, 0.3, ranking.DEFAULT_MIN_SCORE}):
        kept = np.mean(np.array(evidence_scores) >= cut)
        off = np.mean(np.array(off_top1) >= cut)
        ood = np.mean(np.array(ood_top1) >= cut)
        print(
            f"  min_score {cut:.2f}: evidence kept {kept:.3f}, other-conversation top-1 kept "
            f"{off:.3f}, out-of-domain top-1 kept {ood:.3f}"
        )


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
    args = parser.parse_args()
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
