"""Per-namespace postings: SQLite's bm25 without FTS5's row-by-row scoring.

FTS5 scores a MATCH row by row: for every matching row a document-size lookup
and a position-list decode (~0.4 µs), so a query whose words are in 2,000 rows
spends ~0.9 ms on bm25 alone, and a word in 1 % of a million rows costs 4 ms.
The postings table keeps, per term and in key order, each row's key, how often
the term occurs in it (tf) and the row's length in tokens (dl), packed in
blocks of up to :data:`BLOCK` entries (one SQLite row per block). A query
reads its terms' blocks and numpy applies FTS5's bm25 formula to all of them
at once (:func:`bm25_partials`): the same scores, from a few page reads.

Terms, tf and dl are FTS5's own: :class:`Tokenizer` runs the catalog's
tokenizer spec in a private in-memory FTS5 table, and :func:`rebuild` reads an
existing FTS5 table's index through ``fts5vocab``. The catalog writes a row's
postings in the same transaction as its FTS5 row (``Catalog.fts_add`` /
``fts_remove``), so both stay consistent across processes and crashes.

Table ``lex_<hash>`` (:func:`postings_table`): ``term``, ``first`` (a lower
bound of the block's keys; blocks of a term cover disjoint key ranges in
``first`` order), ``n`` (entries), ``keys`` (little-endian int64, ascending),
``tfdl`` (little-endian uint32 pairs). Table ``lexdf_<hash>``: per term, how
many rows hold it (one seek instead of summing a common term's blocks). Table
``lexicon_stats``: per namespace, rows and tokens, FTS5's ``nRow`` and ``nToken``.
"""

from __future__ import annotations

import json
import math
import sqlite3
import struct
import threading
from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from .._recall.ranking import FTS_TOKENIZE
from .fts import fts_table

__all__ = [
    "BLOCK",
    "BM25_B",
    "BM25_K1",
    "STATS_TABLE",
    "Postings",
    "Tokenizer",
    "add",
    "add_many",
    "bm25_idf",
    "bm25_partials",
    "create",
    "counts_table",
    "differences",
    "doc_counts",
    "postings_table",
    "read",
    "read_at",
    "read_many",
    "rebuild",
    "remove",
    "stats",
    "tokenizer",
]

BLOCK: Final = 128
"""Entries per block when appending; a block grows to 2 x BLOCK before it splits."""
BM25_K1: Final = 1.2  # FTS5's constants (fts5_aux.c)
BM25_B: Final = 0.75
STATS_TABLE: Final = "lexicon_stats"

_KEY: Final = np.dtype("<i8")
_TFDL: Final = np.dtype("<u4")

Postings = tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32], npt.NDArray[np.uint32]]
"""A term's (keys ascending, tf, dl) arrays."""


def postings_table(namespace: str) -> str:
    """Name of a namespace's postings table (the FTS5 table's hash: reveals no name)."""
    return "lex_" + fts_table(namespace).removeprefix("fts_")


def counts_table(namespace: str) -> str:
    """Name of a namespace's table of per-term row counts."""
    return "lexdf_" + fts_table(namespace).removeprefix("fts_")


