"""Calibrate recall's default cutoff on agent-memory questions, with a held-out half.

    python bench/relevance_cutoff.py

tests/data/relevance_pairs.json: 50 (question, relevant fact) pairs and 45
questions no stored fact answers (each with a distractor fact). Each pair's
half (tuning / held-out) is fixed by a hash of its question. Every fact goes
into one namespace in one batch (the worst case for the context signal); each
question is recalled with the real model (all-MiniLM-L6-v2) through the public
API, top 5 as auto-recall injects. A threshold is chosen on the tuning half
(maximising relevant-kept + unrelated-dropped, ties to the higher threshold),
and both halves are reported at the chosen and at the shipped value, with the
README's own hook example.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from walrus_mem._recall.embeddings import make_embedder  # noqa: E402
from walrus_mem._recall.ranking import DEFAULT_MIN_SCORE  # noqa: E402
from walrus_mem.config import Settings  # noqa: E402
from walrus_mem.hooks import clear_winner  # noqa: E402
from walrus_mem.memory import Memory  # noqa: E402

DATA = json.loads((ROOT / "tests" / "data" / "relevance_pairs.json").read_text(encoding="utf-8"))
TOP_K = 5
README_FACTS = ["I'm allergic to peanuts and cashews", "My sister Ana lives in Lisbon",
                "The staging database is orca-staging"]
README_QUESTION = "What should I order for lunch today?"


def half(question: str) -> str:
    return "holdout" if hashlib.blake2b(question.encode(), digest_size=2).digest()[0] % 2 \
        else "tuning"


def main() -> int:
    started = time.perf_counter()
    embedder = make_embedder("all-MiniLM-L6-v2")
    facts = [p["fact"] for p in DATA["relevant"] + DATA["unrelated"]]
    random.Random(0).shuffle(facts)
    rel: list[tuple[str, float | None]] = []  # split, score of the relevant fact in the top k
    unrel: list[tuple[str, float]] = []  # split, best score
    rel_cw: list[tuple[str, bool]] = []  # split, kept under cutoff + clear-winner rule
    unrel_cw: list[tuple[str, bool]] = []  # split, best hit injected under that rule
    with tempfile.TemporaryDirectory() as tmp:
        with Memory(Settings(data_dir=Path(tmp) / "d", config_file=None, use_keyring=False),
                    embedder=embedder, master_key="00" * 32) as mem:
            mem.remember_many(facts, namespace="cal")
            for pair in DATA["relevant"]:
                hits = mem.recall(pair["query"], namespace="cal", k=TOP_K, min_score=0)
                score = next((float(h.score) for h in hits if h.text == pair["fact"]), None)
                rel.append((half(pair["query"]), score))
                scores = [float(h.score) for h in hits]
                winner = clear_winner(scores[:2])
                rel_cw.append((half(pair["query"]), any(
                    h.text == pair["fact"] and (h.score >= DEFAULT_MIN_SCORE or i == 0 and winner)
                    for i, h in enumerate(hits))))
            for pair in DATA["unrelated"]:
                best = mem.recall(pair["query"], namespace="cal", k=2, min_score=0)
                unrel.append((half(pair["query"]), float(best[0].score) if best else 0.0))
                scores = [float(h.score) for h in best]
                unrel_cw.append((half(pair["query"]), bool(scores) and (
                    scores[0] >= DEFAULT_MIN_SCORE or clear_winner(scores))))
            mem.remember_many(README_FACTS, namespace="readme")
            readme = mem.recall(README_QUESTION, namespace="readme", k=TOP_K, min_score=0)
            readme_scores = {h.text: round(float(h.score), 3) for h in readme}

    def figures(split: str, cut: float) -> tuple[int, int, int, int]:
        r = [s for sp, s in rel if sp == split]
        u = [s for sp, s in unrel if sp == split]
        return (sum(1 for s in r if s is not None and s >= cut), len(r),
                sum(1 for s in u if s < cut), len(u))

    candidates = sorted({round(c / 1000, 3) for c in range(100, 450, 5)})
    best_cut = max(candidates, key=lambda c: (figures("tuning", c)[0] + figures("tuning", c)[2],
                                              c))
    print(f"pairs: {len(rel)} relevant, {len(unrel)} unrelated; halves: "
          f"{sum(1 for s, _ in rel if s == 'tuning')}+{sum(1 for s, _ in unrel if s == 'tuning')}"
          f" tuning, {sum(1 for s, _ in rel if s == 'holdout')}+"
          f"{sum(1 for s, _ in unrel if s == 'holdout')} held-out")
    for name, cut in (("chosen on tuning", best_cut), ("shipped", DEFAULT_MIN_SCORE)):
        for split in ("tuning", "holdout"):
            kept, n_rel, dropped, n_unrel = figures(split, cut)
            print(f"{name:17s} {cut:.3f} {split:8s} relevant kept {kept}/{n_rel} "
                  f"({kept / n_rel:.0%}), unrelated dropped {dropped}/{n_unrel} "
                  f"({dropped / n_unrel:.0%})")
    for split in ("tuning", "holdout"):
        kept = sum(1 for sp, ok in rel_cw if sp == split and ok)
        n_rel = sum(1 for sp, _ in rel_cw if sp == split)
        dropped = sum(1 for sp, bad in unrel_cw if sp == split and not bad)
        n_unrel = sum(1 for sp, _ in unrel_cw if sp == split)
        print(f"shipped + clear winner {split:8s} relevant kept {kept}/{n_rel} "
              f"({kept / n_rel:.0%}), unrelated dropped {dropped}/{n_unrel} "
              f"({dropped / n_unrel:.0%})")
    print(f"README example {README_QUESTION!r}: {readme_scores}, clear winner: "
          f"{clear_winner(sorted(readme_scores.values(), reverse=True)[:2])}")
    print(f"{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
