"""A/B: this tree against another checkout, recall latency and ingest, alternated in one run.

Usage::

    python bench/ab.py --baseline /work/vbefore              # 5 rounds
    python bench/ab.py --baseline DIR --rounds 3 --memories 5000 --facts 500

Each round runs, for the baseline and then for this tree (the order flips every
round, so a drifting load hits both alike), each tree's own copy of

* ``bench/recall.py --sizes N --no-model --no-neighbour``: ``Memory.recall`` p50
  with the query vector given (everything but the model), and
* ``bench/ingest.py --facts F --fake``: ``remember_many`` end to end over HTTP with
  the fast fake embedder, so the figure is the library's own overhead per fact,

with ``PYTHONPATH`` set to that tree. Cold CLI processes have their own A/B:
``python bench/cold.py --baseline DIR``. Prints per-round figures, the medians and
the ratios this/baseline; writes ``.bench-results/ab.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / ".bench-results"


def _run(tree: Path, script: str, args: list[str], result: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, str(tree / "bench" / script), *args], cwd=tree, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return json.loads((tree / ".bench-results" / result).read_text())


def _measure(tree: Path, memories: int, queries: int, facts: int) -> dict[str, float]:
    recall = _run(tree, "recall.py", ["--sizes", str(memories), "--queries", str(queries),
                                      "--no-model", "--no-neighbour"], "recall.json")
    first = recall["results"][0]
    ingest = _run(tree, "ingest.py", ["--facts", str(facts), "--fake"], "ingest.json")
    return {
        "recall_p50_ms": first["recall"]["p50_ms"],
        "recall_cpu_p50_ms": first["recall_cpu"]["p50_ms"],
        "ingest_facts_per_s": ingest["e2e_facts_per_s"],
        "ingest_overhead_ms_per_fact": ingest["overhead_ms_per_fact"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="another checkout")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--facts", type=int, default=1_000)
    args = parser.parse_args(argv)
    trees = {"baseline": args.baseline.resolve(), "this": ROOT}
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "this": []}
    for round_ in range(args.rounds):
        order = ["baseline", "this"] if round_ % 2 == 0 else ["this", "baseline"]
        for name in order:
            figures = _measure(trees[name], args.memories, args.queries, args.facts)
            runs[name].append(figures)
            print(f"round {round_ + 1} {name:>8}: " + "  ".join(
                f"{key} {value:.3f}" for key, value in figures.items()), flush=True)
    medians = {name: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
               for name, rows in runs.items()}
    ratios = {key: medians["this"][key] / medians["baseline"][key] for key in medians["this"]}
    print(f"{'figure':<28} {'baseline':>10} {'this':>10} {'this/baseline':>14}")
    for key, ratio in ratios.items():
        print(f"{key:<28} {medians['baseline'][key]:>10.3f} {medians['this'][key]:>10.3f}"
              f" {ratio:>14.3f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ab.json").write_text(json.dumps(
        {"baseline": str(trees["baseline"]), "rounds": runs, "medians": medians,
         "ratios": ratios, "load_avg": os.getloadavg()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
