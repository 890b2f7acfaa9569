"""Disk footprint: bytes per memory by part, after N short facts through the public API.

Usage::

    python bench/footprint.py                 # 10,000 facts
    python bench/footprint.py --n 100000
    python bench/footprint.py --data-dir DIR  # measure an existing data dir only

N short facts (bench/ingest.py's ``make_texts``, 50-80 characters) go through
``Memory.remember_many`` in batches of ``--batch`` with vectors given (a 384-d
hash embedder: the model's cost is not the point, its dimension is), into one
namespace, with the embedded relayer_mock keeping the blobs in the data dir
(what a user without a Walrus endpoint runs). The Memory is closed (index
saved, WAL checkpointed) before measuring.

Parts: every file under the data dir by size; inside the catalog, SQLite's
``dbstat`` virtual table gives each table's and index's pages (FTS5's shadow
tables, the postings, the history, ...); the ``memories`` table's columns are
apportioned by their payload bytes (``sum(length(col))``): text, sealed copy,
vector, the rest. Without ``dbstat`` (a SQLite built without it), page counts
per b-tree are not available and only the file sizes are reported.

Chroma, mem0 and sqlite-vec are not dependencies; the output quotes the issue's
figures for 10k facts (28: chroma 24 MB, sqlite-vec 16 MB, mem0 48 MB) as a
reference. ``bench/footprint_peers.py`` measures chroma on the same facts and
vectors in the same run, from its own venv.

With the embedded relayer a published row keeps no sealed copy in the catalog (schema 10,
walrus_mem/_catalog/held.py): "catalog: memories: sealed" counts the queued rows' copies
and those of rows published before; the bytes themselves are in "relayer blobs: quilts".

``--compact`` measures the data dir again after ``Memory.compact`` (superseded
manifests deleted from the embedded relayer, vectors of older rows emptied, sealed copies
the relayer holds dropped, VACUUM).

Prints a table and writes ``.bench-results/footprint-<n>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest import make_texts  # noqa: E402
from walrus_mem import Memory, Settings  # noqa: E402
from walrus_mem.testing import HashEmbedder  # noqa: E402

RESULTS = ROOT / ".bench-results"
MASTER = "17" * 32
NAMESPACE = "default"
PEERS_10K_MB = {"chroma": 24.0, "sqlite-vec": 16.0, "mem0": 48.0}  # issue 28, not this run
TARGET_PER_FACT = 2500  # bytes: the issue's absolute target for a short fact


def _embedder() -> HashEmbedder:
    """The 384-d hash embedder; with WALRUS_MEM_BENCH_UNCARRIED=1 (``--uncarried``) one that
    names no weights, so facts are sealed without their vector and the catalog row keeps
    it, as bench/scale.py's lookup embedder does."""
    embedder = HashEmbedder(dim=384)
    if os.environ.get("WALRUS_MEM_BENCH_UNCARRIED") == "1":
        embedder.weights_digest = None  # type: ignore[assignment]
    return embedder


def _settings(data_dir: Path) -> Settings:
    # the per-user heads mirror goes beside the data dir, not in ~/.local/state
    return Settings(config_file=None, data_dir=data_dir, use_keyring=False,
                    publisher_url=None, aggregator_urls=[],
                    state_dir=data_dir.parent / (data_dir.name + ".state"))


def compact(data_dir: Path) -> dict[str, Any]:
    """``Memory.compact``: superseded manifests out of the embedded relayer, older rows'
    vectors emptied, the index rebuilt, VACUUM."""
    started = time.perf_counter()
    with Memory(_settings(data_dir), embedder=_embedder(), master_key=MASTER) as mem:
        mem.compact(NAMESPACE)
    return {"compact_s": round(time.perf_counter() - started, 1)}


def fill(data_dir: Path, n: int, batch: int) -> dict[str, Any]:
    settings = _settings(data_dir)
    texts = make_texts(n)
    started = time.perf_counter()
    with Memory(settings, embedder=_embedder(), master_key=MASTER) as mem:
        for start in range(0, n, batch):
            mem.remember_many(texts[start:start + batch], namespace=NAMESPACE)
        mem.sync()
        mem.recall(texts[0], namespace=NAMESPACE, k=5)  # builds the HNSW index (saved at close)
    return {"ingest_s": round(time.perf_counter() - started, 1),
            "text_chars": sum(len(t) for t in texts)}


