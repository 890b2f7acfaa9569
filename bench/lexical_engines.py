"""Lexical engines side by side: our postings, SQLite FTS5, tantivy and bm25s.

Usage::

    python bench/lexical_engines.py                       # 100k memories, 600 queries
    python bench/lexical_engines.py --docs 2000 --queries 50

Issue 12 allows any well-kept lexical engine and asks to choose by measurement.
This bench measures four on the same corpus and queries, in the same run:

* ``postings``: :func:`walrus_mem._recall.lexical.postings_top` (packed per-term blocks in
  SQLite, FTS5's exact bm25 in numpy), after :func:`walrus_mem._recall.lexical.informative`;
* ``fts5``: ``Catalog.fts_search`` (``ORDER BY bm25 LIMIT 50``) of the same words;
* ``tantivy`` (tantivy-py): an on-disk index, ``en_stem`` analyzer, positions kept
  (as FTS5 keeps them, for phrases), one writer thread; a disjunction of term queries
  (the words run through the same analyzer, never the query parser) searched with
  ``count=False`` so block-max WAND can prune, keys read from a fast field;
* ``bm25s``: scores precomputed at index time (``method="robertson"``: FTS5's idf,
  k1=1.2, b=0.75), PyStemmer's English stemmer, no stopword removal (FTS5 counts
  every token in a row's length), saved with ``BM25.save``.

Corpus and queries are bench/recall.py's common-word mix: ``make_corpus(N, rng(N))``
and the query texts ``run_size`` draws from ``rng(N + 1)`` after the query vectors
(so ``--docs 100000 --queries 600`` are ``bench/recall.py --queries 600``'s queries).
The catalog is filled by bench/recall.py's ``bulk_load`` (FTS5 rows, then the postings).

Reported per engine: index build time and on-disk size; raw top-50 latency
(p50/p95/p99, the engines interleaved per query in rotating order, so drifting
load on a shared machine hits them alike; the words' analysis is done before the
clock starts, as ``informative`` is for the postings); the overlap of each top 10
with FTS5's (mean Jaccard, share of identical sets: the stemmers, length
normalisation and tie order differ); and the cost of adding and deleting one
document durably (one commit each). bm25s has no incremental update: its figure
is a full re-index. Writes ``.bench-results/lexical_engines.json``.

tantivy, bm25s and PyStemmer are not project dependencies: an engine whose
package is missing is skipped with a note naming it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.recall import (  # noqa: E402
    DIM,
    MASTER,
    NAMESPACE,
    LookupEmbedder,
    bulk_load,
    make_corpus,
    percentiles,
    query_texts,
)
from walrus_mem import Memory, Settings  # noqa: E402
from walrus_mem._catalog.catalog import Catalog, fts_table  # noqa: E402
from walrus_mem._catalog.postings import STATS_TABLE, counts_table, postings_table  # noqa: E402
from walrus_mem._recall.lexical import informative, postings_top  # noqa: E402
from walrus_mem._recall.ranking import FTS_TOKENIZE  # noqa: E402

RESULTS = ROOT / ".bench-results"
TOP = 50  # the engine's candidate count (max(4k, MIN_CANDIDATES))
OVERLAP_AT = 10
WARMUP = 20


def optional(module: str, package: str, missing: str = "its engine is skipped"
             ) -> ModuleType | None:
    """The module, or None with a note naming the PyPI package to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        print(f"note: {package} is not installed (pip install {package}): {missing}",
              file=sys.stderr)
        return None


def bench_texts(docs: int, queries: int) -> tuple[list[str], list[str]]:
    """bench/recall.py's corpus and query texts for ``docs`` memories (same rng draws)."""
    texts, _, centres = make_corpus(docs, np.random.default_rng(docs))
    qrng = np.random.default_rng(docs + 1)
    qrng.integers(0, len(centres), queries)  # the query vectors, drawn first in run_size
    qrng.standard_normal((queries, DIM))
    return texts, query_texts(qrng, queries)


def dir_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 2)