class Tokenizer:
    """FTS5's tokenizer, run in a private in-memory FTS5 table.

    Gives exactly the terms (and counts) the catalog's FTS5 tables store for a
    text, porter stemming and diacritics folding included. Each call inserts
    into the table and rolls back, so it stays empty. Thread-safe.
    """

    def __init__(self, spec: str = FTS_TOKENIZE) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False,
                                     isolation_level=None)
        quoted = spec.replace("'", "''")
        self._conn.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(text, content = '', tokenize = '{quoted}')")
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        self._lock = threading.Lock()
        self._words: dict[str, tuple[str, ...]] = {}

    def counts(self, text: str) -> list[tuple[str, int]]:
        """The text's distinct terms with how often each occurs."""
        with self._lock:
            c = self._conn
            c.execute("BEGIN")
            try:
                c.execute("INSERT INTO t (rowid, text) VALUES (1, ?)", (text,))
                rows: list[tuple[str, int]] = c.execute(
                    "SELECT term, count(*) FROM v GROUP BY term").fetchall()
            finally:
                c.execute("ROLLBACK")
        return rows

    def counts_many(self, texts: Sequence[str]) -> list[list[tuple[str, int]]]:
        """:meth:`counts` of several texts, tokenized together."""
        out: list[list[tuple[str, int]]] = [[] for _ in texts]
        with self._lock:
            c = self._conn
            c.execute("BEGIN")
            try:
                c.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(texts))
                for doc, term, n in c.execute(
                        "SELECT doc, term, count(*) FROM v GROUP BY doc, term"):
                    out[doc].append((term, n))
            finally:
                c.execute("ROLLBACK")
        return out

    def terms(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """The tokens of each query word, in order (cached: queries repeat words; the
        words not seen yet are tokenized together, one row each)."""
        cache = self._words
        missing = [word for word in dict.fromkeys(words) if word not in cache]
        if missing:
            with self._lock:
                c = self._conn
                c.execute("BEGIN")
                try:
                    c.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)",
                                  enumerate(missing))
                    rows = sorted(c.execute("SELECT doc, offset, term FROM v"))
                finally:
                    c.execute("ROLLBACK")
                found: dict[int, list[str]] = {}
                for doc, _, term in rows:
                    found.setdefault(doc, []).append(term)
                if len(cache) + len(missing) > 65_536:
                    cache.clear()
                for i, word in enumerate(missing):
                    cache[word] = tuple(found.get(i, ()))
        return [cache[word] for word in words]


_TOKENIZER: Tokenizer | None = None
_TOKENIZER_LOCK = threading.Lock()


def tokenizer() -> Tokenizer:
    """The process's tokenizer (one in-memory connection, made on first use)."""
    global _TOKENIZER
    with _TOKENIZER_LOCK:
        if _TOKENIZER is None:
            _TOKENIZER = Tokenizer()
        return _TOKENIZER


# -- writing -----------------------------------------------------------------------------


def create(conn: sqlite3.Connection, namespace: str) -> None:
    """Create the namespace's (empty) postings table and stats row if missing."""
    table = postings_table(namespace)
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (term TEXT NOT NULL, first INTEGER NOT NULL, "
        "n INTEGER NOT NULL, keys BLOB NOT NULL, tfdl BLOB NOT NULL, "
        "PRIMARY KEY (term, first)) WITHOUT ROWID")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {counts_table(namespace)} "
                 "(term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {STATS_TABLE} (namespace TEXT PRIMARY KEY, "
        "rows INTEGER NOT NULL, tokens INTEGER NOT NULL)")
    conn.execute(f"INSERT OR IGNORE INTO {STATS_TABLE} (namespace, rows, tokens) "
                 "VALUES (?, 0, 0)", (namespace,))


def _block_at(conn: sqlite3.Connection, table: str, term: str,
              key: int) -> tuple[int, bytes, bytes] | None:
    """The block whose key range holds ``key`` (else the term's first block, if any)."""
    row = conn.execute(
        f"SELECT first, keys, tfdl FROM {table} WHERE term = ? AND first <= ? "
        "ORDER BY first DESC LIMIT 1", (term, key)).fetchone()
    if row is None:
        row = conn.execute(f"SELECT first, keys, tfdl FROM {table} WHERE term = ? "
                           "ORDER BY first LIMIT 1", (term,)).fetchone()
    return None if row is None else (int(row[0]), bytes(row[1]), bytes(row[2]))


def _put(conn: sqlite3.Connection, table: str, term: str, first: int,
         keys: npt.NDArray[np.int64], tfdl: npt.NDArray[np.uint32]) -> None:
    conn.execute(f"INSERT INTO {table} (term, first, n, keys, tfdl) VALUES (?, ?, ?, ?, ?)",
                 (term, first, len(keys), keys.astype(_KEY).tobytes(),
                  tfdl.astype(_TFDL).tobytes()))


