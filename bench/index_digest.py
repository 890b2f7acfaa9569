"""What verifying the index file's checksum costs at open, against loading it.

Usage::

    nice -n 10 python bench/index_digest.py                    # 20k vectors, dim 384
    nice -n 10 python bench/index_digest.py --count 100000 --runs 5

Builds a USearch index like walrus_mem's (cos, float16) from random vectors,
saves it, then times, from the page cache: BLAKE2b-256 of the whole file
(``walrus_mem._recall.index.file_digest``, what an open pays when the file's stamp is
not the one last verified, and what every save pays once), ``os.stat`` (what
an open pays when the stamp matches), and ``Index.load`` (what every open
already pays). The file's bytes per vector give the 100k and 1M file sizes;
the timings at those sizes are extrapolated linearly (both are a pass over
the file). Writes ``.bench-results/index_digest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from usearch.index import Index

from walrus_mem._recall.index import file_digest, file_stamp


def _best(fn, runs: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.usearch"
        index = Index(ndim=args.dim, metric="cos", dtype="f16")
        start = time.perf_counter()
        index.add(np.arange(1, args.count + 1, dtype=np.uint64),
                  rng.standard_normal((args.count, args.dim)).astype(np.float32))
        build = time.perf_counter() - start
        index.save(str(path))
        size = path.stat().st_size
        file_digest(path)  # warm the page cache
        digest_med, digest_min = _best(lambda: file_digest(path), args.runs)
        stat_med, _ = _best(lambda: file_stamp(path), args.runs)
        load_med, load_min = _best(
            lambda: Index(ndim=args.dim, metric="cos", dtype="f16").load(str(path)), args.runs)
    per_vector = size / args.count
    mb_s = size / digest_min / 1e6
    result = {
        "count": args.count, "dim": args.dim, "build_s": round(build, 2), "file_bytes": size,
        "bytes_per_vector": round(per_vector, 1),
        "digest_s_median": round(digest_med, 4), "digest_mb_s_best": round(mb_s, 1),
        "load_s_median": round(load_med, 4), "load_s_best": round(load_min, 4),
        "stat_us_median": round(stat_med * 1e6, 1),
        "estimate": {str(n): {"file_mb": round(per_vector * n / 1e6),
                              "digest_s": round(digest_med * n / args.count, 2),
                              "load_s": round(load_med * n / args.count, 2)}
                     for n in (100_000, 1_000_000)},
        "loadavg": os.getloadavg()[0],
    }
    out = Path(".bench-results")
    out.mkdir(exist_ok=True)
    (out / "index_digest.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