def table_mb(cat: Catalog, prefixes: Sequence[str]) -> dict[str, float]:
    """MB of the pages of each table (index, shadow table) whose name starts with a prefix."""
    rows = cat.query("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
    return {str(name): round(int(size) / 2**20, 2) for name, size in rows
            if str(name).startswith(tuple(prefixes))}


class Engine:
    """One lexical engine: its build/disk figures, a top-n search, update costs."""

    name = ""
    build_s = 0.0
    disk_mb = 0.0
    notes = ""

    def prepare(self, words: list[str]) -> Any:
        """What the search needs of the query's informative words (not timed)."""
        return words

    def search(self, prepared: Any) -> list[int]:
        raise NotImplementedError

    def add_delete(self, samples: list[tuple[int, str]]) -> dict[str, Any]:
        raise NotImplementedError


class Postings(Engine):
    name = "postings"

    def __init__(self, cat: Catalog, counts: list[dict[str, int]]) -> None:
        self.cat, self.counts = cat, counts

    def prepare(self, words: list[str]) -> Any:
        return words

    def search(self, prepared: Any) -> list[int]:
        counts: dict[str, int] = prepared
        return postings_top(self.cat, NAMESPACE, counts, TOP) if counts else []

    def add_delete(self, samples: list[tuple[int, str]]) -> dict[str, Any]:
        # what the catalog does per memory: FTS5 row + postings, one write transaction each
        add, delete = [], []
        for key, text in samples:
            t0 = time.perf_counter()
            with self.cat.write():
                self.cat.fts_add(NAMESPACE, key, text)
            add.append(time.perf_counter() - t0)
        for key, text in samples:
            t0 = time.perf_counter()
            with self.cat.write():
                self.cat.fts_remove(NAMESPACE, key, text)
            delete.append(time.perf_counter() - t0)
        return {"add": percentiles(add), "delete": percentiles(delete),
                "what": "FTS5 row + postings, one committed write transaction each"}


class Fts5(Engine):
    name = "fts5"

    def __init__(self, cat: Catalog) -> None:
        self.cat = cat

    def search(self, prepared: Any) -> list[int]:
        match: str | None = prepared
        return [key for key, _ in self.cat.fts_search(NAMESPACE, match, TOP)] if match else []

    def add_delete(self, samples: list[tuple[int, str]]) -> dict[str, Any]:
        table = fts_table(NAMESPACE)
        add, delete = [], []
        for key, text in samples:
            t0 = time.perf_counter()
            with self.cat.write() as c:
                c.execute(f"INSERT INTO {table} (rowid, text) VALUES (?, ?)", (key, text))
            add.append(time.perf_counter() - t0)
        for key, _ in samples:
            t0 = time.perf_counter()
            with self.cat.write() as c:
                c.execute(f"DELETE FROM {table} WHERE rowid = ?", (key,))
            delete.append(time.perf_counter() - t0)
        return {"add": percentiles(add), "delete": percentiles(delete),
                "what": "FTS5 row alone, one committed write transaction each"}


class Tantivy(Engine):
    name = "tantivy"

    def __init__(self, tv: ModuleType, keys: list[int], texts: list[str], path: Path) -> None:
        self.tv = tv
        path.mkdir()
        builder = tv.SchemaBuilder()
        builder.add_integer_field("key", stored=False, indexed=True, fast=True)
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
        self.schema = builder.build()
        # en_stem's chain (tantivy's docs): simple tokenizer, long-token filter, lower case,
        # English stemmer; the query words go through it, never through the query parser
        self.analyzer = (tv.TextAnalyzerBuilder(tv.Tokenizer.simple())
                         .filter(tv.Filter.remove_long(40)).filter(tv.Filter.lowercase())
                         .filter(tv.Filter.stemmer("english")).build())
        t0 = time.perf_counter()
        self.index = tv.Index(self.schema, path=str(path))
        writer = self.index.writer(128_000_000, 1)  # one thread, as SQLite writes
        for key, text in zip(keys, texts, strict=True):
            writer.add_document(tv.Document(key=key, text=text))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.build_s = time.perf_counter() - t0
        self.path = path
        self.disk_mb = dir_mb(path)
        self.searcher = self.index.searcher()
        self.notes = (f"{self.searcher.num_segments} segment(s); en_stem (Snowball English); "
                      "BM25 k1=1.2 b=0.75, idf ln(1+(N-n+.5)/(n+.5)), 1-byte fieldnorms")

    def prepare(self, words: list[str]) -> Any:
        terms: list[str] = []
        for word in words:
            for term in self.analyzer.analyze(word):
                if term not in terms:
                    terms.append(term)
        return terms

    def search(self, prepared: Any) -> list[int]:
        tv, terms = self.tv, prepared
        if not terms:
            return []
        query = tv.Query.boolean_query(
            [(tv.Occur.Should, tv.Query.term_query(self.schema, "text", t)) for t in terms])
        hits = self.searcher.search(query, TOP, count=False).hits
        found: list[int] = self.searcher.fast_field_values("key", [a for _, a in hits])
        return found

    def add_delete(self, samples: list[tuple[int, str]]) -> dict[str, Any]:
        tv = self.tv
        writer = self.index.writer(50_000_000, 1)
        add, delete = [], []
        for key, text in samples:
            t0 = time.perf_counter()
            writer.add_document(tv.Document(key=key, text=text))
            writer.commit()
            add.append(time.perf_counter() - t0)
        for key, _ in samples:
            t0 = time.perf_counter()
            writer.delete_documents_by_term("key", key)
            writer.commit()
            delete.append(time.perf_counter() - t0)
        writer.wait_merging_threads()
        self.index.reload()
        return {"add": percentiles(add), "delete": percentiles(delete),
                "what": "add_document / delete_documents_by_term + commit (fsync'd segment), "
                        "one writer kept open; visible to searchers after reload",
                "disk_mb_after": dir_mb(self.path)}


class Bm25s(Engine):
    name = "bm25s"

    def __init__(self, bm25s: ModuleType, stemmer_mod: ModuleType | None, keys: list[int],
                 texts: list[str], path: Path) -> None:
        self.bm25s = bm25s
        self.stemmer = stemmer_mod.Stemmer("english") if stemmer_mod is not None else None
        self.keys = np.asarray(keys, dtype=np.int64)
        self.texts = texts
        self.path = path
        self.build_s = self.build()
        self.disk_mb = dir_mb(path)
        self.notes = ("robertson (FTS5's idf), k1=1.2 b=0.75, float32 scores; "
                      + ("PyStemmer English" if self.stemmer is not None else "no stemmer")
                      + "; no incremental update")

    def build(self) -> float:
        """Tokenize, index and save the whole corpus: the only way to change it."""
        bm25s = self.bm25s
        t0 = time.perf_counter()
        tokens = bm25s.tokenize(self.texts, stopwords=None, stemmer=self.stemmer,
                                token_pattern=r"(?u)\b\w+\b", show_progress=False)
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="robertson")
        retriever.index(tokens, show_progress=False)
        retriever.save(str(self.path), show_progress=False)
        took = time.perf_counter() - t0
        self.retriever = retriever
        return took

    def prepare(self, words: list[str]) -> Any:
        terms = self.stemmer.stemWords(words) if self.stemmer is not None else words
        vocab = self.retriever.vocab_dict
        return [t for t in dict.fromkeys(terms) if t in vocab]

    def search(self, prepared: Any) -> list[int]:
        if not prepared:
            return []
        k = min(TOP, len(self.keys))
        docs, scores = self.retriever.retrieve([prepared], k=k, show_progress=False,
                                               n_threads=0)
        found: list[int] = self.keys[docs[0][scores[0] > 0]].tolist()
        return found

    def add_delete(self, samples: list[tuple[int, str]]) -> dict[str, Any]:
        rebuild = [self.build() for _ in range(2)]
        return {"add": None, "delete": None, "full_reindex_s": round(min(rebuild), 3),
                "what": "no add/remove API (the scores are precomputed per corpus): an "
                        "update is a full tokenize + index + save; a delete could be "
                        "masked at query time (retrieve's weight_mask) without fixing idf"}