def add(conn: sqlite3.Connection, namespace: str, key: int,
        counts: Sequence[tuple[str, int]]) -> None:
    """Add row ``key`` with its term counts (:meth:`Tokenizer.counts`); inside a write."""
    add_many(conn, namespace, [(key, counts)])


def add_many(conn: sqlite3.Connection, namespace: str,
             rows: Sequence[tuple[int, Sequence[tuple[str, int]]]]) -> None:
    """Add rows (key, term counts), none present yet; inside a write.

    A term's new keys that all come after its last block's (new memories: keys
    grow) are appended with one read and one write of that block, however many
    rows of the batch hold the term; others are inserted one by one.
    """
    table = postings_table(namespace)
    per_term: dict[str, list[tuple[int, int, int]]] = {}
    tokens = 0
    for key, counts in rows:
        dl = sum(n for _, n in counts)
        tokens += dl
        for term, tf in counts:
            per_term.setdefault(term, []).append((key, tf, dl))
    conn.executemany(f"INSERT INTO {counts_table(namespace)} (term, n) VALUES (?, ?) "
                     "ON CONFLICT (term) DO UPDATE SET n = n + excluded.n",
                     [(term, len(entries)) for term, entries in per_term.items()])
    # every term's last block, in one query
    last_of = {str(r[0]): (int(r[1]), bytes(r[2]), bytes(r[3])) for r in conn.execute(
        f"SELECT term, first, keys, tfdl FROM {table} WHERE (term, first) IN "
        f"(SELECT term, max(first) FROM {table} WHERE term IN "
        "(SELECT value FROM json_each(?)) GROUP BY term)", (json.dumps(list(per_term)),))}
    step = BLOCK * _KEY.itemsize  # a block's keys in bytes (its tf/dl pairs: the same)
    dropped: list[tuple[str, int]] = []
    blocks: list[tuple[str, int, int, bytes, bytes]] = []
    for term, entries in per_term.items():
        entries.sort()
        last = last_of.get(term)
        if last is not None and entries[0][0] <= int.from_bytes(last[1][-8:], "little",
                                                                 signed=True):
            for key, tf, dl in entries:  # into existing ranges: one at a time
                _insert(conn, table, term, key, np.array([tf, dl], dtype=_TFDL))
            continue
        count = len(entries)
        # packed with struct, not numpy: most terms of a batch get one or two entries
        kb = struct.pack(f"<{count}q", *(e[0] for e in entries))
        vb = struct.pack(f"<{2 * count}I", *(v for e in entries for v in e[1:]))
        first = entries[0][0]
        if last is not None and len(last[1]) < step:  # room in the last block
            first = last[0]
            dropped.append((term, first))
            kb, vb = last[1] + kb, last[2] + vb
        blocks += [(term, first if start == 0 else int.from_bytes(kb[start:start + 8], "little",
                                                                  signed=True),
                    len(kb[start:start + step]) // _KEY.itemsize, kb[start:start + step],
                    vb[start:start + step]) for start in range(0, len(kb), step)]
    conn.executemany(f"DELETE FROM {table} WHERE term = ? AND first = ?", dropped)
    conn.executemany(f"INSERT INTO {table} (term, first, n, keys, tfdl) VALUES (?, ?, ?, ?, ?)",
                     blocks)
    conn.execute(f"UPDATE {STATS_TABLE} SET rows = rows + ?, tokens = tokens + ? "
                 "WHERE namespace = ?", (len(rows), tokens, namespace))


