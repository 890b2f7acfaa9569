"""Disk footprint of peers on the same facts and vectors as bench/footprint.py, same run.

Usage::

    python bench/footprint_peers.py                          # 10,000 facts, chroma
    python bench/footprint_peers.py --peer-python /work/chroma_venv/bin/python

The facts are bench/ingest.py's ``make_texts(n)`` and the vectors the 384-d hash
embedder's (walrus_mem.testing.HashEmbedder), exactly what bench/footprint.py gives
walrus_mem. They are written to a temporary ``.npz`` and a peer script runs under
``--peer-python`` (default: this interpreter), so a peer can live in its own venv
(chromadb is not a walrus_mem dependency and must not be installed into its venv).
A peer whose package is missing is skipped with a line saying so (exit 0).

chroma: ``PersistentClient`` in a fresh directory, one collection (cosine space), the
texts as documents with their ids, vectors given, added in batches of ``--batch``,
then the client is dropped and the directory measured (apparent size of every file).

Prints bytes per memory and writes ``.bench-results/footprint-peers-<n>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".bench-results"

CHROMA = r'''
import json, os, sys, time
from pathlib import Path
try:
    import chromadb
except ImportError:
    print(json.dumps({"skipped": "chromadb is not installed in " + sys.executable}))
    raise SystemExit(0)
import numpy as np
data = np.load(sys.argv[1], allow_pickle=False)
texts, vectors = [str(t) for t in data["texts"]], data["vectors"]
where, batch = Path(sys.argv[2]), int(sys.argv[3])
started = time.perf_counter()
client = chromadb.PersistentClient(path=str(where))
col = client.create_collection("facts", metadata={"hnsw:space": "cosine"})
for start in range(0, len(texts), batch):
    end = start + batch
    col.add(ids=[f"m{i}" for i in range(start, min(end, len(texts)))],
            documents=texts[start:end], embeddings=vectors[start:end].tolist())
count = col.count()
hit = col.query(query_embeddings=[vectors[0].tolist()], n_results=1)["ids"][0][0]
del col, client
files = [p for p in where.rglob("*") if p.is_file()]
total = sum(p.stat().st_size for p in files)
parts = {}
for p in files:
    key = "sqlite" if p.name.startswith("chroma.sqlite3") else p.suffix or p.name
    parts[key] = parts.get(key, 0) + p.stat().st_size
print(json.dumps({"peer": "chroma", "version": chromadb.__version__, "count": count,
                  "first_hit_is_itself": hit == "m0", "bytes": total,
                  "parts": parts, "ingest_s": round(time.perf_counter() - started, 1)}))
'''


def facts(n: int) -> tuple[list[str], Any]:
    sys.path.insert(0, str(ROOT))
    from bench.ingest import make_texts
    from walrus_mem.testing import HashEmbedder

    texts = make_texts(n)
    return texts, HashEmbedder(dim=384).embed(texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--peer-python", default=sys.executable,
                        help="the interpreter whose site-packages hold the peers")
    args = parser.parse_args(argv)
    import numpy as np

    texts, vectors = facts(args.n)
    results: dict[str, Any] = {"n": args.n, "batch": args.batch, "peers": {}}
    with tempfile.TemporaryDirectory(prefix="footprint-peers-") as tmp:
        npz = Path(tmp) / "facts.npz"
        np.savez(npz, texts=np.array(texts), vectors=np.asarray(vectors, np.float32))
        done = subprocess.run([args.peer_python, "-c", CHROMA, str(npz), str(Path(tmp) / "chroma"),
                               str(args.batch)], capture_output=True, text=True, check=False)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"chroma: failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            return 1
        out = json.loads(lines[-1])
        results["peers"]["chroma"] = out
    if "skipped" in out:
        print(f"chroma: skipped ({out['skipped']})")
    else:
        per = out["bytes"] / args.n
        out["bytes_per_memory"] = round(per)
        print(f"chroma {out['version']}: {args.n:,} memories, {out['bytes'] / 1e6:.1f} MB, "
              f"{per:,.0f} B per memory (count {out['count']}, ingest {out['ingest_s']} s)")
        for part, size in sorted(out["parts"].items(), key=lambda kv: -kv[1]):
            print(f"  {part:<20} {size / 1e6:8.2f} MB {size / args.n:8.0f} B/memory")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"footprint-peers-{args.n}.json"
    path.write_text(json.dumps(results, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
