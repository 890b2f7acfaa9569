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
``first`` order), ``n`` (entries), ``keys`` (the gaps between ascending keys,
the first one from ``first``), ``tfdl`` (tf and length of each entry). Each
column of a block holds little-endian unsigned integers of one width, the
narrowest of 1, 2, 4 or 8 bytes that holds its values (the width is the
column's length / ``n``): short facts' postings take about 3 bytes (gaps of a
common term and every tf and length: 1 byte each). Decoding a term is a
``frombuffer`` and a ``cumsum`` (:func:`_decode`). Format :data:`FORMAT`;
format ``"1"`` held int64 keys and uint32 pairs, 16 bytes a posting (the
catalog rebuilds older postings when it opens).
Table ``lexdf_<hash>``: per term, how many rows hold it (one seek instead of
summing a common term's blocks). Table ``lexicon_stats``: per namespace, rows
and tokens, FTS5's ``nRow`` and ``nToken``.
"""

from __future__ import annotations

import json
import math
import sqlite3
import struct
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .._recall.ranking import FTS_TOKENIZE
from .fts import fts_table

__all__ = [
    "BLOCK",
    "BM25_B",
    "BM25_K1",
    "FORMAT",
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
FORMAT: Final = "3"  # "2": LEB128 varints (slower to decode), never released
"""The blocks' encoding (catalog meta ``postings``): a change rebuilds every namespace's."""

_KEY: Final = np.dtype(np.int64)
_TFDL: Final = np.dtype(np.uint32)

Postings = tuple[npt.NDArray[np.int64], npt.NDArray[Any], npt.NDArray[Any]]
"""A term's (keys ascending, tf, dl) arrays (tf and dl unsigned, as narrow as stored)."""


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


# -- encoding ----------------------------------------------------------------------------

_CODES: Final = {1: "B", 2: "H", 4: "I", 8: "Q"}  # struct codes of each width
_UINTS: Final = {w: np.dtype(f"<u{w}") for w in _CODES}


def _width(top: int) -> int:
    """The narrowest width (bytes) of unsigned integers up to ``top``."""
    return 1 if top < 0x100 else 2 if top < 0x10000 else 4 if top < 0x100000000 else 8


def _encode_block(first: int, keys: npt.NDArray[np.int64], pairs: npt.NDArray[Any],
                  widths: tuple[int, int] = (1, 1)) -> tuple[bytes, bytes]:
    """A block's ``keys`` (gaps, the first from ``first``) and ``tfdl`` column values, at
    least as wide as ``widths`` (a re-encoded block keeps its term's widths)."""
    gaps = np.diff(np.asarray(keys, dtype=np.int64), prepend=np.int64(first))
    values = np.asarray(pairs, dtype=np.int64).reshape(-1)
    kw = max(widths[0], _width(int(gaps.max())))
    vw = max(widths[1], _width(int(values.max())))
    return gaps.astype(_UINTS[kw]).tobytes(), values.astype(_UINTS[vw]).tobytes()


def _pack(values: Sequence[int], floor: int = 1) -> bytes:
    """``values`` at the narrowest width, at least ``floor`` (the write path's few
    entries: struct, not numpy)."""
    width = max(floor, _width(max(values)))
    return struct.pack(f"<{len(values)}{_CODES[width]}", *values)


def _unpack(data: bytes, count: int) -> tuple[int, ...]:
    return struct.unpack(f"<{count}{_CODES[len(data) // count]}", data)


def _column(data: Sequence[bytes], widths: Sequence[int], counts: npt.NDArray[np.int64],
            dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """Blocks' column values as one array. One ``frombuffer`` when the blocks share a
    width (a term's blocks do unless a later one needed more); else one per width."""
    kinds = set(widths)
    if len(kinds) == 1:
        return np.frombuffer(b"".join(data), dtype=_UINTS[kinds.pop()])
    out = np.empty(int(counts.sum()), dtype=dtype)
    per_block = np.asarray(widths)
    for width in kinds:
        out[np.repeat(per_block == width, counts)] = np.frombuffer(
            b"".join(d for d, w in zip(data, widths, strict=True) if w == width),
            dtype=_UINTS[width])
    return out


def _decode(rows: Iterable[tuple[int, int, bytes, bytes]]) -> Postings:
    """Blocks (first, n, keys, tfdl) of one term, in ``first`` order, as one Postings."""
    blocks = list(rows)
    if not blocks:
        return np.empty(0, _KEY), np.empty(0, _TFDL), np.empty(0, _TFDL)
    if len(blocks) == 1:
        first, n, kb, vb = blocks[0]
        keys = np.frombuffer(kb, dtype=_UINTS[len(kb) // n]).astype(np.int64)
        np.cumsum(keys, out=keys)
        keys += int(first)
        pairs = np.frombuffer(vb, dtype=_UINTS[len(vb) // (2 * n)])
        return keys, pairs[0::2], pairs[1::2]
    counts = np.array([r[1] for r in blocks], dtype=np.int64)
    keys = _column([r[2] for r in blocks], [len(r[2]) // r[1] for r in blocks], counts,
                   _KEY).astype(np.int64)
    np.cumsum(keys, out=keys)
    # tf and lengths as stored (uint8 mostly): bm25_partials computes in float64 anyway
    pairs = _column([r[3] for r in blocks], [len(r[3]) // (2 * r[1]) for r in blocks],
                    2 * counts, _TFDL)
    # each block's gaps start from its own ``first``
    before = np.zeros(len(blocks), dtype=np.int64)
    before[1:] = keys[np.cumsum(counts)[:-1] - 1]
    keys += np.repeat(np.array([r[0] for r in blocks], dtype=np.int64) - before, counts)
    return keys, pairs[0::2], pairs[1::2]


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


def _block_at(conn: sqlite3.Connection, table: str, term: str, key: int
              ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64],
                         tuple[int, int]] | None:
    """The block whose key range holds ``key`` (else the term's first block, if any):
    its ``first``, keys, (tf, dl) pairs and widths."""
    row = conn.execute(
        f"SELECT first, n, keys, tfdl FROM {table} WHERE term = ? AND first <= ? "
        "ORDER BY first DESC LIMIT 1", (term, key)).fetchone()
    if row is None:
        row = conn.execute(f"SELECT first, n, keys, tfdl FROM {table} WHERE term = ? "
                           "ORDER BY first LIMIT 1", (term,)).fetchone()
    if row is None:
        return None
    first, n, kb, vb = int(row[0]), int(row[1]), bytes(row[2]), bytes(row[3])
    keys, tf, dl = _decode([(first, n, kb, vb)])
    return (first, keys, np.stack([tf, dl], axis=1).astype(np.int64),
            (len(kb) // n, len(vb) // (2 * n)))


def _put(conn: sqlite3.Connection, table: str, term: str, first: int,
         keys: npt.NDArray[np.int64], pairs: npt.NDArray[Any],
         widths: tuple[int, int] = (1, 1)) -> None:
    kb, vb = _encode_block(first, keys, pairs, widths)
    conn.execute(f"INSERT INTO {table} (term, first, n, keys, tfdl) VALUES (?, ?, ?, ?, ?)",
                 (term, first, len(keys), kb, vb))


def add(conn: sqlite3.Connection, namespace: str, key: int,
        counts: Sequence[tuple[str, int]]) -> None:
    """Add row ``key`` with its term counts (:meth:`Tokenizer.counts`); inside a write."""
    add_many(conn, namespace, [(key, counts)])


def _append(term: str, first: int, prev: int, entries: Sequence[tuple[int, int, int]],
            kb: bytes = b"", vb: bytes = b"", n: int = 0,
            floor: tuple[int, int] = (1, 1)) -> tuple[str, int, int, bytes, bytes]:
    """A block row: ``entries`` (key, tf, dl) after ``n`` encoded ones whose last key is
    ``prev`` (a new block: ``prev`` = ``first``, at least ``floor`` wide: its term's
    widths). Appended bytes when the new values fit the block's widths, else the block
    re-encoded wider."""
    gaps = [key - last for key, last in zip([e[0] for e in entries],
                                             [prev] + [e[0] for e in entries[:-1]], strict=True)]
    values = [v for e in entries for v in e[1:]]
    if not n:
        return term, first, len(entries), _pack(gaps, floor[0]), _pack(values, floor[1])
    kw, vw = len(kb) // n, len(vb) // (2 * n)
    if _width(max(gaps)) > kw or _width(max(values)) > vw:
        return (term, first, n + len(entries), _pack(list(_unpack(kb, n)) + gaps, kw),
                _pack(list(_unpack(vb, 2 * n)) + values, vw))
    return (term, first, n + len(entries),
            kb + struct.pack(f"<{len(gaps)}{_CODES[kw]}", *gaps),
            vb + struct.pack(f"<{len(values)}{_CODES[vw]}", *values))


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
    lasts = [(str(r[0]), int(r[1]), int(r[2]), bytes(r[3]), bytes(r[4])) for r in conn.execute(
        f"SELECT term, first, n, keys, tfdl FROM {table} WHERE (term, first) IN "
        f"(SELECT term, max(first) FROM {table} WHERE term IN "
        "(SELECT value FROM json_each(?)) GROUP BY term)", (json.dumps(list(per_term)),))]
    last_key = {r[0]: r[1] + sum(_unpack(r[3], r[2])) for r in lasts}
    last_of = {r[0]: r for r in lasts}
    dropped: list[tuple[str, int]] = []
    blocks: list[tuple[str, int, int, bytes, bytes]] = []
    for term, entries in per_term.items():
        entries.sort()
        last = last_of.get(term)
        if last is not None and entries[0][0] <= last_key[term]:
            for key, tf, dl in entries:  # into existing ranges: one at a time
                _insert(conn, table, term, key, np.array([tf, dl], dtype=np.int64))
            continue
        rest: Sequence[tuple[int, int, int]] = entries
        floor = (1, 1)
        if last is not None:  # new blocks are at least as wide as the term's last one
            floor = (len(last[3]) // last[2], len(last[4]) // (2 * last[2]))
            if last[2] < BLOCK:  # room in the last block
                room = BLOCK - last[2]
                dropped.append((term, last[1]))
                blocks.append(_append(term, last[1], last_key[term], entries[:room],
                                      last[3], last[4], last[2]))
                rest = entries[room:]
        for start in range(0, len(rest), BLOCK):
            chunk = rest[start:start + BLOCK]
            blocks.append(_append(term, chunk[0][0], chunk[0][0], chunk, floor=floor))
    conn.executemany(f"DELETE FROM {table} WHERE term = ? AND first = ?", dropped)
    conn.executemany(f"INSERT INTO {table} (term, first, n, keys, tfdl) VALUES (?, ?, ?, ?, ?)",
                     blocks)
    conn.execute(f"UPDATE {STATS_TABLE} SET rows = rows + ?, tokens = tokens + ? "
                 "WHERE namespace = ?", (len(rows), tokens, namespace))


def _insert(conn: sqlite3.Connection, table: str, term: str, key: int,
            entry: npt.NDArray[np.int64]) -> None:
    """One posting into the block whose range holds ``key`` (split past 2 x BLOCK)."""
    block = _block_at(conn, table, term, key)
    if block is None:
        _put(conn, table, term, key, np.array([key], dtype=_KEY), entry.reshape(1, 2))
        return
    first, keys, pairs, widths = block
    if key > int(keys[-1]) and len(keys) >= BLOCK:
        _put(conn, table, term, key, np.array([key], dtype=_KEY), entry.reshape(1, 2), widths)
        return  # after a full block's keys: a new block
    # (a key is never added twice: FTS5 refuses a second row with the same rowid first)
    pos = int(np.searchsorted(keys, key))
    keys = np.insert(keys, pos, key)
    pairs = np.insert(pairs, pos, entry, axis=0)
    conn.execute(f"DELETE FROM {table} WHERE term = ? AND first = ?", (term, first))
    first = min(first, key)
    if len(keys) > 2 * BLOCK:  # grown by inserts in the middle: split in two
        half = len(keys) // 2
        _put(conn, table, term, first, keys[:half], pairs[:half], widths)
        _put(conn, table, term, int(keys[half]), keys[half:], pairs[half:], widths)
    else:
        _put(conn, table, term, first, keys, pairs, widths)


def remove(conn: sqlite3.Connection, namespace: str, key: int,
           counts: Sequence[tuple[str, int]]) -> None:
    """Remove row ``key``, whose text had ``counts``; inside a write."""
    table = postings_table(namespace)
    df = counts_table(namespace)
    for term, _ in counts:
        block = _block_at(conn, table, term, key)
        if block is None:
            continue
        first, keys, pairs, widths = block
        pos = int(np.searchsorted(keys, key))
        if pos >= len(keys) or keys[pos] != key:
            continue
        conn.execute(f"DELETE FROM {table} WHERE term = ? AND first = ?", (term, first))
        conn.execute(f"UPDATE {df} SET n = n - 1 WHERE term = ?", (term,))
        conn.execute(f"DELETE FROM {df} WHERE term = ? AND n <= 0", (term,))
        if len(keys) > 1:  # ``first`` stays: it only bounds the block's range from below
            _put(conn, table, term, first, np.delete(keys, pos), np.delete(pairs, pos, axis=0),
                 widths)
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
        conn.executemany(
            f"INSERT INTO {table} (term, first, n, keys, tfdl) VALUES (?, ?, ?, ?, ?)",
            _blocks_of(term, keys, tf, dl[keys]))
    count = int(conn.execute(f"SELECT count(*) FROM {fts}").fetchone()[0])
    conn.execute(f"UPDATE {STATS_TABLE} SET rows = ?, tokens = ? WHERE namespace = ?",
                 (count, int(dl.sum()), namespace))


def _blocks_of(term: str, keys: npt.NDArray[np.int64], tf: npt.NDArray[np.int64],
               dl: npt.NDArray[np.int64]) -> list[tuple[str, int, int, bytes, bytes]]:
    """A term's postings (keys ascending) as block rows of BLOCK entries, all of the
    term's widest gap's and value's widths (one ``frombuffer`` reads them all)."""
    gaps = np.diff(keys, prepend=keys[:1])
    gaps[::BLOCK] = 0  # each block's first key is its ``first``
    values = np.stack([tf, dl], axis=1).reshape(-1)
    kw, vw = _width(int(gaps.max())), _width(int(values.max()))
    kb, vb = gaps.astype(_UINTS[kw]).tobytes(), values.astype(_UINTS[vw]).tobytes()
    return [(term, int(keys[s]), len(keys[s:s + BLOCK]), kb[s * kw:(s + BLOCK) * kw],
             vb[2 * s * vw:2 * (s + BLOCK) * vw]) for s in range(0, len(keys), BLOCK)]


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


def read(conn: sqlite3.Connection, namespace: str, term: str) -> Postings:
    """Every posting of ``term``."""
    return _decode(conn.execute(
        f"SELECT first, n, keys, tfdl FROM {postings_table(namespace)} WHERE term = ? "
        "ORDER BY first", (term,)))


def read_many(conn: sqlite3.Connection, namespace: str,
              terms: Sequence[str]) -> dict[str, Postings]:
    """Every posting of each term, in one query."""
    wanted = list(dict.fromkeys(terms))
    rows = conn.execute(
        f"SELECT term, first, n, keys, tfdl FROM {postings_table(namespace)} WHERE term IN "
        "(SELECT value FROM json_each(?)) ORDER BY term, first", (json.dumps(wanted),)
    ).fetchall()
    # every term's blocks decoded together (each block starts from its own ``first``),
    # then cut into terms: one decode per query instead of one per word
    keys, tf, dl = _decode([(r[1], r[2], r[3], r[4]) for r in rows])
    ends: dict[str, int] = {}
    total = 0
    for r in rows:
        total += int(r[2])
        ends[r[0]] = total
    found: dict[str, Postings] = {}
    start = 0
    for term, end in ends.items():  # in the rows' order
        found[term] = keys[start:end], tf[start:end], dl[start:end]
        start = end
    return {term: found.get(term) or _decode([]) for term in wanted}


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
        f"SELECT first, n, keys, tfdl FROM {table} WHERE term = ? AND first IN "
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
        if not 0 < n <= 2 * BLOCK or len(kb) // n not in _CODES or len(kb) % n or len(
                vb) // (2 * n) not in _CODES or len(vb) % (2 * n):
            problems.append(f"term {term!r}: block at {first} of {len(kb)} + {len(vb)} "
                            f"bytes says it holds {n}")
            continue
        keys, tf, dl = _decode([(first, n, kb, vb)])
        pairs = np.stack([tf, dl], axis=1)
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