def _insert(conn: sqlite3.Connection, table: str, term: str, key: int,
            entry: npt.NDArray[np.uint32]) -> None:
    """One posting into the block whose range holds ``key`` (split past 2 x BLOCK)."""
    block = _block_at(conn, table, term, key)
    if block is None:
        _put(conn, table, term, key, np.array([key], dtype=_KEY), entry.reshape(1, 2))
        return
    first, kb, vb = block
    if key > int.from_bytes(kb[-8:], "little", signed=True) and len(kb) >= BLOCK * _KEY.itemsize:
        _put(conn, table, term, key, np.array([key], dtype=_KEY), entry.reshape(1, 2))
        return  # after a full block's keys: a new block
    keys = np.frombuffer(kb, dtype=_KEY)
    pairs = np.frombuffer(vb, dtype=_TFDL).reshape(-1, 2)
    # (a key is never added twice: FTS5 refuses a second row with the same rowid first)
    pos = int(np.searchsorted(keys, key))
    keys = np.insert(keys, pos, key)
    pairs = np.insert(pairs, pos, entry, axis=0)
    conn.execute(f"DELETE FROM {table} WHERE term = ? AND first = ?", (term, first))
    first = min(first, key)
    if len(keys) > 2 * BLOCK:  # grown by inserts in the middle: split in two
        half = len(keys) // 2
        _put(conn, table, term, first, keys[:half], pairs[:half])
        _put(conn, table, term, int(keys[half]), keys[half:], pairs[half:])
    else:
        _put(conn, table, term, first, keys, pairs)


def remove(conn: sqlite3.Connection, namespace: str, key: int,
           counts: Sequence[tuple[str, int]]) -> None:
    """Remove row ``key``, whose text had ``counts``; inside a write."""
    table = postings_table(namespace)
    df = counts_table(namespace)
    for term, _ in counts:
        block = _block_at(conn, table, term, key)
        if block is None:
            continue
        first, kb, vb = block
        keys = np.frombuffer(kb, dtype=_KEY)
        pos = int(np.searchsorted(keys, key))
        if pos >= len(keys) or keys[pos] != key:
            continue
        conn.execute(f"DELETE FROM {table} WHERE term = ? AND first = ?", (term, first))
        conn.execute(f"UPDATE {df} SET n = n - 1 WHERE term = ?", (term,))
        conn.execute(f"DELETE FROM {df} WHERE term = ? AND n <= 0", (term,))
        if len(keys) > 1:  # ``first`` stays: it only bounds the block's range from below
            pairs = np.frombuffer(vb, dtype=_TFDL).reshape(-1, 2)
            _put(conn, table, term, first, np.delete(keys, pos), np.delete(pairs, pos, axis=0))
    conn.execute(f"UPDATE {STATS_TABLE} SET rows = rows - 1, tokens = tokens - ? "
                 "WHERE namespace = ?", (sum(n for _, n in counts), namespace))