def overlap(ours: list[int], ref: list[int]) -> tuple[float, bool]:
    a, b = set(ours[:OVERLAP_AT]), set(ref[:OVERLAP_AT])
    if not a and not b:
        return 1.0, True
    return len(a & b) / len(a | b), a == b


def tie_equivalent(cat: Catalog, match: str | None, ours: list[int], ref: list[int]
                   ) -> tuple[bool, float]:
    """Whether ``ours``' top 10 has the FTS5 bm25 scores of FTS5's own top 10 (the same
    list up to the order of tied rows), and the share of FTS5's top-10 bm25 it keeps."""
    if not match or not ref:
        return not ours[:OVERLAP_AT], 1.0
    scores = cat.fts_scores(NAMESPACE, match, ours[:OVERLAP_AT])
    mine = sorted(round(-scores.get(k, 0.0), 9) for k in ours[:OVERLAP_AT])
    best = sorted(round(-s, 9) for s in cat.fts_scores(NAMESPACE, match, ref[:OVERLAP_AT])
                  .values())
    return mine == best, sum(mine) / sum(best)


def fts5_standalone(keys: list[int], texts: list[str], path: Path) -> tuple[float, float]:
    """Build time and size of an FTS5 table of the corpus alone (the catalog's is
    filled inside bulk_load with the memories rows, so it is not timed apart there)."""
    conn = sqlite3.connect(path, isolation_level=None)
    t0 = time.perf_counter()
    conn.execute(f"CREATE VIRTUAL TABLE f USING fts5(text, tokenize = '{FTS_TOKENIZE}')")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO f (rowid, text) VALUES (?, ?)", zip(keys, texts, strict=True))
    conn.execute("COMMIT")
    conn.execute("INSERT INTO f (f) VALUES ('optimize')")  # as the catalog's scrub merges
    took = time.perf_counter() - t0
    conn.close()
    size = round(path.stat().st_size / 2**20, 2)
    path.unlink()
    return took, size