def file_parts(data_dir: Path) -> dict[str, int]:
    """Bytes on disk (apparent size) per top-level part of the data dir."""
    parts: dict[str, int] = defaultdict(int)
    for path in data_dir.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(data_dir)
        name = rel.parts[0]
        if name.startswith("catalog."):
            part = "catalog file" + (" (WAL/shm)" if path.name.endswith(("-wal", "-shm")) else "")
        elif name.startswith("heads."):
            part = "heads file"
        elif "relayer" in name or "walrus" in name:
            part = (_relayer_blob_kind(path) if "blobs" in rel.parts
                    else "relayer index" if path.suffix == ".sqlite3" or "-wal" in path.name
                    or "-shm" in path.name else "relayer other")
        elif "index" in name:
            kind = ("vector copies" if path.name.endswith(".vectors.npy")
                    else "index attributes" if path.name.endswith(".rows.npy")
                    else "HNSW graph (+ vectors)" if path.suffix in {".usearch", ".index"}
                    else "index other")
            part = kind
        else:
            part = f"other: {name}"
        parts[part] += path.stat().st_size
    return dict(parts)


def _relayer_blob_kind(path: Path) -> str:
    with open(path, "rb") as handle:
        magic = handle.read(8)
    # relayer_mock's quilt container (_quilt.py) holds the facts' patches; the rest are
    # single sealed blobs: manifests (and facts published alone)
    quilt = magic in (b"WMQUILT2", b"WMQUILT1")  # packed header since 2026-11-29, JSON before
    return "relayer blobs: quilts" if quilt else "relayer blobs: single"


def _catalog_path(data_dir: Path) -> Path:
    path = data_dir / "catalog.sqlite3"
    if not path.exists():
        raise SystemExit(f"no catalog.sqlite3 in {data_dir}")
    return path


def _btree_group(name: str, owner: dict[str, str]) -> str:
    table = owner.get(name, name)
    if table.startswith("fts_"):
        return "FTS5 index" if table.endswith(("_data", "_idx")) else "FTS5 other (" + \
            table.rsplit("_", 1)[-1] + ")"
    if table.startswith("lexdf_"):
        return "postings: per-term counts"
    if table.startswith("lex_"):
        return "postings"
    if table == "memories":
        return "memories (table)" if name == table else "memories (indexes)"
    if table in {"versions", "changes"}:
        return f"history: {table}"
    if table.startswith("manifest"):
        return "manifests"
    return "catalog other"


def catalog_parts(path: Path) -> dict[str, Any]:
    """Pages per b-tree (dbstat) grouped into parts, and the memories columns' payloads."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        owner = {str(r[0]): str(r[1]) for r in conn.execute(
            "SELECT name, tbl_name FROM sqlite_master")}
        try:
            stat = conn.execute("SELECT name, sum(pgsize), sum(payload) FROM dbstat "
                                "GROUP BY name").fetchall()
        except sqlite3.OperationalError:
            return {"page_size": page, "pages": pages, "free_pages": free, "dbstat": False}
        groups: dict[str, int] = defaultdict(int)
        btrees: dict[str, int] = {}
        for name, size, _payload in stat:
            groups[_btree_group(str(name), owner)] += int(size)
            btrees[str(name)] = int(size)
        groups["free pages"] = free * page
        columns = dict(zip(
            ("text", "sealed", "vector", "all"),
            conn.execute("SELECT coalesce(sum(length(text)), 0), coalesce(sum(length(sealed)), 0),"
                         " coalesce(sum(length(vector)), 0), count(*) FROM memories").fetchone(),
            strict=True)) if "memories" in owner else {}
        versions_text = int(conn.execute(
            "SELECT coalesce(sum(length(text)) + sum(length(metadata)), 0) FROM versions"
        ).fetchone()[0]) if "versions" in owner else 0
    finally:
        conn.close()
    return {"page_size": page, "pages": pages, "free_pages": free, "dbstat": True,
            "groups": dict(groups), "btrees": btrees, "memories_columns": columns,
            "versions_text_bytes": versions_text}


def split_memories(groups: dict[str, int], columns: dict[str, int]) -> dict[str, int]:
    """The memories table's pages apportioned to text / sealed / vector / rest by payload."""
    table = groups.pop("memories (table)", 0)
    if not table or not columns.get("all"):
        return groups
    payload = {k: int(columns[k]) for k in ("text", "sealed", "vector")}
    # the rest of each row: ids, hashes, metadata, numbers, record headers, page slack
    shares = {f"memories: {k}": v for k, v in payload.items()}
    shares["memories: other columns + slack"] = max(0, table - sum(payload.values()))
    scale = min(1.0, table / max(1, sum(payload.values())))
    for k in ("text", "sealed", "vector"):
        shares[f"memories: {k}"] = int(shares[f"memories: {k}"] * scale)
    return {**groups, **shares}


