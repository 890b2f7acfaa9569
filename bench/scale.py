"""No cliff at scale (issue 28 item 3): one namespace filled through the public API.

Usage::

    python bench/scale.py                       # 100k memories (the quick size)
    nice -n 10 python bench/scale.py --n 1000000   # the full size (~15+ min)
    python bench/scale.py --n 300000 --profile .bench-results/scale-prof
    python bench/scale.py --n 200000 --workdir /tmp/s200     # keep the data dir, then:
    python bench/scale.py --ab-manifest /tmp/s200/data        # old vs incremental manifest
    python bench/scale.py --reopen-child /tmp/s200/data /tmp/s200/queries.npz

One namespace, vectors given (a lookup embedder: clustered 384-d vectors and
Zipf-word texts as in bench/recall.py, generated per batch so the harness holds
no million vectors), the default embedded relayer (it shares this process, as a
user's default setup does). Measured, in one process:

* ``ingest``: ``Memory.remember_many`` in batches of ``--batch`` (10,000), the
  rate of each batch; ``first_10pct`` / ``last_10pct`` rates and their ratio
  (target >= 0.7);
* at the checkpoints (100k when the run goes past it, and the final size): one
  ``remember`` and one ``remember_many`` of 200 (``--reps`` times each, median;
  its manifest step timed apart), with a cProfile of each when ``--profile`` (and of
  the import's batch just past 10 % and its last one);
* ``first_recall_s``: the first ``recall`` after the import, in the importing
  process; then ``--queries`` recalls (p50 / p99) and the RSS after them;
* ``reopen``: a fresh process opens the data dir: open + first recall, p50 / p99
  of the same queries, RSS after them;
* ``disk_mb``: the data dir by part (catalog, index, embedded relayer).

Prints JSON lines as it goes and writes ``.bench-results/scale-<n>.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from recall import (  # noqa: E402  (bench/recall.py: the same corpus and queries)
    COMMON_SHARE,
    DIM,
    LookupEmbedder,
    make_centres,
    percentiles,
    query_texts,
    zipf_ranks,
)

from walrus_mem import Memory, Settings  # noqa: E402

RESULTS = ROOT / ".bench-results"
NAMESPACE = "scale"
MASTER = "28" * 32
CHECKPOINT = 100_000


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def usearch_mb(mem: Memory) -> float | None:
    """What USearch reports the namespace's graph holds in RAM (a view: the mapped file)."""
    idx = mem._indexes.loaded(NAMESPACE) if mem._indexes is not None else None
    return None if idx is None else round(idx.index.memory_usage / 2**20, 1)


def memory_by_mapping(top: int = 6) -> dict[str, Any]:
    """Where the RSS is (/proc/self/smaps): anonymous against file-backed pages, and the
    file mappings holding the most, by file name (MB)."""
    files: dict[str, float] = {}
    anon = file_backed = 0.0
    name = ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if not head:
            continue
        if not head[0].endswith(":"):  # a mapping's first line: range perms offset dev inode [path]
            name = head[5] if len(head) > 5 else ""
            continue
        if head[0] != "Rss:":
            continue
        kb = int(head[1]) / 1024
        if name.startswith("/"):
            file_backed += kb
            key = Path(name).name
            key = key.split(".")[-1] if key.count(".") > 1 else key  # <hash>.<token>.rows.npy
            files[key] = files.get(key, 0.0) + kb
        else:
            anon += kb
    biggest = sorted(files.items(), key=lambda kv: -kv[1])[:top]
    return {"anon_mb": round(anon, 1), "file_mb": round(file_backed, 1),
            "files_mb": {k: round(v, 1) for k, v in biggest}, **malloc_mb()}


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def malloc_mb() -> dict[str, float]:
    """glibc's heap (mallinfo2): in use and free (held, not returned to the system)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    return {"malloc_in_use_mb": round((info.uordblks + info.hblkhd) / 2**20, 1),
            "malloc_free_mb": round(info.fordblks / 2**20, 1)}


class Corpus:
    """Memories ``start..end`` of an ``n``-memory corpus, made on demand (seeded by batch)."""

    def __init__(self, n: int, seed: int = 28) -> None:
        self.seed = seed
        self.centres = make_centres(n, np.random.default_rng(seed))

    def batch(self, start: int, end: int, tag: str = "") -> tuple[list[str], np.ndarray]:
        rng = np.random.default_rng([self.seed, start, len(tag)])
        count = end - start
        labels = rng.integers(0, len(self.centres), count)
        vectors = self.centres[labels] + 0.6 * rng.standard_normal((count, DIM)).astype(
            np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        ranks = zipf_ranks(rng, count * 8).reshape(count, 8)
        prefers = rng.random(count) < COMMON_SHARE
        texts = [f"User {'prefers' if p else 'noted'} "
                 f"{' '.join(f'w{r:05d}' for r in row)} ({tag}note {start + i})"
                 for i, (row, p) in enumerate(zip(ranks, prefers, strict=True))]
        return texts, vectors

    def queries(self, count: int) -> tuple[list[str], np.ndarray]:
        rng = np.random.default_rng([self.seed, 1])
        vectors = self.centres[rng.integers(0, len(self.centres), count)] + \
            0.6 * rng.standard_normal((count, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return query_texts(rng, count), vectors


def disk_mb(data_dir: Path) -> dict[str, float]:
    def size(root: Path, pattern: str = "**/*") -> float:
        return round(sum(p.stat().st_size for p in root.glob(pattern) if p.is_file()) / 2**20, 1)
    return {"catalog": size(data_dir, "catalog.sqlite3*"), "index": size(data_dir / "index"),
            # the embedded relayer's folder (walrus_mem/_walrus/storage.py); `walrus` before
            "relayer": sum(size(data_dir / name) for name in ("relayer", "walrus")
                           if (data_dir / name).exists()),
            "total": size(data_dir)}


class ManifestTimer:
    """Time spent in the namespace log's publish step (wraps ``publish_now``)."""

    def __init__(self, mem: Memory) -> None:
        self.seconds = 0.0
        log = mem._log
        inner = log.publish_now

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        log.publish_now = timed  # type: ignore[method-assign]


