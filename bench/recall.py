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
  ANN search + FTS5 bm25 + row fetch + fusion + filters + records;
* ``usearch_k`` / ``usearch_n``: raw ``Index.search`` of the same vectors for
  k=5 and for the engine's candidate count (max(4k, 50)), same index;
* ``recall_dense_only``: the same vectors behind texts with no searchable word
  (FTS5 skipped);
* ``fts5_only``: the SQLite work alone, as the engine asks for it (the lexical
  pass, plus the candidates' full-query bm25 when a common word was pruned),
  and ``one_fts5_pass_share``, the share of queries answered by one pass;
* ``recall_model``: the same recall with the query embedded by the real
  all-MiniLM-L6-v2 (``--no-model`` skips it).

Prints a table and writes ``.bench-results/recall.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
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
from walrus_mem.catalog import fts_table, vector_to_blob  # noqa: E402
from walrus_mem.ranking import fts_query  # noqa: E402
from walrus_mem.recall import MIN_CANDIDATES, _lexical_pass  # noqa: E402

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


def make_corpus(n: int, rng: np.random.Generator) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Texts, clustered unit vectors, and the cluster centres."""
    n_clusters = max(50, n // 200)
    centres = rng.standard_normal((n_clusters, DIM)).astype(np.float32)
    labels = rng.integers(0, n_clusters, n)
    vectors = centres[labels] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ranks = zipf_ranks(rng, n * 8).reshape(n, 8)
    texts = [f"note {i}: " + " ".join(f"w{r:05d}" for r in row) for i, row in enumerate(ranks)]
    return texts, vectors, centres


def bulk_load(mem: Memory, texts: list[str], vectors: np.ndarray) -> None:
    """Benchmark-only fast path: catalog + FTS rows in big transactions (no sealing)."""
    keys = mem.keys_for(NAMESPACE)
    cat = mem._catalog
    now = time.time()
    with cat.write() as c:
        c.execute("UPDATE namespaces SET model_id = ?, dim = ? WHERE name = ?",
                  (LookupEmbedder.model_id, DIM, NAMESPACE))
    for start in range(0, len(texts), 20_000):
        rows = []
        for i in range(start, min(start + 20_000, len(texts))):
            rows.append((uuid.uuid4().hex, NAMESPACE, texts[i], "{}", None, 0.5, now - i,
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
            table = fts_table(NAMESPACE)
            c.execute(
                f"INSERT INTO {table} (rowid, text) SELECT key, text FROM memories "
                f"WHERE namespace = ? AND key > coalesce((SELECT max(rowid) FROM {table}), 0)",
                (NAMESPACE,),
            )
            c.execute("INSERT INTO changes (namespace, key) SELECT ?, max(key) FROM memories",
                      (NAMESPACE,))
    cat.scrub()  # merge the FTS5 segments as a long-lived catalog would have them


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "p50_ms": round(statistics.median(ms), 4),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 4),
        "mean_ms": round(statistics.fmean(ms), 4),
    }


def run_size(n: int, queries: int, model: Any, workdir: Path) -> dict[str, Any]:
    rng = np.random.default_rng(n)
    texts, vectors, centres = make_corpus(n, rng)
    embedder = LookupEmbedder()
    settings = Settings(config_file=None, data_dir=workdir / f"n{n}", use_keyring=False,
                        publisher_url=None, aggregator_urls=[])  # embedded relayer only
    mem = Memory(settings, embedder=embedder, master_key=MASTER)
    started = time.perf_counter()
    bulk_load(mem, texts, vectors)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    idx = mem._indexes.get(NAMESPACE, embedder.model_id, DIM)  # builds the USearch index
    build_s = time.perf_counter() - started
    assert len(idx) == n

    qrng = np.random.default_rng(n + 1)
    q_vectors = centres[qrng.integers(0, len(centres), queries)] + 0.6 * qrng.standard_normal(
        (queries, DIM)).astype(np.float32)
    q_vectors /= np.linalg.norm(q_vectors, axis=1, keepdims=True)
    vocab_ranks = zipf_ranks(qrng, queries * 3).reshape(queries, 3)
    q_texts = [f"query {i} " + " ".join(f"w{r:05d}" for r in row)
               for i, row in enumerate(vocab_ranks)]
    for text, vec in zip(q_texts, q_vectors, strict=True):
        embedder.table[text] = vec

    n_candidates = max(4 * K, MIN_CANDIDATES)
    for text in q_texts[:20]:  # warm-up (caches, page faults)
        mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
        idx.index.search(embedder.table[text], n_candidates)
    # Three separate passes over the same queries, so none rides on another's warm caches.
    raw_k, raw_n, recall_t, hits = [], [], [], 0
    for vec in q_vectors:
        t0 = time.perf_counter()
        idx.index.search(vec, K)
        raw_k.append(time.perf_counter() - t0)
    for vec in q_vectors:
        t0 = time.perf_counter()
        idx.index.search(vec, n_candidates)
        raw_n.append(time.perf_counter() - t0)
    for text in q_texts:
        t0 = time.perf_counter()
        result = mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
        recall_t.append(time.perf_counter() - t0)
        hits += len(result)
    # The FTS5 half alone (what the engine asks SQLite for, nothing else), to show
    # how the hybrid figure splits: recall ~ ANN search + FTS5 + the rest.
    lexical_t, one_pass = [], 0
    for text in q_texts:
        match = fts_query(text)
        t0 = time.perf_counter()
        lex = _lexical_pass(mem._catalog, NAMESPACE, match, n_candidates)
        if not lex.complete:
            # the second pass the engine runs for these: full-query bm25 of the candidates
            mem._catalog.fts_scores(NAMESPACE, match or "", lex.top)
        lexical_t.append(time.perf_counter() - t0)
        one_pass += lex.complete
    # The same vectors behind texts with no usable FTS term (stopwords only): the
    # engine skips FTS5, which isolates the cost of the lexical half.
    dense_only = []
    for i, vec in enumerate(q_vectors):
        text = "what was it about" + " the" * (i % 50)
        embedder.table[text] = vec
        mem._query_cache.clear()
        t0 = time.perf_counter()
        mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
        dense_only.append(time.perf_counter() - t0)
    out: dict[str, Any] = {
        "memories": n,
        "queries": queries,
        "bulk_load_s": round(load_s, 2),
        "index_build_s": round(build_s, 2),
        "avg_hits": hits / queries,
        "recall": percentiles(recall_t),
        "recall_dense_only": percentiles(dense_only),
        "fts5_only": percentiles(lexical_t),
        "one_fts5_pass_share": round(one_pass / queries, 3),
        "usearch_k": percentiles(raw_k),
        "usearch_n": percentiles(raw_n),
        "candidates": n_candidates,
    }
    out["ratio_p50_vs_usearch_k"] = round(out["recall"]["p50_ms"] / out["usearch_k"]["p50_ms"], 2)
    out["ratio_p50_vs_usearch_n"] = round(out["recall"]["p50_ms"] / out["usearch_n"]["p50_ms"], 2)
    if model is not None:
        embedder.fallback = model.embed
        model_q = [f"what did I note about topic {i} and w{100 + i:05d}" for i in range(100)]
        mem.recall("warm up the model path", namespace=NAMESPACE, k=K, min_score=0)
        samples = []
        for text in model_q:
            t0 = time.perf_counter()
            mem.recall(text, namespace=NAMESPACE, k=K, min_score=0)
            samples.append(time.perf_counter() - t0)
        out["recall_model"] = percentiles(samples)
    mem.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--no-model", action="store_true", help="skip the real-model query runs")
    args = parser.parse_args(argv)
    model = None
    if not args.no_model:
        from walrus_mem.embeddings import SentenceTransformerEmbedder

        model = SentenceTransformerEmbedder()
        model.embed(["warm up"])
    results = []
    with tempfile.TemporaryDirectory(prefix="walrus-mem-bench-") as tmp:
        for n in args.sizes:
            print(f"… {n:,} memories", file=sys.stderr, flush=True)
            results.append(run_size(n, args.queries, model, Path(tmp)))
    header = (f"{'memories':>9} {'recall p50':>11} {'p95':>8} {'dense-only p50':>15} "
              f"{'FTS5 alone':>11} "
              f"{'usearch k=5':>12} {'usearch n=50':>13} {'ratio k/n':>10} {'+model p50':>11} "
              f"{'build s':>8}")
    print(header)
    for r in results:
        model_p50 = f"{r['recall_model']['p50_ms']:.2f}" if "recall_model" in r else "-"
        print(f"{r['memories']:>9,} {r['recall']['p50_ms']:>9.3f}ms {r['recall']['p95_ms']:>6.3f}ms"
              f" {r['recall_dense_only']['p50_ms']:>13.3f}ms"
              f" {r['fts5_only']['p50_ms']:>9.3f}ms"
              f" {r['usearch_k']['p50_ms']:>10.3f}ms {r['usearch_n']['p50_ms']:>11.3f}ms"
              f" {r['ratio_p50_vs_usearch_k']:>4.1f}/{r['ratio_p50_vs_usearch_n']:<4.1f}"
              f" {model_p50:>9}ms {r['index_build_s']:>8.1f}")
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": "recall",
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": __import__("os").cpu_count()},
        "k": K,
        "results": results,
    }
    (RESULTS / "recall.json").write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