def rebuild(conn: sqlite3.Connection, namespace: str) -> None:
    """Fill the namespace's postings from its FTS5 table's index; inside a write.

    Reads the index FTS5 already holds (``fts5vocab``, one row per token
    instance in term, row, offset order) instead of tokenizing every text again.
    """
    table = postings_table(namespace)
    fts = fts_table(namespace)
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"DROP TABLE IF EXISTS {counts_table(namespace)}")
    create(conn, namespace)
    vocab = f"temp.{table}_vocab"
    conn.execute(f"DROP TABLE IF EXISTS {vocab}")
    conn.execute(f"CREATE VIRTUAL TABLE {vocab} USING fts5vocab(main, {fts}, instance)")
    try:
        per_term: list[tuple[str, npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
        cursor = conn.execute(f"SELECT term, doc FROM {vocab}")
        term: str | None = None
        docs: list[int] = []
        while rows := cursor.fetchmany(65_536):
            for t, doc in rows:
                if t != term:
                    if term is not None:
                        per_term.append((term, *_keys_and_tf(docs)))
                    term, docs = t, []
                docs.append(doc)
        if term is not None:
            per_term.append((term, *_keys_and_tf(docs)))
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {vocab}")
    top = max((int(keys[-1]) for _, keys, _ in per_term), default=-1)
    dl = np.zeros(top + 1, dtype=np.int64)
    for _, keys, tf in per_term:
        np.add.at(dl, keys, tf)
    conn.executemany(f"INSERT INTO {counts_table(namespace)} (term, n) VALUES (?, ?)",
                     [(term, len(keys)) for term, keys, _ in per_term])
    for term, keys, tf in per_term:
        pairs = np.stack([tf, dl[keys]], axis=1).astype(_TFDL)
        conn.executemany(
            f"INSERT INTO {table} (term, first, n, keys, tfdl) VALUES (?, ?, ?, ?, ?)",
            [(term, int(keys[s]), len(keys[s:s + BLOCK]),
              keys[s:s + BLOCK].astype(_KEY).tobytes(), pairs[s:s + BLOCK].tobytes())
             for s in range(0, len(keys), BLOCK)])
    count = int(conn.execute(f"SELECT count(*) FROM {fts}").fetchone()[0])
    conn.execute(f"UPDATE {STATS_TABLE} SET rows = ?, tokens = ? WHERE namespace = ?",
                 (count, int(dl.sum()), namespace))


def _keys_and_tf(docs: list[int]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """One term's instance rows (doc per instance, ascending) as keys and counts."""
    keys, tf = np.unique(np.asarray(docs, dtype=np.int64), return_counts=True)
    return keys, tf.astype(np.int64)


# -- reading -----------------------------------------------------------------------------


def stats(conn: sqlite3.Connection, namespace: str) -> tuple[int, int] | None:
    """(rows, tokens) of the namespace's postings, or None if it has none yet."""
    try:
        row = conn.execute(f"SELECT rows, tokens FROM {STATS_TABLE} WHERE namespace = ?",
                           (namespace,)).fetchone()
    except sqlite3.OperationalError:  # no stats table: a catalog not upgraded yet
        return None
    return None if row is None else (int(row[0]), int(row[1]))


def doc_counts(conn: sqlite3.Connection, namespace: str, terms: Sequence[str]) -> dict[str, int]:
    """How many rows hold each term (one query for all of them)."""
    found = dict(conn.execute(
        f"SELECT term, n FROM {counts_table(namespace)} WHERE term IN "
        "(SELECT value FROM json_each(?))", (json.dumps(list(terms)),)))
    return {term: int(found.get(term, 0)) for term in terms}


def _decode(rows: Iterable[tuple[bytes, bytes]]) -> Postings:
    blocks = list(rows)
    keys = np.frombuffer(b"".join(r[0] for r in blocks), dtype=_KEY)
    pairs = np.frombuffer(b"".join(r[1] for r in blocks), dtype=_TFDL).reshape(-1, 2)
    return keys, pairs[:, 0], pairs[:, 1]


def read(conn: sqlite3.Connection, namespace: str, term: str) -> Postings:
    """Every posting of ``term``."""
    return _decode(conn.execute(
        f"SELECT keys, tfdl FROM {postings_table(namespace)} WHERE term = ?", (term,)))


def read_many(conn: sqlite3.Connection, namespace: str,
              terms: Sequence[str]) -> dict[str, Postings]:
    """Every posting of each term, in one query."""
    blocks: dict[str, list[tuple[bytes, bytes]]] = {term: [] for term in terms}
    for term, kb, vb in conn.execute(
            f"SELECT term, keys, tfdl FROM {postings_table(namespace)} WHERE term IN "
            "(SELECT value FROM json_each(?)) ORDER BY term, first",
            (json.dumps(list(blocks)),)):
        blocks[term].append((kb, vb))
    return {term: _decode(rows) for term, rows in blocks.items()}


def read_at(conn: sqlite3.Connection, namespace: str, term: str,
            wanted: npt.NDArray[np.int64]) -> Postings:
    """The postings of ``term`` in the blocks whose key ranges hold ``wanted`` (sorted):
    a superset of the wanted keys' postings, read without the term's other blocks."""
    table = postings_table(namespace)
    firsts = np.fromiter(
        (r[0] for r in conn.execute(f"SELECT first FROM {table} WHERE term = ?", (term,))),
        dtype=np.int64)
    at = np.searchsorted(firsts, wanted, side="right") - 1
    chosen = np.unique(np.where(at < 0, 0, at)) if len(firsts) else at[:0]
    if len(chosen) == len(firsts):
        return read(conn, namespace, term)
    return _decode(conn.execute(
        f"SELECT keys, tfdl FROM {table} WHERE term = ? AND first IN "
        "(SELECT value FROM json_each(?)) ORDER BY first",
        (term, "[" + ",".join(str(int(f)) for f in firsts[chosen]) + "]")))


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's idf of a phrase in ``hits`` of ``rows`` rows (clamped to 1e-6, as FTS5 does)."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0.0 else 1e-6


def bm25_partials(tf: npt.NDArray[np.uint32], dl: npt.NDArray[np.uint32],
                  idf: float | npt.NDArray[np.float64], avgdl: float) -> npt.NDArray[np.float64]:
    """One phrase's share of FTS5's bm25 for each posting (positive: higher is better).

    The counts are exact in float64, so the result is FTS5's double arithmetic."""
    # FTS5's operations in FTS5's order (fts5_aux.c), so the floats are the same
    return idf * ((tf * (BM25_K1 + 1.0)) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * dl / avgdl)))


# -- checking ----------------------------------------------------------------------------


def differences(conn: sqlite3.Connection, namespace: str) -> list[str]:
    """How the namespace's postings differ from its FTS5 index (empty: they agree).

    Reads both whole (tests, stress runs): blocks well formed (keys ascending
    within a block and across a term's blocks, at most 2 x BLOCK entries),
    the same terms, rows, tf and lengths, row counts and totals.
    """
    vocab = f"temp.{postings_table(namespace)}_check"
    conn.execute(f"DROP TABLE IF EXISTS {vocab}")
    conn.execute(f"CREATE VIRTUAL TABLE {vocab} USING fts5vocab(main, "
                 f"{fts_table(namespace)}, instance)")
    want: dict[str, dict[int, int]] = {}
    lengths: dict[int, int] = {}
    try:
        for term, doc in conn.execute(f"SELECT term, doc FROM {vocab}"):
            held = want.setdefault(term, {})
            held[doc] = held.get(doc, 0) + 1
            lengths[doc] = lengths.get(doc, 0) + 1
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {vocab}")
    problems: list[str] = []
    got: dict[str, dict[int, tuple[int, int]]] = {}
    last: dict[str, int] = {}
    for term, first, n, kb, vb in conn.execute(
            f"SELECT term, first, n, keys, tfdl FROM {postings_table(namespace)} "
            "ORDER BY term, first"):
        keys = np.frombuffer(kb, dtype=_KEY)
        pairs = np.frombuffer(vb, dtype=_TFDL).reshape(-1, 2)
        if not n == len(keys) == len(pairs) > 0 or n > 2 * BLOCK:
            problems.append(f"term {term!r}: block at {first} holds {len(keys)} keys, says {n}")
            continue
        if (np.diff(keys) <= 0).any() or keys[0] < first or keys[0] <= last.get(term, -1):
            problems.append(f"term {term!r}: block at {first} out of order")
        last[term] = int(keys[-1])
        got.setdefault(term, {}).update(
            (key, (tf, dl)) for key, (tf, dl) in zip(keys.tolist(), pairs.tolist(), strict=True))
    for term in set(got) | set(want):
        expected = {key: (tf, lengths[key]) for key, tf in want.get(term, {}).items()}
        if got.get(term, {}) != expected:
            problems.append(f"term {term!r}: postings differ from FTS5's")
    counts = dict(conn.execute(f"SELECT term, n FROM {counts_table(namespace)}"))
    if counts != {term: len(held) for term, held in want.items()}:
        problems.append("per-term row counts differ from FTS5's")
    total = int(conn.execute(f"SELECT count(*) FROM {fts_table(namespace)}").fetchone()[0])
    if stats(conn, namespace) != (total, sum(lengths.values())):
        problems.append(f"statistics {stats(conn, namespace)} differ from FTS5's "
                        f"{(total, sum(lengths.values()))}")
    return problems
