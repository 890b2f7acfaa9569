"""Warm recall *including the query embedding*, per runtime, with a busy neighbour.

Usage::

    python bench/recall.py --sizes 100000 --no-model --data-dir DIR   # build once
    python bench/warm_recall.py --data-dir DIR --memories 100000 --queries 150

Opens the data dir bench/recall.py kept (its clustered corpus), and for each
query text (new to every runtime: no cache) times ``Memory.recall`` with the
query embedded by each runtime in turn (numpy, onnxruntime, ...), the
runtimes rotating per query so that every runtime sees the same load. A
neighbour process keeps one core busy (``--no-neighbour``: without it). Also
times each runtime's bare encode of the same texts. Every embedder runs on
one thread (``embedding_threads`` default). Reports n, p50, p90, p99, min,
max, the recalling thread's CPU time (onnxruntime on one thread computes
in the calling thread; preemption does not inflate it) and the load average before and after; writes
``.bench-results/warm_recall.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.recall import DIM, MASTER, NAMESPACE, LookupEmbedder  # noqa: E402
from walrus_mem import Memory, Settings  # noqa: E402
from walrus_mem._recall.embeddings import SentenceTransformerEmbedder  # noqa: E402

RESULTS = ROOT / ".bench-results"


def stats(samples: list[float]) -> dict[str, float]:
    ms = np.asarray(samples) * 1000
    return {"n": len(ms), "p50_ms": round(float(np.median(ms)), 2),
            "p90_ms": round(float(np.percentile(ms, 90)), 2),
            "p99_ms": round(float(np.percentile(ms, 99)), 2),
            "min_ms": round(float(ms.min()), 2), "max_ms": round(float(ms.max()), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True, help="bench/recall.py's --data-dir")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--runtimes", nargs="+", default=["numpy", "onnx"],
                        choices=["numpy", "onnx", "torch", "auto"])
    parser.add_argument("--no-neighbour", action="store_true")
    args = parser.parse_args(argv)

    models: dict[str, SentenceTransformerEmbedder] = {}
    for name in args.runtimes:
        model = SentenceTransformerEmbedder(backend=name, threads=1)
        model.embed(["warm up"])
        model.warm(timeout=600)
        models[name] = model
    settings = Settings(config_file=None, data_dir=Path(args.data_dir) / f"n{args.memories}",
                        use_keyring=False, publisher_url=None, aggregator_urls=[])
    lookup = LookupEmbedder()
    mem = Memory(settings, embedder=lookup, master_key=MASTER)
    idx = mem._indexes.get(NAMESPACE, lookup.model_id, DIM)
    assert len(idx) == args.memories, len(idx)
    current: dict[str, Any] = {}
    lookup.fallback = lambda texts: current["model"].embed(texts)
    for i in range(20):  # warm the index pages and the recall path
        lookup.table.clear()
        current["model"] = models[args.runtimes[0]]
        mem.recall(f"warm up query {i} about things", namespace=NAMESPACE, k=5, min_score=0)

    texts = [f"what does the user prefer about topic {i} and w{100 + i:05d}"
             for i in range(args.queries)]
    recall_t: dict[str, list[float]] = {name: [] for name in args.runtimes}
    recall_cpu: dict[str, list[float]] = {name: [] for name in args.runtimes}
    encode_t: dict[str, list[float]] = {name: [] for name in args.runtimes}
    loads = [os.getloadavg()[0]]
    neighbour = None if args.no_neighbour else subprocess.Popen(
        [sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        names = list(args.runtimes)
        for i, text in enumerate(texts):
            order = names[i % len(names):] + names[: i % len(names)]
            for name in order:
                current["model"] = models[name]
                lookup.table.clear()
                mem._embedding.query_cache.clear()
                c0, t0 = time.thread_time(), time.perf_counter()
                mem.recall(text, namespace=NAMESPACE, k=5, min_score=0)
                recall_t[name].append(time.perf_counter() - t0)
                recall_cpu[name].append(time.thread_time() - c0)
                t0 = time.perf_counter()
                models[name].embed([text])
                encode_t[name].append(time.perf_counter() - t0)
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    loads.append(os.getloadavg()[0])
    mem.close()
    out = {"benchmark": "warm_recall", "memories": args.memories,
           "neighbour": neighbour is not None, "load_avg_1min": loads, "cpus": os.cpu_count(),
           "runtimes": {name: {"backend": models[name].backend, "recall": stats(recall_t[name]),
                               "recall_cpu": stats(recall_cpu[name]),
                               "encode": stats(encode_t[name])} for name in args.runtimes}}
    print(f"{args.memories:,} memories, neighbour busy: {neighbour is not None}, "
          f"load {min(loads):.2f}-{max(loads):.2f}")
    for name, r in out["runtimes"].items():
        rec, enc, cpu = r["recall"], r["encode"], r["recall_cpu"]
        print(f"{name:>6} ({r['backend']}): recall incl. embedding n={rec['n']} p50 "
              f"{rec['p50_ms']} ms (min {rec['min_ms']}, p90 {rec['p90_ms']}, p99 "
              f"{rec['p99_ms']}; CPU p50 {cpu['p50_ms']}); encode alone p50 "
              f"{enc['p50_ms']} ms (min {enc['min_ms']})")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "warm_recall.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
