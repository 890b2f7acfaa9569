"""Shared tools of the stress suites: facts, figures, consistency and blob scans.

Nothing here asserts on its own; the suites decide what must hold.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from walrus_mem._recall.index_vectors import quantize
from walrus_mem.config import Settings
from walrus_mem.envelope import open_envelope
from walrus_mem.errors import EnvelopeError
from walrus_mem.keys import NamespaceKeys
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO / ".bench-results" / "reliability"
MASTER_HEX = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
EMBED_DIM = 64

_NAMES = ["Ada", "Bruno", "Chiara", "Dmitri", "Esme", "Farid", "Greta", "Hiro", "Ines", "Jonas",
          "Kemal", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tomoko"]
_VERBS = ["prefers", "keeps", "repaired", "ordered", "painted", "borrowed", "planted",
          "reviewed", "booked", "sold"]
_ADJS = ["blue", "quiet", "heavy", "striped", "ancient", "electric", "tiny", "spare",
         "wooden", "frozen"]
_NOUNS = ["bicycle", "teapot", "lantern", "notebook", "violin", "garden", "telescope",
          "kayak", "printer", "sofa"]
_CITIES = ["Lisbon", "Osaka", "Quito", "Tartu", "Accra", "Hobart", "Bergen", "Cusco",
           "Malmo", "Izmir"]


def make_facts(n: int, *, seed: int, tag: str = "") -> list[str]:
    """``n`` distinct, self-contained facts; each has a unique reference word."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ref = f"ref{tag}{seed:x}q{i:05d}"
        out.append(
            f"{rng.choice(_NAMES)} {rng.choice(_VERBS)} the {rng.choice(_ADJS)} "
            f"{rng.choice(_NOUNS)} in {rng.choice(_CITIES)} ({ref})."
        )
    return out


def settings_for(data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"data_dir": data_dir, "use_keyring": False}
    values.update(overrides)
    return Settings(**values)


def open_memory(data_dir: Path, **overrides: Any) -> Memory:
    """A Memory on ``data_dir`` with the fake embedder and the stress master key."""
    return Memory(settings_for(data_dir, **overrides), embedder=HashEmbedder(dim=EMBED_DIM),
                  master_key=MASTER_HEX)


# -- figures ---------------------------------------------------------------------------


