"""The index's int8 vectors against float16: the same searches, side by side (issue 28).

Usage::

    python bench/index_int8.py                     # 100k clustered vectors, 500 queries
    python bench/index_int8.py --n 20000 --queries 200
    python bench/index_int8.py --locomo            # also LoCoMo's real MiniLM vectors

Two USearch indexes of the same vectors, built the way walrus_mem builds them (metric cos,
one thread, keys in order): float16 (``dtype="f16"``, the index before) and int8 (each
vector scaled by its own largest component, ``walrus_mem._recall.index_vectors.quantize``,
the query too). The corpus is bench/recall.py's (clustered 384-d vectors, as bench/scale.py
writes them); ``--locomo`` adds the MiniLM embeddings bench/locomo.py cached in
``.bench-results/locomo-embeddings-minilm-l6.npz`` (the last fifth as queries). Per corpus:

* ``recall_at_10``: the share of the exact top 10 (float32 brute force) each index returns;
* ``overlap_at_10``: the int8 top 10 against the float16 top 10 (mean share, and the share of
  queries with the same 10), ``top1_same``;
* ``cosine_error``: |int8 cosine - float32 cosine| and |float16 - float32| on the returned keys;
* ``search_ms``: a search of the engine's candidate count (50) per index, p50 / p99.

Writes ``.bench-results/index-int8.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from recall import DIM, make_centres  # noqa: E402  (bench/recall.py's corpus)

from walrus_mem._recall.index_vectors import quantize  # noqa: E402
from walrus_mem._recall.native import before_usearch  # noqa: E402

before_usearch()
from usearch.index import Index  # noqa: E402

RESULTS = ROOT / ".bench-results"
CANDIDATES = 50


def clustered(n: int, queries: int, seed: int = 28) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = make_centres(n, rng)

    def points(count: int) -> np.ndarray:
        v = centres[rng.integers(0, len(centres), count)] + 0.6 * rng.standard_normal(
            (count, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    return points(n), points(queries)


def _percentiles(samples: list[float]) -> dict[str, float]:
    arr = np.asarray(samples) * 1000
    return {"p50": round(float(np.percentile(arr, 50)), 4),
            "p99": round(float(np.percentile(arr, 99)), 4)}


def compare(name: str, corpus: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    corpus = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    keys = np.arange(len(corpus), dtype=np.uint64)
    built: dict[str, Index] = {}
    for kind, data in (("f16", corpus), ("i8", quantize(corpus))):
        started = time.perf_counter()
        index = Index(ndim=corpus.shape[1], metric="cos", dtype=kind)
        index.add(keys, data, threads=1)
        built[kind] = index
        print(f"{name}: {kind} built in {time.perf_counter() - started:.0f} s", flush=True)
    exact = np.argsort(-(queries @ corpus.T), axis=1)[:, :10]
    top: dict[str, list[np.ndarray]] = {"f16": [], "i8": []}
    errors: dict[str, list[float]] = {"f16": [], "i8": []}
    times: dict[str, list[float]] = {"f16": [], "i8": []}
    for q in queries:
        for kind in ("f16", "i8"):
            query = q if kind == "f16" else quantize(q)
            started = time.perf_counter()
            found = built[kind].search(query, CANDIDATES)
            times[kind].append(time.perf_counter() - started)
            got = np.asarray(found.keys, dtype=np.int64)[:10]
            top[kind].append(got)
            true = corpus[got] @ q
            errors[kind] += np.abs(1.0 - np.asarray(found.distances[:10]) - true).tolist()
    out: dict[str, Any] = {"corpus": name, "n": len(corpus), "queries": len(queries)}
    out["recall_at_10"] = {kind: round(float(np.mean(
        [len(set(t.tolist()) & set(e.tolist())) / 10 for t, e in zip(top[kind], exact,
                                                                       strict=True)])), 4)
        for kind in top}
    pairs = list(zip(top["i8"], top["f16"], strict=True))
    out["overlap_at_10"] = {
        "mean": round(float(np.mean([len(set(a.tolist()) & set(b.tolist())) / 10
                                     for a, b in pairs])), 4),
        "same_set_share": round(float(np.mean([set(a.tolist()) == set(b.tolist())
                                               for a, b in pairs])), 4),
        "same_order_share": round(float(np.mean([np.array_equal(a, b) for a, b in pairs])), 4),
    }
    out["top1_same"] = round(float(np.mean([a[0] == b[0] for a, b in pairs])), 4)
    out["cosine_error"] = {kind: {"mean": round(float(np.mean(errors[kind])), 5),
                                  "p99": round(float(np.percentile(errors[kind], 99)), 5),
                                  "max": round(float(np.max(errors[kind])), 5)}
                           for kind in errors}
    out["search_ms"] = {kind: _percentiles(times[kind]) for kind in times}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--locomo", action="store_true")
    args = parser.parse_args(argv)
    results = [compare("clustered", *clustered(args.n, args.queries))]
    print(json.dumps(results[-1]), flush=True)
    if args.locomo:
        with np.load(RESULTS / "locomo-embeddings-minilm-l6.npz") as npz:
            vectors = np.asarray(npz[npz.files[-1]], dtype=np.float32)
        if vectors.ndim != 2:
            raise SystemExit("unexpected embedding cache layout")
        split = len(vectors) * 4 // 5
        results.append(compare("locomo-minilm", vectors[:split], vectors[split:]))
        print(json.dumps(results[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "index-int8.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
