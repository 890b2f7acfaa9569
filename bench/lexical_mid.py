"""The lexical half on a harder mix: every query holds a word in 10, 25 or 45 % of the rows.

Usage::

    python bench/lexical_mid.py                      # 100k rows, 300 queries
    python bench/lexical_mid.py --rows 5000 --queries 50

bench/recall.py's mix has words in under 2 % of the rows and words in over half
of them (which bm25 gives no weight, so recall drops them); a word in between is
read, and past the candidate budget it only scores the candidates. This measures
the lexical work of recall for such queries (the informative words, the lexical
pass, and the full query's scores of the candidates: the top 50 and 100 other
keys) on the postings and on FTS5, in one catalog, alternating per query.
Texts are bench/recall.py's Zipf words (6 a row) plus "alpha" (10 % of the rows),
"bravo" (25 %) and "charlie" (45 %); each query is 3 Zipf words and one of those.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.recall import zipf_ranks  # noqa: E402
from walrus_mem._catalog.catalog import Catalog, fts_table  # noqa: E402
from walrus_mem._recall import lexical  # noqa: E402

MIDS = {"alpha": 0.10, "bravo": 0.25, "charlie": 0.45}
NS = "mid"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(5)
    texts = []
    for i, row in enumerate(zipf_ranks(rng, args.rows * 6).reshape(args.rows, 6)):
        extra = [word for word, share in MIDS.items() if rng.random() < share]
        texts.append(f"User noted {' '.join(f'w{r:05d}' for r in row)} {' '.join(extra)} "
                     f"(note {i})")
    ranks = zipf_ranks(rng, args.queries * 3).reshape(args.queries, 3)
    queries = [" ".join(f"w{r:05d}" for r in row) + " " + list(MIDS)[i % 3]
               for i, row in enumerate(ranks)]
    with tempfile.TemporaryDirectory(prefix="walrus-mem-mid-") as tmp:
        cat = Catalog(Path(tmp) / "catalog.sqlite3")
        cat.ensure_namespace(NS, None)
        table = fts_table(NS)
        with cat.write() as c:
            c.executemany(f"INSERT INTO {table} (rowid, text) VALUES (?, ?)",
                          enumerate(texts, start=1))
        cat.scrub()
        cat.rebuild_postings(NS)
        times: dict[str, list[float]] = {"postings": [], "fts5": []}
        for rep in range(2):  # the first pass warms caches and is not kept
            for i, query in enumerate(queries):
                for engine in (("postings", "fts5") if i % 2 else ("fts5", "postings")):
                    started = time.perf_counter()
                    match, counts, _ = lexical.informative(cat, NS, query, args.rows)
                    if engine == "fts5" and match:
                        counts = lexical.informative_terms(
                            cat.fts_doc_counts(NS, match.split(" OR ")), args.rows)
                    lex = lexical.lexical_pass(cat, NS, match, 50, counts, engine == "postings")
                    if not lex.complete and match:
                        wanted = lex.top + rng.integers(1, args.rows, 100).tolist()
                        lexical.rescore(cat, NS, match, lex, counts, wanted)
                    if rep:
                        times[engine].append(time.perf_counter() - started)
        rows = cat.lexicon_counts(NS, [f'"{word}"' for word in MIDS])
        cat.close()
    print(f"{args.rows:,} rows, {args.queries} queries, load average (1 min) "
          f"{os.getloadavg()[0]:.2f}; rows holding {rows}")
    for engine, samples in times.items():
        ms = np.asarray(samples) * 1000
        print(f"{engine:>9}: lexical work p50 {np.percentile(ms, 50):.2f} ms, "
              f"p99 {np.percentile(ms, 99):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