def write_figures(suite: str, figures: Mapping[str, Any]) -> Path:
    """Merge ``figures`` into ``.bench-results/reliability/<suite>.json`` (with the date)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{suite}.json"
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            data = {}
    data.update(figures)
    data["suite"] = suite
    data["date"] = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
    return path


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return round(time.perf_counter() - self.start, 2)


# -- worker processes ----------------------------------------------------------------------


class Worker:
    """A worker subprocess (``python -m module args``) with its output collected line by line."""

    def __init__(self, args: list[str], module: str = "tests.stress.ingest_worker") -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WALRUS_MEM_")}
        env["PYTHONPATH"] = str(REPO)
        self.lines: list[str] = []
        self.times: list[float] = []  # when each line arrived (monotonic)
        self.errors: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_errors, daemon=True)
        self._err_reader.start()

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self.errors.extend(self.proc.stderr)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self.times.append(time.monotonic())
            if line.startswith("READY"):
                self.ready.set()

    def wait(self, timeout: float = 120) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        self._err_reader.join(timeout)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code

    @property
    def stderr(self) -> str:
        return "".join(self.errors)

    def seconds_between(self, first: str, last: str) -> float:
        """Time from the first line starting with ``first`` to the one starting with ``last``."""
        start = next(t for line, t in zip(self.lines, self.times, strict=True)
                     if line.startswith(first))
        end = next(t for line, t in zip(self.lines, self.times, strict=True)
                   if line.startswith(last))
        return end - start

    def acked(self) -> dict[int, str]:
        out = {}
        for line in self.lines:
            if line.startswith("ID "):
                _, index, mid = line.split()
                out[int(index)] = mid
        return out


# -- catalog / index consistency ---------------------------------------------------------


@dataclass
class Consistency:
    """What the catalog, FTS, history, outbox and index of one namespace agree on."""

    namespace: str
    memories: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _fts_table(namespace: str) -> str:
    try:  # one FTS5 table per namespace
        from walrus_mem._catalog.catalog import fts_table  # type: ignore[attr-defined]
    except ImportError:  # one shared table (older catalog layout)
        return "fts"
    return str(fts_table(namespace))


def check_consistency(mem: Memory, namespace: str) -> Consistency:
    """Catalog rows == FTS rows == index keys; every memory has history; outbox is sane.

    Uses the Memory's own index (loaded from disk and caught up with the change
    log, or rebuilt if the file was unusable) and compares every stored vector
    with the catalog's.
    """
    report = Consistency(namespace)
    cat = mem._catalog
    rows = cat.query("SELECT key, id, text, version, vector, status, blob_id FROM memories "
                     "WHERE namespace = ?", (namespace,))
    report.memories = len(rows)
    keys = {int(r["key"]) for r in rows}
    fts_texts = {int(r[0]): r[1] for r in cat.query(
        f"SELECT rowid, text FROM {_fts_table(namespace)}")}
    fts = set(fts_texts)
    if fts != keys:
        report.problems.append(f"FTS rows differ from catalog: {len(fts ^ keys)} keys")
    for r in rows:  # a catalog whose FTS5 keeps no text (schema 9): the postings check
        held = fts_texts.get(int(r["key"]))  # below compares its tokens with the texts'
        if held is not None and held != r["text"]:
            report.problems.append(f"FTS text differs for {r['id']}")
            break
    try:  # the postings recall scores from (a catalog that has them)
        from walrus_mem._catalog.postings import differences
    except ImportError:
        pass
    else:
        report.problems += [f"postings: {p}" for p in differences(cat.conn, namespace)]
    hist = {(str(r[0]), int(r[1])) for r in cat.query(  # the current ones: memories rows
        "SELECT memory_id, version FROM versions WHERE namespace = ? UNION ALL "
        "SELECT id, version FROM memories WHERE namespace = ? AND event IS NOT NULL",
        (namespace, namespace))}
    missing_hist = [r["id"] for r in rows if (r["id"], int(r["version"])) not in hist]
    if missing_hist:
        report.problems.append(f"{len(missing_hist)} memories without a history row")
    dangling = cat.query(
        "SELECT count(*) FROM outbox_items i LEFT JOIN memories m ON m.id = i.memory_id "
        "WHERE m.id IS NULL")
    if int(dangling[0][0]):
        report.problems.append(f"{dangling[0][0]} outbox items without a memory")
    unqueued = cat.query(
        "SELECT count(*) FROM memories m WHERE m.namespace = ? AND m.status = 'queued' AND NOT "
        "EXISTS (SELECT 1 FROM outbox_items i WHERE i.memory_id = m.id AND "
        "i.version = m.version)", (namespace,))
    if int(unqueued[0][0]):
        report.problems.append(f"{unqueued[0][0]} queued memories not in the outbox (stranded)")
    published_without_blob = [r["id"] for r in rows
                              if r["status"] == "published" and not r["blob_id"]]
    if published_without_blob:
        report.problems.append(f"{len(published_without_blob)} published rows without blob id")
    if not rows:
        return report
    emb = mem.embedder
    idx = mem._indexes.get(namespace, emb.model_id, emb.dim)
    index_keys = {int(k) for k in np.asarray(idx.index.keys)}
    if index_keys != keys:
        report.problems.append(
            f"index keys differ from catalog: {len(keys - index_keys)} missing, "
            f"{len(index_keys - keys)} extra"
        )
    else:
        ordered = sorted(keys)
        stored = np.asarray(idx.index.get(np.asarray(ordered, dtype=np.uint64)),
                            dtype=np.float32).reshape(len(ordered), -1)
        # the catalog's vectors (from the sealed copy when the row keeps none)
        by_key = cat.vectors_by_keys(namespace, ordered)
        # the index keeps them as int8 (index_vectors.quantize): within its rounding
        expected = quantize(np.stack([by_key[k] for k in ordered])).astype(np.float32)
        if not np.allclose(stored, expected, atol=1.0):
            report.problems.append("index vectors differ from the catalog's")
    return report


# -- relayer blob scans --------------------------------------------------------------------


def split_blob(data: bytes) -> list[tuple[str | None, bytes]]:
    """A stored blob as (quilt identifier or None, bytes) parts (mock quilt container)."""
    from relayer_mock._quilt import split_container

    return split_container(data)


def relayer_blobs(relayer_dir: Path) -> dict[str, bytes]:
    """Every available blob (id -> bytes) in a relayer_mock data dir, read from its store."""
    from relayer_mock._store import Store

    store = Store(relayer_dir)
    try:
        out: dict[str, bytes] = {}
        for entry in store.list_blobs(include_unavailable=False):
            out[entry["blobId"]] = store.read_blob(entry["blobId"])
        return out
    finally:
        store.close()


def relayer_files(relayer_dir: Path) -> dict[str, bytes]:
    """Every file the relayer keeps on disk (blobs, staging, its SQLite files), by path."""
    return {str(p.relative_to(relayer_dir)): p.read_bytes()
            for p in sorted(relayer_dir.rglob("*")) if p.is_file()}


@dataclass
class BlobCensus:
    """Who is in which blob: fact envelopes by (memory id, version), manifests, strangers."""

    blobs: int = 0
    quilts: int = 0
    parts: int = 0
    locations: dict[tuple[str, int], set[str]] = field(default_factory=lambda: defaultdict(set))
    manifests: int = 0
    unreadable: int = 0
    by_namespace: Counter[str] = field(default_factory=Counter)

    def duplicates(self) -> dict[tuple[str, int], set[str]]:
        """(memory id, version) stored in more than one distinct blob."""
        return {k: v for k, v in self.locations.items() if len(v) > 1}


def census(blobs: Mapping[str, bytes], keys: Iterable[NamespaceKeys]) -> BlobCensus:
    """Open every blob and quilt patch with each namespace's keys and classify it."""
    keyring = list(keys)
    result = BlobCensus()
    for blob_id, data in blobs.items():
        result.blobs += 1
        parts = split_blob(data)
        if parts[0][0] is not None:
            result.quilts += 1
        for _, part in parts:
            result.parts += 1
            for k in keyring:
                try:
                    record = open_envelope(k, part)
                except EnvelopeError:
                    continue
                result.by_namespace[k.namespace] += 1
                if record["kind"] == "fact":
                    result.locations[(str(record["id"]), int(record["version"]))].add(blob_id)
                else:
                    result.manifests += 1
                break
            else:
                result.unreadable += 1
    return result


def sqlite_rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in con.execute(f"SELECT * FROM {table}")]
    finally:
        con.close()