def run(docs: int, queries: int, updates: int, workdir: Path,
        modules: dict[str, ModuleType | None]) -> dict[str, Any]:
    texts, q_texts = bench_texts(docs, queries)
    settings = Settings(config_file=None, data_dir=workdir / "data", use_keyring=False,
                        publisher_url=None, aggregator_urls=[])
    mem = Memory(settings, embedder=LookupEmbedder(), master_key=MASTER)
    cat = mem._catalog
    vectors = np.zeros((docs, DIM), dtype=np.float32)  # the catalog's vector column only
    vectors[:, 0] = 1.0
    t0 = time.perf_counter()
    bulk_load(mem, texts, vectors)
    load_s = time.perf_counter() - t0
    del vectors
    t0 = time.perf_counter()
    cat.rebuild_postings(NAMESPACE)
    postings_s = time.perf_counter() - t0
    rows = cat.query("SELECT key, text FROM memories WHERE namespace = ? ORDER BY key",
                     (NAMESPACE,))
    keys, texts = [int(r[0]) for r in rows], [str(r[1]) for r in rows]

    fts_s, fts_mb = fts5_standalone(keys, texts, workdir / "fts5-alone.sqlite3")
    ours_tables = table_mb(cat, [postings_table(NAMESPACE), counts_table(NAMESPACE),
                                 STATS_TABLE])
    fts_tables = table_mb(cat, [fts_table(NAMESPACE)])
    fts_content = sum(mb for name, mb in fts_tables.items() if name.endswith("_content"))
    postings = Postings(cat, [])
    postings.build_s, postings.disk_mb = postings_s, round(sum(ours_tables.values()), 2)
    postings.notes = ("catalog pages (dbstat) of the postings tables, on top of FTS5 "
                      "(built from its index, fts5vocab; phrases still go to FTS5); "
                      "FTS5's porter unicode61 tokens and bm25 to the float")
    fts5 = Fts5(cat)
    # the catalog's FTS5 pages without its copy of the texts (memories.text holds them)
    fts5.build_s = fts_s
    fts5.disk_mb = round(sum(fts_tables.values()) - fts_content, 2)
    fts5.notes = (f"build: a standalone table of the corpus + optimize ({fts_mb} MB file); "
                  f"disk: the catalog's FTS5 pages less its {fts_content:.2f} MB copy of "
                  "the texts; porter unicode61 remove_diacritics 2")
    engines: list[Engine] = [postings, fts5]
    if modules["tantivy"] is not None:
        engines.append(Tantivy(modules["tantivy"], keys, texts, workdir / "tantivy"))
    if modules["bm25s"] is not None:
        engines.append(Bm25s(modules["bm25s"], modules["Stemmer"], keys, texts,
                             workdir / "bm25s"))

    lexicon = [informative(cat, NAMESPACE, text, docs) for text in q_texts]
    prepared: dict[str, list[Any]] = {e.name: [] for e in engines}
    for match, counts, from_postings in lexicon:
        words = [w.strip('"') for w in match.split(" OR ")] if match else []
        if not from_postings:
            raise RuntimeError("a query word the postings cannot answer: not this corpus")
        for e in engines:
            prepared[e.name].append(counts if e is postings else match if e is fts5
                                    else e.prepare(words))
    for e in engines:  # warm-up: caches, page faults, lazy compilation
        for i in range(min(WARMUP, queries)):
            e.search(prepared[e.name][i])
    times: dict[str, list[float]] = {e.name: [] for e in engines}
    tops: dict[str, list[list[int]]] = {e.name: [] for e in engines}
    loads = [os.getloadavg()]
    for i in range(queries):
        shift = i % len(engines)
        for e in engines[shift:] + engines[:shift]:
            t0 = time.perf_counter()
            top = e.search(prepared[e.name][i])
            times[e.name].append(time.perf_counter() - t0)
            tops[e.name].append(top)
    loads.append(os.getloadavg())

    new_texts, _, _ = make_corpus(updates, np.random.default_rng(docs + 2))
    base = max(keys) + 1_000_000  # keys no memory holds
    samples = [(base + j, text) for j, text in enumerate(new_texts)]
    results: dict[str, Any] = {}
    for e in engines:
        pairs = [overlap(tops[e.name][i], tops["fts5"][i]) for i in range(queries)]
        ties = [tie_equivalent(cat, lexicon[i][0], tops[e.name][i], tops["fts5"][i])
                for i in range(queries)]
        results[e.name] = {
            "build_s": round(e.build_s, 3),
            "disk_mb": e.disk_mb,
            "top50": percentiles(times[e.name]),
            "top10_jaccard_vs_fts5": round(statistics.fmean(p[0] for p in pairs), 4),
            "top10_identical_vs_fts5": round(sum(p[1] for p in pairs) / queries, 4),
            # tie-aware: FTS5's bm25 of the engine's top 10 vs of FTS5's own top 10
            "top10_same_fts5_scores": round(sum(t[0] for t in ties) / queries, 4),
            "top10_fts5_bm25_kept": round(statistics.fmean(t[1] for t in ties), 4),
            "mean_hits": round(statistics.fmean(len(t) for t in tops[e.name]), 1),
            "notes": e.notes,
        }
    for e in engines:
        results[e.name]["update"] = e.add_delete(samples)
    loads.append(os.getloadavg())
    mem.close()
    return {"docs": docs, "queries": queries, "updates": updates, "top": TOP,
            "bulk_load_s": round(load_s, 2),
            "catalog_tables_mb": {**fts_tables, **ours_tables},
            "load_avg": [round(x, 2) for x in (loads[0][0], loads[1][0], loads[2][0])],
            "engines": results}