def checkpoint(mem: Memory, corpus: Corpus, embedder: LookupEmbedder, manifests: ManifestTimer,
               size: int, reps: int, profile: Path | None) -> dict[str, Any]:
    """One remember and one remember_many(200), ``reps`` times each (median)."""
    single, many, many_manifest, single_cpu, many_cpu = [], [], [], [], []
    for rep in range(reps):
        texts, vectors = corpus.batch(size + 1000 * rep, size + 1000 * rep + 201, tag=f"c{size}r")
        embedder.table.update(zip(texts, vectors, strict=True))
        prof = cProfile.Profile() if profile is not None and rep == 0 else None
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        mem.remember(texts[0], namespace=NAMESPACE)
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(profile / f"remember-{size}.prof"))
        single.append(time.perf_counter() - t0)
        single_cpu.append(time.process_time() - c0)
        before = manifests.seconds
        prof = cProfile.Profile() if profile is not None and rep == 0 else None
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        result = mem.remember_many(texts[1:], namespace=NAMESPACE)
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(profile / f"remember_many200-{size}.prof"))
        many.append(time.perf_counter() - t0)
        many_cpu.append(time.process_time() - c0)
        many_manifest.append(manifests.seconds - before)
        assert result.stored == 200, result
        for text in texts:
            embedder.table.pop(text, None)
    return {
        "size": size, "reps": reps,
        "remember_s": round(statistics.median(single), 4),
        "remember_s_all": [round(s, 4) for s in single],
        "remember_many200_s": round(statistics.median(many), 4),
        "remember_many200_s_all": [round(s, 4) for s in many],
        "remember_many200_manifest_s": round(statistics.median(many_manifest), 4),
        "remember_cpu_s": round(statistics.median(single_cpu), 4),
        "remember_many200_cpu_s": round(statistics.median(many_cpu), 4),
    }


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    n, batch = args.n, args.batch
    corpus = Corpus(n)
    embedder = LookupEmbedder()
    data_dir = workdir / "data"
    settings = Settings(config_file=None, data_dir=data_dir, use_keyring=False,
                        publisher_url=None, aggregator_urls=[])  # the embedded relayer
    mem = Memory(settings, embedder=embedder, master_key=MASTER)
    manifests = ManifestTimer(mem)
    profile = Path(args.profile) if args.profile else None
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
    # (memories, memories after, seconds, manifest seconds) per batch, and CPU seconds
    rates: list[tuple[int, int, float, float]] = []
    cpu: list[float] = []
    checkpoints: list[dict[str, Any]] = []
    done = 0
    started = time.perf_counter()
    while done < n:
        end = min(n, done + batch)
        texts, vectors = corpus.batch(done, end)
        embedder.table = dict(zip(texts, vectors, strict=True))
        before = manifests.seconds
        prof = cProfile.Profile() if profile is not None and end in (
            batch * (n // batch // 10 + 1), n) else None
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        result = mem.remember_many(texts, namespace=NAMESPACE)
        seconds = time.perf_counter() - t0
        cpu.append(time.process_time() - c0)
        if prof is not None and profile is not None:
            prof.disable()
            prof.dump_stats(str(profile / f"batch-{end}.prof"))
        assert result.stored == end - done and not result.failed, result
        rates.append((end - done, end, seconds, manifests.seconds - before))
        done = end
        if len(rates) % max(1, (n // batch) // 20) == 0 or done == n:
            print(json.dumps({"done": done, "batch_s": round(seconds, 3),
                              "batch_cpu_s": round(cpu[-1], 3),
                              "manifest_s": round(rates[-1][3], 3), "rss_mb": rss_mb(),
                              "elapsed_s": round(time.perf_counter() - started, 1)}),
                  flush=True)
        if done == CHECKPOINT < n:
            checkpoints.append(checkpoint(mem, corpus, embedder, manifests, done, args.reps,
                                          profile))
            print(json.dumps(checkpoints[-1]), flush=True)
    ingest_s = time.perf_counter() - started
    tenth = max(1, len(rates) // 10)

    def rate(part: list[tuple[int, int, float, float]]) -> float:
        return sum(c for c, _, _, _ in part) / sum(s for _, _, s, _ in part)

    first, last = rate(rates[:tenth]), rate(rates[-tenth:])
    counts = [c for c, *_ in rates]
    first_cpu = sum(counts[:tenth]) / sum(cpu[:tenth])
    last_cpu = sum(counts[-tenth:]) / sum(cpu[-tenth:])
    q_texts, q_vectors = corpus.queries(args.queries)
    embedder.table = dict(zip(q_texts, q_vectors, strict=True))
    mapped_import = {"rss_mb": rss_mb(), **memory_by_mapping(), "usearch_mb": usearch_mb(mem)}
    t0 = time.perf_counter()
    mem.recall(q_texts[0], namespace=NAMESPACE, k=5, min_score=0)
    first_recall = time.perf_counter() - t0
    print(json.dumps({"first_recall_s": round(first_recall, 3),
                      "rss_after_import": mapped_import}), flush=True)
    checkpoints.append(checkpoint(mem, corpus, embedder, manifests, n, args.reps, profile))
    print(json.dumps(checkpoints[-1]), flush=True)
    samples = []
    for text in q_texts[1:]:
        mem._embedding.query_cache.clear()
        t0 = time.perf_counter()
        mem.recall(text, namespace=NAMESPACE, k=5, min_score=0)
        samples.append(time.perf_counter() - t0)
    rss_after = rss_mb()
    mapped_after = {**memory_by_mapping(), "usearch_mb": usearch_mb(mem)}
    t0 = time.perf_counter()
    mem.close()
    close_s = time.perf_counter() - t0
    np.savez(workdir / "queries.npz", texts=np.asarray(q_texts), vectors=q_vectors)
    reopen = subprocess.run([sys.executable, __file__, "--reopen-child", str(data_dir),
                             str(workdir / "queries.npz")],
                            capture_output=True, text=True, check=False, timeout=3600)
    if reopen.returncode != 0:
        raise RuntimeError(f"reopen child failed: {reopen.stderr[-3000:]}")
    return {
        "benchmark": "scale", "memories": n, "batch": batch,
        "ingest_s": round(ingest_s, 1),
        "ingest_first_10pct_per_s": round(first, 1),
        "ingest_last_10pct_per_s": round(last, 1),
        "ingest_ratio_last_vs_first": round(last / first, 3),
        "ingest_cpu_first_10pct_per_s": round(first_cpu, 1),
        "ingest_cpu_last_10pct_per_s": round(last_cpu, 1),
        "ingest_cpu_ratio_last_vs_first": round(last_cpu / first_cpu, 3),
        "manifest_s_first_10pct": round(sum(m for *_, m in rates[:tenth]), 2),
        "manifest_s_last_10pct": round(sum(m for *_, m in rates[-tenth:]), 2),
        "batch_s": [round(s, 2) for _, _, s, _ in rates],
        "batch_cpu_s": [round(s, 2) for s in cpu],
        "checkpoints": checkpoints,
        "first_recall_s": round(first_recall, 3),
        "recall": percentiles(samples),
        "rss_mb_after_queries": rss_after,
        "rss_by_mapping": mapped_after,
        "rss_after_import": mapped_import,
        "close_s": round(close_s, 2),
        "reopen": json.loads(reopen.stdout.strip().splitlines()[-1]),
        "disk_mb": disk_mb(data_dir),
        "load_avg": os.getloadavg(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }


def reopen_child(data_dir: str, queries: str) -> int:
    saved = np.load(queries)
    texts = [str(t) for t in saved["texts"]]
    embedder = LookupEmbedder()
    embedder.table = dict(zip(texts, saved["vectors"], strict=True))
    settings = Settings(config_file=None, data_dir=Path(data_dir), use_keyring=False,
                        publisher_url=None, aggregator_urls=[])
    t0 = time.perf_counter()
    mem = Memory(settings, embedder=embedder, master_key=MASTER)
    mem.recall(texts[0], namespace=NAMESPACE, k=5, min_score=0)
    first = time.perf_counter() - t0
    samples = []
    for text in texts[1:]:
        mem._embedding.query_cache.clear()
        t1 = time.perf_counter()
        mem.recall(text, namespace=NAMESPACE, k=5, min_score=0)
        samples.append(time.perf_counter() - t1)
    rss = rss_mb()
    mapped = {**memory_by_mapping(), "usearch_mb": usearch_mb(mem)}
    mem.close()
    print(json.dumps({"open_to_first_answer_s": round(first, 3),
                      "recall": percentiles(samples), "rss_mb_after_queries": rss,
                      "rss_by_mapping": mapped}))
    return 0


def ab_manifest(data_dir: str, rounds: int = 3) -> int:
    """The manifest step's computation on a kept data dir, alternated: the full list as
    before issue 28 (every published row read, with its sealed bytes as the old query
    did, every page hashed) against the incremental one (cached segments + changes).
    Stores nothing (JSON on stdout)."""
    settings = Settings(config_file=None, data_dir=Path(data_dir), use_keyring=False,
                        publisher_url=None, aggregator_urls=[])
    mem = Memory(settings, embedder=LookupEmbedder(), master_key=MASTER)
    log = mem._log
    keys = log.host.keys_for(NAMESPACE)
    clock = log._clock()
    full, incremental, read = [], [], 0
    try:
        for _ in range(rounds):
            c0 = time.process_time()
            with mem._catalog.snapshot() as c:
                c.execute("SELECT id, sealed FROM memories WHERE namespace = ? AND digest IS "
                          "NULL AND sealed IS NOT NULL", (NAMESPACE,)).fetchall()
                c.execute("SELECT sealed FROM memories WHERE namespace = ? AND status = "
                          "'published' ORDER BY key", (NAMESPACE,)).fetchall()
                _, chunks, _ = log._full(NAMESPACE, clock)
            full.append(time.process_time() - c0)
            c0 = time.process_time()
            _, inc, _ = log._chunks(NAMESPACE, keys, clock)
            incremental.append(time.process_time() - c0)
            assert [(c.digest, c.count) for c in inc] == [(c.digest, c.count) for c in chunks]
            read = sum(c.count for c in inc if c.entries is not None)
    finally:
        mem.close()
    print(json.dumps({"entries": sum(c.count for c in chunks),
                      "full_cpu_s": [round(x, 3) for x in full],
                      "incremental_cpu_s": [round(x, 4) for x in incremental],
                      "incremental_entries_read": read}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories (1000000: full size)")
    parser.add_argument("--batch", type=int, default=10_000, help="remember_many batch size")
    parser.add_argument("--queries", type=int, default=1200)
    parser.add_argument("--reps", type=int, default=3, help="remember / remember_many(200) reps")
    parser.add_argument("--profile", default=None, help="directory for cProfile dumps")
    parser.add_argument("--workdir", default=None, help="keep the data dir here")
    parser.add_argument("--reopen-child", nargs=2, metavar=("DATA_DIR", "QUERIES"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--ab-manifest", metavar="DATA_DIR",
                        help="time the old and the incremental manifest computation on a "
                             "kept data dir (<workdir>/data) and exit")
    args = parser.parse_args(argv)
    if args.reopen_child:
        return reopen_child(*args.reopen_child)
    if args.ab_manifest:
        return ab_manifest(args.ab_manifest)
    if args.workdir:
        workdir = Path(args.workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        out = run(args, workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="walrus-mem-scale-") as tmp:
            out = run(args, Path(tmp))
    print(json.dumps({k: v for k, v in out.items() if k != "batch_s"}, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"scale-{args.n}.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
