"""What the last manifest's pages were made of, so the next one costs what changed.

A manifest lists every live memory of a namespace in key order, cut into pages by
content-defined chunking (``_log/manifest.py``): a page ends after an entry whose id
hash hits the target, or at ``PAGE_MAX`` entries. After such a *natural* boundary
the chunking starts afresh, so the run of entries between two natural boundaries (a
*segment*) is paged the same whatever comes before or after it. This module keeps,
per namespace, the segments of the last published manifest (the key of each
segment's boundary entry and its pages' digests and sizes) and records, with SQLite
triggers on ``memories``, every key whose manifest entry may have changed since.
The next manifest re-reads only the segments holding such a key (or whose pages
cannot be reused) plus the tail after the last boundary: ``_log/segments.py``.

The triggers catch every write path (publish, renewal, merge, rotation, forget,
repair) without each having to remember to mark its rows. When the triggers are
(re)created, which means they were missing while rows may have changed (a new or
upgraded catalog, a table rebuilt by a migration), every namespace's cached
segments are dropped: its next manifest reads everything once, as before.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

__all__ = ["CACHE_KEY", "ENTRY_COLUMNS", "Segments", "dirty", "drop_all", "ensure", "forget",
           "load", "rows_between", "save"]

Segments = list[tuple[int, list[tuple[str, int]]]]
"""(key of the segment's boundary entry, [(page digest, entry count)]) in key order."""

CACHE_KEY: Final = "manifest_segments:"  # meta key prefix (+ namespace): the cached segments
FORMAT: Final = 1
ENTRY_COLUMNS: Final = ("key, id, version, blob_id, quilt_patch_id, end_epoch, updated_at, "
                        "digest")
_WATCHED: Final = ("id, namespace, version, blob_id, quilt_patch_id, end_epoch, updated_at, "
                   "digest, status")
_TRIGGERS: Final = {
    "manifest_dirty_insert": "AFTER INSERT ON memories BEGIN "
    "INSERT INTO manifest_dirty (namespace, key) VALUES (new.namespace, new.key); END",
    "manifest_dirty_delete": "AFTER DELETE ON memories BEGIN "
    "INSERT INTO manifest_dirty (namespace, key) VALUES (old.namespace, old.key); END",
    "manifest_dirty_update": f"AFTER UPDATE OF {_WATCHED} ON memories BEGIN "
    "INSERT INTO manifest_dirty (namespace, key) VALUES (old.namespace, old.key); "
    "INSERT INTO manifest_dirty (namespace, key) SELECT new.namespace, new.key "
    "WHERE new.namespace != old.namespace OR new.key != old.key; END",
}


def ensure(conn: sqlite3.Connection) -> None:
    """Create the dirty-key table and its triggers (inside a write transaction); when a
    trigger was missing, drop every cached segment list (changes may have gone unseen)."""
    conn.execute("CREATE TABLE IF NOT EXISTS manifest_dirty (seq INTEGER PRIMARY KEY "
                 "AUTOINCREMENT, namespace TEXT NOT NULL, key INTEGER NOT NULL)")
    conn.execute("CREATE INDEX IF NOT EXISTS manifest_dirty_ns ON manifest_dirty "
                 "(namespace, seq)")
    present = {str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memories'")}
    if all(name in present for name in _TRIGGERS):
        return
    for name, body in _TRIGGERS.items():
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        conn.execute(f"CREATE TRIGGER {name} {body}")
    drop_all(conn)


def drop_all(conn: sqlite3.Connection) -> None:
    """Forget every namespace's cached segments and dirty keys (inside a write)."""
    conn.execute("DELETE FROM meta WHERE key >= ? AND key < ?", (CACHE_KEY, CACHE_KEY[:-1] + ";"))
    conn.execute("DELETE FROM manifest_dirty")


def load(conn: sqlite3.Connection, namespace: str) -> Segments | None:
    """The cached segments of ``namespace`` ((boundary key, [(page digest, entries)])
    in key order), or None when there are none (or they are unreadable)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (CACHE_KEY + namespace,)
                       ).fetchone()
    if row is None:
        return None
    try:
        data: Any = json.loads(row[0])
        if data.get("format") != FORMAT:
            return None
        segments = [(int(end), [(str(d), int(n)) for d, n in pages])
                    for end, pages in data["segments"]]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    ends = [end for end, _ in segments]
    return segments if ends == sorted(set(ends)) else None


def dirty(conn: sqlite3.Connection, namespace: str, *, keys: bool = True
          ) -> tuple[set[int], int]:
    """Keys of ``namespace`` changed since the cached segments (``keys=False``: not
    read), and the newest mark's seq (what :func:`save` clears up to)."""
    upto = int(conn.execute("SELECT coalesce(max(seq), 0) FROM manifest_dirty").fetchone()[0])
    if not keys:
        return set(), upto
    changed = {int(r[0]) for r in conn.execute(
        "SELECT key FROM manifest_dirty WHERE namespace = ? AND seq <= ?", (namespace, upto))}
    return changed, upto


def rows_between(conn: sqlite3.Connection, namespace: str, after: int | None,
                 upto: int | None) -> list[sqlite3.Row]:
    """Published rows of ``namespace`` with ``after < key <= upto`` (None: unbounded),
    in key order: the columns a manifest entry is made of."""
    low = -(2**63) if after is None else after
    high = 2**63 - 1 if upto is None else upto
    return conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM memories WHERE namespace = ? AND status = 'published' "
        "AND key > ? AND key <= ? ORDER BY key", (namespace, low, high)).fetchall()


def save(conn: sqlite3.Connection, namespace: str, segments: Segments | None,
         upto: int) -> None:
    """Record the segments of the manifest just published (None: none kept) and clear the
    dirty marks it accounted for (inside the write that records the manifest)."""
    if segments is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (CACHE_KEY + namespace,))
    else:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (
            CACHE_KEY + namespace,
            json.dumps({"format": FORMAT, "segments": [[end, [list(p) for p in pages]]
                                                       for end, pages in segments]},
                       separators=(",", ":"))))
    conn.execute("DELETE FROM manifest_dirty WHERE namespace = ? AND seq <= ?", (namespace, upto))


def forget(conn: sqlite3.Connection, namespace: str) -> None:
    """Drop ``namespace``'s cached segments (its next manifest reads every row)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (CACHE_KEY + namespace,))