def print_table(out: dict[str, Any]) -> None:
    print(f"{out['docs']:,} docs, {out['queries']} queries, top {out['top']}; "
          f"load average (1 min) {out['load_avg']}")
    print(f"{'engine':>9} {'build s':>8} {'disk MB':>8} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'p99 ms':>8} {'J@10 fts5':>9} {'same@10':>8} {'ties@10':>8} {'bm25 kept':>9} "
          f"{'add ms':>8} {'delete ms':>9}")
    for name, r in out["engines"].items():
        up = r["update"]
        add = f"{up['add']['p50_ms']:.2f}" if up["add"] else f"{up['full_reindex_s']:.1f}s*"
        dele = f"{up['delete']['p50_ms']:.2f}" if up["delete"] else "(reindex)"
        print(f"{name:>9} {r['build_s']:>8.2f} {r['disk_mb']:>8.1f} "
              f"{r['top50']['p50_ms']:>8.3f} {r['top50']['p95_ms']:>8.3f} "
              f"{r['top50']['p99_ms']:>8.3f} {r['top10_jaccard_vs_fts5']:>9.3f} "
              f"{r['top10_identical_vs_fts5']:>8.1%} {r['top10_same_fts5_scores']:>8.1%} "
              f"{r['top10_fts5_bm25_kept']:>9.1%} {add:>8} {dele:>9}")
    print("J@10: mean Jaccard of the top-10 sets with FTS5's; same@10: identical sets; "
          "ties@10: the same FTS5 bm25 scores (equal up to tied rows); bm25 kept: FTS5 bm25 "
          "of the top 10 / of FTS5's top 10; add/delete: p50 of one committed "
          "single-document change; *: full re-index")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--updates", type=int, default=50,
                        help="single-document adds (then deletes) timed per engine")
    parser.add_argument("--out", type=Path, default=RESULTS / "lexical_engines.json")
    args = parser.parse_args(argv)
    modules = {"tantivy": optional("tantivy", "tantivy"), "bm25s": optional("bm25s", "bm25s"),
               "Stemmer": optional("Stemmer", "PyStemmer", "bm25s runs unstemmed")}
    with tempfile.TemporaryDirectory(prefix="walrus-mem-lexeng-") as tmp:
        out = run(args.docs, args.queries, args.updates, Path(tmp), modules)
    out["machine"] = {"python": platform.python_version(), "platform": platform.platform(),
                      "cpus": os.cpu_count(), "sqlite": sqlite3.sqlite_version}
    out["versions"] = {name: getattr(mod, "__version__", "?")
                       for name, mod in modules.items() if mod is not None}
    print_table(out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
