"""Recall latency at scale: Memory.recall vs raw USearch search, measured in the same run.

Usage::

    python bench/recall.py                      # 10k and 100k memories
    python bench/recall.py --sizes 10000 --queries 300

Per size, one namespace is filled through a bulk-load path (this file only:
catalog rows + FTS rows + float16 vectors written in large transactions, no
sealing or publishing, which bench/ingest.py measures) with pre-computed
*clustered* 384-d vectors (like sentence embeddings: topics plus noise) and
synthetic texts drawn from a Zipf vocabulary whose head (stopword-like words)
is cut off. Queries are new points near the clusters with 3-word texts.

Reported (p50 / p95 over all queries, after warm-up):

* ``recall``: ``Memory.recall(query, k=5)`` with the query vector pre-computed
  (the injected embedder looks it up), i.e. everything except the model:
  ANN search + bm25 + row fetch + fusion + filters + records; ``recall_cpu``
  the same recalls' CPU (``time.thread_time``), which preemption on a shared machine
  does not inflate;
* ``usearch_k`` / ``usearch_n``: raw ``Index.search`` of the same query vectors
  for k=5 and for the engine's candidate count (max(4k, 50)), same index, each
  measured a quarter / half of the run away from the recall of its query, as
  a recall meets them (no search of the same vector has just brought its path
  into the CPU caches); ``usearch_n_repeat``: the n search again, right after
  (a repeated search costs a third);
* ``lexical_raw_topk``: the lexical engine's own top n for the query text: its
  words parsed, tokenized and counted (:func:`walrus_mem._recall.lexical.informative`),
  then the postings' top n (every word scoring all its rows); ``_bare`` the top
  n alone, words given; ``lexical_raw_topk_fts5`` FTS5's ``ORDER BY bm25 LIMIT
  n`` of the same words (FTS5 parses the expression itself);
  ``ratio_p50_vs_floor`` is recall p50 / (usearch_n + lexical_raw_topk), the
  issue's floor; ``_warm_floor`` swaps in the repeated search and the bare
  top n (session 7's floor); ``_fts5_floor`` FTS5's top n;
* ``recall_dense_only``: the same vectors behind texts with no searchable word
  (FTS5 skipped);
* ``fts5_only``: the lexical work alone, as the engine asks for it (the lexical
  pass, plus the candidates' full-query bm25 when a common word was pruned),
  and ``one_fts5_pass_share``, the share of queries answered by one pass;
* ``recall_model``: the same recall with the query embedded by the real
  all-MiniLM-L6-v2 (``--no-model`` skips it).

Prints a table and writes ``.bench-results/recall.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from walrus_mem import Memory, Settings  # noqa: E402
from walrus_mem._catalog.catalog import fts_table, vector_to_blob  # noqa: E402
from walrus_mem._recall.lexical import informative, lexical_pass, postings_top, rescore  # noqa: E402
from walrus_mem._recall.ranking import fts_query  # noqa: E402
from walrus_mem._recall.recall import MIN_CANDIDATES  # noqa: E402

RESULTS = ROOT / ".bench-results"
DIM = 384
K = 5
NAMESPACE = "bench"
MASTER = "42" * 32


class LookupEmbedder:
    """Pre-computed vectors by text; unknown texts go to ``fallback`` (the real model)."""

    model_id = "bench-clustered-384"
    dim = DIM

    def __init__(self) -> None:
        self.table: dict[str, np.ndarray] = {}
        self.fallback: Callable[[list[str]], np.ndarray] | None = None

    def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self.table]
        if missing:
            if self.fallback is None:
                raise KeyError(f"no pre-computed vector for {missing[0]!r}")
            for text, vec in zip(missing, self.fallback(missing), strict=True):
                self.table[text] = np.asarray(vec, dtype=np.float32)
        if len(texts) == 1:  # a query: its vector as given (walrus_mem copies, never writes)
            return self.table[texts[0]][None, :]
        return np.stack([self.table[t] for t in texts])


VOCAB = 20_000
HEAD = 100  # the most frequent ranks play the part of stopwords: dropped


def zipf_ranks(rng: np.random.Generator, size: int) -> np.ndarray:
    """Word ranks from a Zipf(1.1) law over the vocabulary, stopword head removed."""
    out: list[int] = []
    while len(out) < size:
        ranks = rng.zipf(1.1, size=2 * size)
        out.extend(ranks[(ranks > HEAD) & (ranks < VOCAB)].tolist())
    return np.asarray(out[:size])


COMMON_SHARE = 0.6  # "prefers": in 60 % of the memories ("user": in all of them)


def make_centres(n: int, rng: np.random.Generator) -> np.ndarray:
    """The cluster centres: the first draw of ``make_corpus`` (so a kept data dir's are known)."""
    return rng.standard_normal((max(50, n // 200), DIM)).astype(np.float32)


def make_corpus(n: int, rng: np.random.Generator, *, common: bool = True
                ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Texts, clustered unit vectors, and the cluster centres.

    With ``common`` every text starts like an extracted fact ("User ...") and
    60 % say "prefers": two words in more than half of the memories.
    """
    centres = make_centres(n, rng)
    n_clusters = len(centres)
    labels = rng.integers(0, n_clusters, n)
    vectors = centres[labels] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ranks = zipf_ranks(rng, n * 8).reshape(n, 8)
    words = [" ".join(f"w{r:05d}" for r in row) for row in ranks]
    if not common:
        return [f"note {i}: {w}" for i, w in enumerate(words)], vectors, centres
    prefers = rng.random(n) < COMMON_SHARE
    texts = [f"User {'prefers' if p else 'noted'} {w} (note {i})"
             for i, (w, p) in enumerate(zip(words, prefers, strict=True))]
    return texts, vectors, centres


def query_texts(rng: np.random.Generator, queries: int, *, common: bool = True) -> list[str]:
    """3 Zipf words per query; with ``common`` every other query also asks about the user."""
    ranks = zipf_ranks(rng, queries * 3).reshape(queries, 3)
    out = []
    for i, row in enumerate(ranks):
        words = " ".join(f"w{r:05d}" for r in row)
        if common and i % 2 == 0:
            out.append(f"what does the user prefer about {words} ({i})")
        else:
            out.append(f"query {i} {words}")
    return out


def bulk_load(mem: Memory, texts: list[str], vectors: np.ndarray, *, namespace: str = NAMESPACE,
              model_id: str = LookupEmbedder.model_id) -> None:
    """Benchmark-only fast path: catalog + FTS rows in big transactions (no sealing)."""
    keys = mem.keys_for(namespace)
    cat = mem._catalog
    now = time.time()
    with cat.write() as c:
        c.execute("UPDATE namespaces SET model_id = ?, dim = ? WHERE name = ?",
                  (model_id, DIM, namespace))
    for start in range(0, len(texts), 20_000):
        rows = []
        for i in range(start, min(start + 20_000, len(texts))):
            rows.append((uuid.uuid4().hex, namespace, texts[i], "{}", None, 0.5, now - i,
                         now - i, None, 1, keys.dedupe_hash(texts[i]), "published",
                         "bench-blob", None, 5, vector_to_blob(vectors[i])))
        with cat.write() as c:
            c.executemany(
                "INSERT INTO memories (id, namespace, text, metadata, category, importance, "
                "created_at, updated_at, expires_at, version, dedupe_hash, status, blob_id, "
                "quilt_patch_id, end_epoch, vector) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            table = fts_table(namespace)
            c.execute(
                f"INSERT INTO {table} (rowid, text) SELECT key, text FROM memories "
                f"WHERE namespace = ? AND key > coalesce((SELECT max(rowid) FROM {table}), 0)",
                (namespace,),
            )
            c.execute("INSERT INTO changes (namespace, key) SELECT ?, max(key) FROM memories",
                      (namespace,))
    cat.scrub()  # merge the FTS5 segments as a long-lived catalog would have them
    cat.rebuild_postings(namespace)  # the rows above went into FTS5 only


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "p50_ms": round(statistics.median(ms), 4),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 4),
        "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 4),
        "mean_ms": round(statistics.fmean(ms), 4),
    }


def run_size(n: int, queries: int, model: Any, workdir: Path, *, common: bool = True,
             busy_neighbour: bool = True) -> dict[str, Any]:
    embedder = LookupEmbedder()
    settings = Settings(config_file=None, data_dir=workdir / f"n{n}", use_keyring=False,
                        publisher_url=None, aggregator_urls=[])  # embedded relayer only
    built = workdir / f"n{n}.built.json"  # a kept data dir (--data-dir) from an earlier run
    reused = built.exists()
    mem = Memory(settings, embedder=embedder, master_key=MASTER)
    if reused:
        centres = make_centres(n, np.random.default_rng(n))
        load_s, build_s = (json.loads(built.read_text())[k] for k in ("bulk_load_s", "build_s"))
    else:
        texts, vectors, centres = make_corpus(n, np.random.default_rng(n), common=common)
        started = time.perf_counter()
        bulk_load(mem, texts, vectors)
        load_s = time.perf_counter() - started
        del texts, vectors
    started = time.perf_counter()
    idx = mem._indexes.get(NAMESPACE, embedder.model_id, DIM)  # builds the USearch index
    # The build runs in the background (index_builder.py) while recall scans the pending
    # memories exactly: measured before it is done, recall timed that scan, not the index.
    mem._indexes.wait_built(NAMESPACE)
    if not reused:
        build_s = time.perf_counter() - started
        mem._indexes.save_all()
        built.write_text(json.dumps({"bulk_load_s": load_s, "build_s": build_s}))
    assert len(idx) == n

    qrng = np.random.default_rng(n + 1)
    q_vectors = centres[qrng.integers(0, len(centres), queries)] + 0.6 * qrng.standard_normal(
        (queries, DIM)).astype(np.float32)
    q_vectors /= np.linalg.norm(q_vectors, axis=1, keepdims=True)
    q_texts = query_texts(qrng, queries, common=common)
    for text, vec in zip(q_texts, q_vectors, strict=True):
        embedder.table[text] = vec

    n_candidates = max(4 * K, MIN_CANDIDATES)
    for text in q_texts[:20]:  # warm-up (caches, page faults)
        mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
        idx.index.search(embedder.table[text], n_candidates)
    # Per step, recall and the floor's parts (raw USearch k / n, the lexical engine's raw
    # top-k) back to back, in rotating order: on a shared machine the load drifts within
    # seconds, and interleaving puts the measurements under the same load. The floor's
    # parts are those of the query recalled half a run away (a quarter for k): a search
    # right after another search of the same vector walks a path that search just brought
    # into the CPU caches, which a recall of a new query never finds (0.08 vs 0.3 ms).
    lexicon = [informative(mem._catalog, NAMESPACE, text, n) for text in q_texts]
    raw_k, raw_n, raw_n_repeat, recall_t, raw_lexical_t, raw_bare_t, raw_fts5_t = (
        [], [], [], [], [], [], [])
    hits = 0
    recall_cpu: list[float] = []
    half, quarter = len(q_texts) // 2, len(q_texts) // 4

    def run_recall(i: int) -> None:
        nonlocal hits
        mem._embedding.query_cache.clear()
        c0, t0 = time.thread_time(), time.perf_counter()
        result = mem.recall(q_texts[i], namespace=NAMESPACE, k=K, min_score=0)
        recall_t.append(time.perf_counter() - t0)
        recall_cpu.append(time.thread_time() - c0)
        hits += len(result)

    def run_usearch(i: int) -> None:
        j = (i + half) % len(q_texts)
        t0 = time.perf_counter()
        idx.index.search(q_vectors[j], n_candidates)
        raw_n.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        idx.index.search(q_vectors[j], n_candidates)
        raw_n_repeat.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        idx.index.search(q_vectors[(i + quarter) % len(q_texts)], K)
        raw_k.append(time.perf_counter() - t0)

    def top_n(match: str | None, counts: dict[str, int], from_postings: bool) -> None:
        if match:
            if from_postings:
                postings_top(mem._catalog, NAMESPACE, counts, n_candidates)
            else:
                mem._catalog.fts_search(NAMESPACE, match, n_candidates)

    def run_lexical(i: int) -> None:
        # the lexical engine's raw top-n for the query text (the postings, the engine
        # recall uses: parse, tokenize, count, score), and the same with the words given
        t0 = time.perf_counter()
        top_n(*informative(mem._catalog, NAMESPACE, q_texts[(i + half) % len(q_texts)], n))
        raw_lexical_t.append(time.perf_counter() - t0)
        given = lexicon[(i + quarter) % len(q_texts)]
        t0 = time.perf_counter()
        top_n(*given)
        raw_bare_t.append(time.perf_counter() - t0)

    steps = [run_recall, run_usearch, run_lexical]
    for i in range(len(q_texts)):
        for step in steps[i % 3:] + steps[: i % 3]:
            step(i)
    # FTS5's own top n of the same words, for the comparison of the engines: in a pass of
    # its own, since its pages (several ms a query at 1M) would evict the recalls' ones.
    for match, _, _ in lexicon:
        t0 = time.perf_counter()
        if match:
            mem._catalog.fts_search(NAMESPACE, match, n_candidates)
        raw_fts5_t.append(time.perf_counter() - t0)
    # The lexical half alone (what the engine asks for, nothing else), to show
    # how the hybrid figure splits: recall ~ ANN search + FTS5 + the rest.
    lexical_t, one_pass, with_common = [], 0, 0
    for text in q_texts:
        raw = fts_query(text)
        counts = mem._catalog.fts_doc_counts(NAMESPACE, raw.split(" OR ")) if raw else {}
        with_common += any(2 * c > n for c in counts.values())
    for match, counts, from_postings in lexicon:
        t0 = time.perf_counter()
        lex = lexical_pass(mem._catalog, NAMESPACE, match, n_candidates, counts, from_postings)
        if not lex.complete and match:
            # the second pass the engine runs for these: full-query bm25 of the candidates
            rescore(mem._catalog, NAMESPACE, match, lex, counts, lex.top)
        lexical_t.append(time.perf_counter() - t0)
        one_pass += lex.complete
    # The same vectors behind texts with no usable FTS term (stopwords only): the
    # engine skips FTS5, which isolates the cost of the lexical half.
    dense_only = []
    for i, vec in enumerate(q_vectors):
        text = "what was it about" + " the" * (i % 50)
        embedder.table[text] = vec
        mem._embedding.query_cache.clear()
        t0 = time.perf_counter()
        mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
        dense_only.append(time.perf_counter() - t0)
    out: dict[str, Any] = {
        "memories": n,
        "queries": queries,
        "reused_data_dir": reused,
        "bulk_load_s": round(load_s, 2),
        "index_build_s": round(build_s, 2),
        "avg_hits": hits / queries,
        "recall": percentiles(recall_t),
        # CPU of the recalling thread: what the recall costs when the machine's other jobs
        # preempt it (wall p99 on a shared 2-core machine is mostly waiting for a core)
        "recall_cpu": percentiles(recall_cpu),
        "recall_dense_only": percentiles(dense_only),
        "fts5_only": percentiles(lexical_t),
        "lexical_raw_topk": percentiles(raw_lexical_t),
        "lexical_raw_topk_bare": percentiles(raw_bare_t),
        "lexical_raw_topk_fts5": percentiles(raw_fts5_t),
        "common_word_query_share": round(with_common / queries, 3),
        "one_fts5_pass_share": round(one_pass / queries, 3),
        "usearch_k": percentiles(raw_k),
        "usearch_n": percentiles(raw_n),
        "usearch_n_repeat": percentiles(raw_n_repeat),
        "candidates": n_candidates,
    }
    out["ratio_p50_vs_usearch_k"] = round(out["recall"]["p50_ms"] / out["usearch_k"]["p50_ms"], 2)
    out["ratio_p50_vs_usearch_n"] = round(out["recall"]["p50_ms"] / out["usearch_n"]["p50_ms"], 2)
    floor = out["usearch_n"]["p50_ms"] + out["lexical_raw_topk"]["p50_ms"]
    out["ratio_p50_vs_floor"] = round(out["recall"]["p50_ms"] / floor, 2)
    warm_floor = out["usearch_n_repeat"]["p50_ms"] + out["lexical_raw_topk_bare"]["p50_ms"]
    out["ratio_p50_vs_warm_floor"] = round(out["recall"]["p50_ms"] / warm_floor, 2)
    fts5_floor = out["usearch_n"]["p50_ms"] + out["lexical_raw_topk_fts5"]["p50_ms"]
    out["ratio_p50_vs_fts5_floor"] = round(out["recall"]["p50_ms"] / fts5_floor, 2)
    if model is not None:
        embedder.fallback = model.embed
        model_q = [f"what did I note about topic {i} and w{100 + i:05d}" for i in range(100)]
        mem.recall("warm up the model path", namespace=NAMESPACE, k=K, min_score=0)
        # A neighbour keeps one of the cores busy, as on a shared machine (the issue's
        # setting for the thread policy); --no-neighbour measures without it.
        neighbour = None if not busy_neighbour else subprocess.Popen(
            [sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.2)
            samples = []
            for text in model_q:
                t0 = time.perf_counter()
                mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
                samples.append(time.perf_counter() - t0)
        finally:
            if neighbour is not None:
                neighbour.kill()
                neighbour.wait()
        out["recall_model"] = percentiles(samples)
        out["recall_model_neighbour"] = busy_neighbour
        out["model_backend"] = getattr(model, "backend", "?")
    started = time.perf_counter()
    mem.close()  # saves the index and its rows
    out["close_s"] = round(time.perf_counter() - started, 2)
    out["disk_mb"] = disk_usage(settings.data_dir)
    np.savez(workdir / f"queries-{n}.npz", texts=np.asarray(q_texts), vectors=q_vectors)
    out["reopen"] = reopen_in_fresh_process(settings.data_dir, workdir / f"queries-{n}.npz")
    return out


def disk_usage(data_dir: Path) -> dict[str, float]:
    """MB on disk: the catalog (rows, FTS5, vectors) and the index directory."""
    def size(paths: Any) -> float:
        return round(float(sum(p.stat().st_size for p in paths if p.is_file())) / 2**20, 1)
    return {"catalog": size(data_dir.glob("catalog.sqlite3*")),
            "index": size((data_dir / "index").glob("*"))}


def reopen_in_fresh_process(data_dir: Path, queries: Path) -> dict[str, Any]:
    """Reopen the data dir in a new process: open + first recall, RSS, then the mix again."""
    out = subprocess.run([sys.executable, __file__, "--reopen-child", str(data_dir), str(queries)],
                         capture_output=True, text=True, check=False, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"reopen child failed: {out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def reopen_child(data_dir: str, queries: str) -> int:
    """The fresh process: time Memory() + the index open, then recalls (JSON on stdout)."""
    saved = np.load(queries)
    texts = [str(t) for t in saved["texts"]]
    embedder = LookupEmbedder()
    embedder.table = dict(zip(texts, saved["vectors"], strict=True))
    rss_start = _rss_mb()
    settings = Settings(config_file=None, data_dir=Path(data_dir), use_keyring=False,
                        publisher_url=None, aggregator_urls=[])
    t0 = time.perf_counter()
    mem = Memory(settings, embedder=embedder, master_key=MASTER)
    mem._indexes.get(NAMESPACE, embedder.model_id, DIM)
    open_s = time.perf_counter() - t0
    rss_open = _rss_mb()
    t1 = time.perf_counter()
    mem.recall(texts[0], namespace=NAMESPACE, k=K, min_score=0)
    first_s = time.perf_counter() - t1
    samples = []
    for text in texts[1:]:
        t2 = time.perf_counter()
        mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
        samples.append(time.perf_counter() - t2)
    rss_after = _rss_mb()
    # again, now that the pages the mix touches are in
    again, again_cpu = [], []
    for text in texts[1:]:
        mem._embedding.query_cache.clear()
        c2, t2 = time.thread_time(), time.perf_counter()
        mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
        again.append(time.perf_counter() - t2)
        again_cpu.append(time.thread_time() - c2)
    mem.close()
    print(json.dumps({
        "open_s": round(open_s, 3), "first_recall_s": round(first_s, 4),
        "reopen_to_first_answer_s": round(open_s + first_s, 3),
        "rss_mb_before_open": rss_start, "rss_mb_after_open": rss_open,
        "rss_mb_after_queries": rss_after,
        "recall_cold_pages": percentiles(samples), "recall": percentiles(again),
        "recall_cpu": percentiles(again_cpu),
    }))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--no-model", action="store_true", help="skip the real-model query runs")
    parser.add_argument("--backend", default="auto", choices=["auto", "numpy", "onnx", "torch"],
                        help="the real model's runtime (embedding_backend; auto is timed "
                             "after its switch to onnxruntime, when installed)")
    parser.add_argument("--threads", type=int, default=1, help="embedding_threads (0: defaults)")
    parser.add_argument("--no-common", action="store_true",
                        help="the old corpus: no word in more than half of the memories")
    parser.add_argument("--no-neighbour", action="store_true",
                        help="time the real-model recalls without a busy neighbour process")
    parser.add_argument("--data-dir", default=None,
                        help="keep the data dirs here and reuse them in later runs (the 1M "
                             "build takes many minutes); built with the default corpus")
    parser.add_argument("--reopen-child", nargs=2, metavar=("DATA_DIR", "QUERIES"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reopen_child:
        return reopen_child(*args.reopen_child)
    model = None
    if not args.no_model:
        from walrus_mem._recall.embeddings import SentenceTransformerEmbedder

        model = SentenceTransformerEmbedder(backend=args.backend, threads=args.threads)
        model.embed(["warm up"])
        model.warm(timeout=600)  # auto: the runtime a long-lived process ends up on
    results = []
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="walrus-mem-bench-") as tmp:
        workdir = Path(args.data_dir) if args.data_dir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for n in args.sizes:
            print(f"… {n:,} memories", file=sys.stderr, flush=True)
            results.append(run_size(n, args.queries, model, workdir, common=not args.no_common,
                                    busy_neighbour=not args.no_neighbour))
            loads.append(os.getloadavg()[0])
    print(f"load average (1 min) {min(loads):.2f}-{max(loads):.2f}; "
          f"{args.queries} queries per size")
    header = (f"{'memories':>9} {'recall p50':>11} {'p99':>8} {'common-word q':>13} "
              f"{'dense-only':>10} {'lexical':>8} {'lex top-k':>9} {'fts5 top-k':>10} "
              f"{'usearch n':>9} {'repeat':>7} {'÷floor':>6} {'÷warm':>6} {'÷fts5 fl':>8} "
              f"{'+model p50':>11} "
              f"{'build s':>8} {'reopen s':>8} "
              f"{'RSS open':>8} {'reopened p50/p99':>16}")
    print(header)
    for r in results:
        model_p50 = f"{r['recall_model']['p50_ms']:.2f}" if "recall_model" in r else "-"
        print(f"{r['memories']:>9,} {r['recall']['p50_ms']:>9.3f}ms {r['recall']['p99_ms']:>6.3f}ms"
              f" {r['common_word_query_share']:>13.0%}"
              f" {r['recall_dense_only']['p50_ms']:>8.3f}ms"
              f" {r['fts5_only']['p50_ms']:>6.3f}ms {r['lexical_raw_topk']['p50_ms']:>7.3f}ms"
              f" {r['lexical_raw_topk_fts5']['p50_ms']:>8.3f}ms"
              f" {r['usearch_n']['p50_ms']:>7.3f}ms {r['usearch_n_repeat']['p50_ms']:>5.3f}ms"
              f" {r['ratio_p50_vs_floor']:>6.2f} {r['ratio_p50_vs_warm_floor']:>6.2f}"
              f" {r['ratio_p50_vs_fts5_floor']:>8.2f}"
              f" {model_p50:>9}ms {r['index_build_s']:>8.1f}"
              f" {r['reopen']['reopen_to_first_answer_s']:>8.2f}"
              f" {r['reopen']['rss_mb_after_open']:>6.0f}MB"
              f" {r['reopen']['recall']['p50_ms']:>7.2f}/{r['reopen']['recall']['p99_ms']:.2f}ms")
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": "recall",
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "load_avg_1min": loads},
        "k": K,
        "results": results,
    }
    (RESULTS / "recall.json").write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