def measure(data_dir: Path, n: int) -> dict[str, Any]:
    files = file_parts(data_dir)
    total = sum(files.values())
    catalog = catalog_parts(_catalog_path(data_dir))
    parts = dict(files)
    if catalog.get("dbstat"):
        inner = split_memories(dict(catalog["groups"]), catalog["memories_columns"])
        parts.pop("catalog file", None)
        parts.update({f"catalog: {k}": v for k, v in inner.items()})
    return {"n": n, "total_bytes": total, "bytes_per_memory": round(total / n, 1),
            "parts": parts, "files": files, "catalog": catalog}


def report(result: dict[str, Any]) -> None:
    n = result["n"]
    print(f"\n{n:,} memories: {result['total_bytes'] / 1e6:.1f} MB, "
          f"{result['bytes_per_memory']:.0f} B per memory")
    print(f"{'part':48} {'MB':>9} {'B/memory':>9}")
    for part, size in sorted(result["parts"].items(), key=lambda kv: -kv[1]):
        print(f"{part:48} {size / 1e6:9.2f} {size / n:9.0f}")
    parts = result["parts"]
    fts5 = parts.get("catalog: FTS5 index", 0)
    if fts5:
        print(f"\npostings / FTS5 index: {parts.get('catalog: postings', 0) / fts5:.1f}x")
    chroma = PEERS_10K_MB["chroma"] * 1e6 / 10_000
    print(f"\nreference (issue 28, 10k facts, not this run): chroma {chroma:.0f} B per memory; "
          f"target <= 2x chroma = {2 * chroma:.0f} B or <= {TARGET_PER_FACT} B per short fact")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--data-dir", default=None,
                        help="measure this data dir (filled first if it does not exist)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    parser.add_argument("--compact", action="store_true",
                        help="also measure after Memory.compact (a second table)")
    parser.add_argument("--uncarried", action="store_true",
                        help="facts sealed without their vector (the row keeps it), as in "
                             "bench/scale.py")
    parser.add_argument("--fill-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--compact-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.uncarried:
        os.environ["WALRUS_MEM_BENCH_UNCARRIED"] = "1"  # the fill and compact children too
    tmp = None
    if args.data_dir:
        data_dir = Path(args.data_dir)
    else:
        tmp = tempfile.mkdtemp(prefix="footprint-")
        data_dir = Path(tmp) / "data"
    if args.fill_only:
        print(json.dumps(fill(data_dir, args.n, args.batch)))
        return 0
    if args.compact_only:
        print(json.dumps(compact(data_dir)))
        return 0
    fill_info: dict[str, Any] = {}
    if not data_dir.exists():
        # in a child process, so what its exit closes and checkpoints (the embedded
        # relayer's per-thread connections and their WAL files) is measured at rest
        child = subprocess.run([sys.executable, __file__, "--fill-only", "--n", str(args.n),
                                "--batch", str(args.batch), "--data-dir", str(data_dir)],
                               check=True, stdout=subprocess.PIPE, text=True)
        fill_info = json.loads(child.stdout.strip().splitlines()[-1])
    result = measure(data_dir, args.n)
    result.update(fill_info, data_dir=str(data_dir), sqlite=sqlite3.sqlite_version,
                  peers_10k_mb_issue28=PEERS_10K_MB)
    report(result)
    if args.compact:
        child = subprocess.run([sys.executable, __file__, "--compact-only", "--data-dir",
                                str(data_dir)], check=True, stdout=subprocess.PIPE, text=True)
        after = measure(data_dir, args.n)
        after.update(json.loads(child.stdout.strip().splitlines()[-1]))
        print("\nafter Memory.compact:")
        report(after)
        result["after_compact"] = after
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"footprint-{args.n}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    if tmp and not args.keep:
        import shutil
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
