"""Auto-recall calibration: do unrelated prompts inject nothing, do questions get their memory?

    python bench/recall_calibration.py          # figures for docs/security.md
    python bench/recall_calibration.py --fit    # also refit the gate's weights on tuning

Corpora: tests/data/recall_calibration.json (63 questions with the fact that
answers them, 10 extra facts, 121 unrelated prompts: small talk, coding, world
facts, maths, how-tos; written before the gate) and the older
tests/data/relevance_pairs.json (50 questions, 45 unrelated prompts). Each
corpus's facts go into one namespace; the older unrelated prompts are also
asked against the new namespace. Each prompt's half is fixed by a hash of its
text. Every prompt goes through ``MemoryHooks.before_prompt_build`` with the
real model (all-MiniLM-L6-v2), defaults otherwise, with the query gate on and
off. A question counts as answered when its fact is among the injected
memories; an unrelated prompt counts against us when anything is injected.

``--fit`` refits the logistic weights of walrus_mem._recall.relevance_gate on the
tuning half only (Newton's method, L2 1.0) and picks the threshold with the
most tuning questions answered among those that let no tuning unrelated prompt
through.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from walrus_mem._recall.embeddings import embed_checked, make_embedder  # noqa: E402
from walrus_mem._recall.relevance_gate import (  # noqa: E402
    GATES,
    IntentBank,
    content_overlap,
    personal_cue,
)
from walrus_mem.config import AgentConfig, Settings  # noqa: E402
from walrus_mem.hooks import MemoryHooks, clear_winner  # noqa: E402
from walrus_mem.memory import Memory  # noqa: E402

DATA = ROOT / "tests" / "data"
README_FACTS = ["I'm allergic to peanuts and cashews", "My sister Ana lives in Lisbon",
                "The staging database is orca-staging"]
README_QUESTION = "What should I order for lunch today?"


def half(text: str) -> str:
    return "holdout" if hashlib.blake2b(text.encode(), digest_size=2).digest()[0] % 2 \
        else "tuning"


def cases() -> tuple[dict[str, list[str]], list[tuple[str, str, str | None, str]]]:
    """Facts per namespace, and (namespace, prompt, expected fact or None, set name)."""
    new = json.loads((DATA / "recall_calibration.json").read_text(encoding="utf-8"))
    old = json.loads((DATA / "relevance_pairs.json").read_text(encoding="utf-8"))
    facts = {"new": [p["fact"] for p in new["relevant"]] + new["extra_facts"],
             "old": [p["fact"] for p in old["relevant"] + old["unrelated"]],
             "readme": README_FACTS}
    out = [("new", p["query"], p["fact"], "new") for p in new["relevant"]]
    out += [("new", q, None, "new") for q in new["unrelated"]]
    out += [("old", p["query"], p["fact"], "old") for p in old["relevant"]]
    out += [("old", p["query"], None, "old") for p in old["unrelated"]]
    out += [("new", p["query"], None, "old-on-new") for p in old["unrelated"]]
    return facts, out


def _fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """Logistic regression by Newton's method; L2 on the weights, not the bias."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    reg = np.eye(len(w)) / l2
    reg[-1, -1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-xb @ w))
        grad = xb.T @ (p - y) + reg @ w
        hess = xb.T @ (xb * (p * (1 - p))[:, None]) + reg
        w -= np.linalg.solve(hess, grad)
    return w


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--probe", type=Path, action="append", default=[],
                        help="a probe file (relevant/unrelated on the calibration namespace), "
                        "reported on its own, never fitted on; repeatable")
    parser.add_argument("--dump", type=Path, help="write every prompt's row (features, "
                        "outcomes, best-hit scores) as JSON, for analysis of the tuning half")
    args = parser.parse_args(argv)
    embedder = make_embedder("all-MiniLM-L6-v2")
    facts, prompts = cases()
    for probe_file in args.probe:
        probe = json.loads(probe_file.read_text(encoding="utf-8"))
        prompts += [("new", p["query"], p["fact"], probe_file.stem) for p in probe["relevant"]]
        prompts += [("new", q, None, probe_file.stem) for q in probe["unrelated"]]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "d", config_file=None, use_keyring=False)
        with Memory(settings, embedder=embedder, master_key="00" * 32) as mem:
            for ns, texts in facts.items():
                shuffled = list(texts)
                random.Random(0).shuffle(shuffled)
                mem.remember_many(shuffled, namespace=ns)
            gated = MemoryHooks(mem, AgentConfig())
            plain = MemoryHooks(mem, AgentConfig(query_gate=False))
            bank = IntentBank(lambda texts: embed_checked(embedder, texts, 32))
            try:
                for ns, prompt, fact, name in prompts + [("readme", README_QUESTION,
                                                          README_FACTS[0], "readme")]:
                    row: dict[str, Any] = {"prompt": prompt, "fact": fact, "set": name,
                                           "half": name if name.startswith("recall_probe")
                                           else half(prompt)}
                    for label, hooks in (("gate", gated), ("old", plain)):
                        ctx = hooks.before_prompt_build(prompt, f"agent:{ns}")
                        texts = [h.text for h in ctx.memories]
                        row[label] = (fact in texts) if fact else bool(texts)
                    hits = mem.recall(prompt, namespace=ns, k=15, min_score=0)
                    row["features"] = [
                        float(hits[0].dense or 0.0) if hits else 0.0,
                        min(content_overlap(prompt, [h.text for h in hits[:3]]), 2),
                        float(personal_cue(prompt)),
                        bank.intent(mem.query_vector(prompt)),
                    ]
                    scores = [float(h.score) for h in hits]
                    row["scores"] = scores[:3]
                    row["top_is_fact"] = bool(fact) and bool(hits) and hits[0].text == fact
                    row["stage2"] = bool(fact) and any(
                        h.text == fact and (h.score >= AgentConfig().min_relevance
                                            or i == 0 and clear_winner(scores[:2]))
                        for i, h in enumerate(hits[:5]))
                    row["in_top5"] = bool(fact) and any(h.text == fact for h in hits[:5])
                    rows.append(row)
            finally:
                gated.close()
                plain.close()
    readme = rows.pop()
    if args.dump:
        args.dump.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    for label, title in (("old", "per-hit cutoff only (before)"), ("gate", "query gate + cutoff")):
        for split in ("tuning", "holdout", *(f.stem for f in args.probe)):
            rel = [r for r in rows if r["half"] == split and r["fact"]]
            unrel = [r for r in rows if r["half"] == split and not r["fact"]]
            got = sum(r[label] for r in rel)
            bad = sum(r[label] for r in unrel)
            print(f"{title:30s} {split:8s} questions answered {got}/{len(rel)} "
                  f"({got / len(rel):.0%}), unrelated prompts injecting {bad}/{len(unrel)} "
                  f"({bad / len(unrel):.1%})")
    print(f"README example {README_QUESTION!r}: answered before {readme['old']}, "
          f"with gate {readme['gate']}")
    if args.fit:
        train = [r for r in rows if r["half"] == "tuning" and (r["in_top5"] or not r["fact"])]
        x = np.array([r["features"] for r in train], dtype=float)
        y = np.array([1.0 if r["fact"] else 0.0 for r in train])
        w = _fit(x, y)
        names = ("dense", "overlap", "personal", "intent", "bias")
        print("fitted on tuning:", ", ".join(f"{n} {v:.3f}" for n, v in zip(names, w, strict=True)))
        tuning = [r for r in rows if r["half"] == "tuning"]
        best = None
        for th in np.arange(0.05, 0.96, 0.05):
            def passes(r: dict[str, Any], th: float = float(th)) -> bool:
                z = w[-1] + float(np.dot(w[:-1], r["features"]))
                return bool(1 / (1 + np.exp(-z)) >= th)

            bad = sum(passes(r) for r in tuning if not r["fact"])
            got = sum(passes(r) and r["stage2"] for r in tuning if r["fact"])
            print(f"  threshold {th:.2f}: tuning answered {got}, unrelated injecting {bad}")
            if bad == 0 and (best is None or got > best[1]):
                best = (round(float(th), 2), got)
        print(f"chosen threshold {best}; shipped {next(iter(GATES.values()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
