"""The catalog's FTS5 queries: bm25 search and scoring, per-term document counts.

A mixin of :class:`~walrus_mem._catalog.catalog.Catalog` (which creates and fills the
tables); one FTS5 table per namespace, named by :func:`fts_table`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from typing import Final

from .guard import CatalogPart, _guarded

__all__ = ["FtsQueries", "fts_table"]

_DF_CACHE_MAX: Final = 4096  # cached term counts per namespace (fts_doc_counts)


def fts_table(namespace: str) -> str:
    """Name of a namespace's FTS5 table (a hash: safe in SQL, reveals no name)."""
    digest = hashlib.blake2b(namespace.encode(), digest_size=12, person=b"walrusmem.fts")
    return f"fts_{digest.hexdigest()}"


class FtsQueries(CatalogPart):
    """Lexical search over a namespace's FTS5 table."""

    # Set by Catalog.__init__: namespace -> term -> matching rows, and the
    # (data_version, total_changes) pair they are valid for.
    _df_cache: dict[str, dict[str, int]]
    _ns_rows: dict[str, sqlite3.Row | None]
    _df_version: tuple[int, int] | None
    _lex_counts: dict[str, dict[str, int]]
    _lex_stats: dict[str, tuple[int, int] | None]
    _reading: bool
    _read_checked: bool

    def _fresh_caches(self) -> None:
        """Drop the cached counts and statistics when any connection (this one included)
        changed the file's content since they were read; call under the lock. Once per
        read snapshot: nothing changes inside one."""
        if self._reading:
            if self._read_checked:
                return
            self._read_checked = True
        version = (int(self.conn.execute("PRAGMA data_version").fetchone()[0]),
                   self.conn.total_changes)
        if self._df_version != version:
            self._df_cache.clear()
            self._lex_counts.clear()
            self._lex_stats.clear()
            self._ns_rows.clear()
            self._df_version = version

    @_guarded
    def fts_search(self, namespace: str, match: str, limit: int) -> list[tuple[int, float]]:
        """Top ``limit`` rows by SQLite's bm25 (lower is better), as (key, bm25)."""
        table = fts_table(namespace)
        rows = self.query(
            f"SELECT rowid, bm25({table}) AS score FROM {table} WHERE {table} MATCH ? "
            "ORDER BY score LIMIT ?",
            (match, limit),
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    @_guarded
    def fts_matches(self, namespace: str, match: str) -> list[tuple[int, float]]:
        """Every row matching ``match`` with its bm25 (lower is better), as (key, bm25),
        best first (ties: lower key first).

        For queries whose words are in few rows: SQLite scores every match even
        for ``ORDER BY ... LIMIT``, so fetching them all costs the same scoring
        and also answers the bm25 of any other candidate (absent = no match).
        SQLite sorts them (in C, cheaper than a Python sort of the tuples).
        """
        table = fts_table(namespace)
        with self._lock:
            rows: list[tuple[int, float]] = self.conn.execute(
                f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY 2, 1",
                (match,),
            ).fetchall()
        return rows

    @_guarded
    def fts_doc_counts(self, namespace: str, terms: Sequence[str]) -> dict[str, int]:
        """How many rows of the namespace match each single FTS5 term (cached).

        A term is one quoted word as :func:`~walrus_mem._recall.ranking.fts_query` writes
        it. Counting visits the term's doclist without scoring it, so it is a
        few times cheaper than the bm25 query. Counts are cached per namespace
        and dropped when any connection (this one included) changes the file's
        content; a slightly stale count only steers candidate selection.
        """
        with self._lock:
            self._fresh_caches()
            cache = self._df_cache.setdefault(namespace, {})
            table = fts_table(namespace)
            for term in terms:
                if term not in cache:
                    if len(cache) >= _DF_CACHE_MAX:
                        cache.clear()
                    row = self.conn.execute(
                        f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (term,)
                    ).fetchone()
                    cache[term] = int(row[0])
            return {term: cache[term] for term in terms}

    @_guarded
    def fts_scores(self, namespace: str, match: str, keys: Sequence[int]) -> dict[int, float]:
        """bm25 of the given keys that match ``match`` (absent keys do not match)."""
        table = fts_table(namespace)
        rows = self.query(
            # "+rowid": check the keys on each match instead of one FTS5 query per key,
            # which is ~5x faster for a few dozen keys.
            f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? AND +rowid IN "
            "(SELECT value FROM json_each(?))",
            (match, json.dumps([int(k) for k in keys])),
        )
        return {int(r[0]): float(r[1]) for r in rows}
