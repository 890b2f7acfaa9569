"""The catalog's SQL for the namespace log: manifests, reusable pages, merged heads.

Kept apart from catalog.py (memories; FTS and outbox in its mixins) so each file stays small;
:class:`LogTables` works on the same :class:`~walrus_mem._catalog.catalog.Catalog`
connection and transactions.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import manifest_cache
from .catalog import Catalog

__all__ = ["LogSnapshot", "LogTables"]


@dataclass(frozen=True)
class LogSnapshot:
    """What one manifest is built from, read in one transaction."""

    info: sqlite3.Row
    rows: list[sqlite3.Row]  # id, version, blob_id, quilt_patch_id, end_epoch, updated_at, digest
    tombstones: dict[str, int]
    pages: dict[str, tuple[str, str | None, int | None]]  # digest -> (blob, patch, end epoch)
    current_epoch: int | None
    pending: dict[str, Any]  # memory id -> manifest entry (JSON) merged but not fetched yet
    upto: int = 0  # newest dirty-key mark (manifest_cache.py) this snapshot accounts for


PENDING_KEY = "pending_entries:"
"""meta key prefix (+ namespace) of the entries a merge could not fetch yet."""

UNANNOUNCED_KEY = "unannounced_head:"
"""meta key prefix (+ namespace) of this data dir's newest recorded head that is not
yet in heads.sqlite3 and the heads file: set with the manifest, cleared once announced."""


class LogTables:
    """Manifest bookkeeping in the catalog (one instance per Catalog)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def snapshot(self, namespace: str, *, rows: bool = True) -> LogSnapshot:
        """What a manifest is built from; ``rows=False``: without the live rows (the
        incremental path reads only the segments it needs, :meth:`segments`)."""
        cat = self.catalog
        with cat.snapshot() as c:
            info = c.execute("SELECT * FROM namespaces WHERE name = ?", (namespace,)).fetchone()
            live = c.execute(
                "SELECT id, version, blob_id, quilt_patch_id, end_epoch, updated_at, digest "
                "FROM memories WHERE namespace = ? AND status = 'published' ORDER BY key",
                (namespace,),
            ).fetchall() if rows else []
            _, upto = manifest_cache.dirty(c, namespace, keys=False)
            tombstones = {str(r[0]): int(r[1]) for r in c.execute(
                "SELECT memory_id, max(version) FROM versions WHERE namespace = ? "
                "AND event = 'DELETE' GROUP BY memory_id", (namespace,)).fetchall()}
            pages = {
                str(r[0]): (str(r[1]), r[2], r[3]) for r in c.execute(
                    "SELECT digest, blob_id, patch_id, end_epoch FROM manifest_pages "
                    "WHERE namespace = ?", (namespace,),
                ).fetchall()
            }
            epoch_row = c.execute("SELECT value FROM meta WHERE key = 'current_epoch'").fetchone()
            pending_row = c.execute("SELECT value FROM meta WHERE key = ?",
                                    (PENDING_KEY + namespace,)).fetchone()
        return LogSnapshot(info, live, tombstones, pages,
                           int(epoch_row[0]) if epoch_row else None,
                           _pending_json(pending_row[0] if pending_row else None), upto)

    def segments(self, namespace: str) -> tuple[manifest_cache.Segments | None, set[int]]:
        """The last manifest's cached segments and the keys changed since (call inside
        the snapshot the manifest is built from)."""
        with self.catalog.snapshot() as c:
            return manifest_cache.load(c, namespace), manifest_cache.dirty(c, namespace)[0]

    def rows_between(self, namespace: str, after: int | None,
                     upto: int | None) -> list[sqlite3.Row]:
        with self.catalog.snapshot() as c:
            return manifest_cache.rows_between(c, namespace, after, upto)

    def lacks_digests(self, namespace: str) -> bool:
        """A row the next manifest reads may lack its digest: no cached segments (every
        row is read), or a changed row without one."""
        with self.catalog.snapshot() as c:
            if manifest_cache.load(c, namespace) is None:
                return True
            return c.execute(
                "SELECT 1 FROM manifest_dirty d JOIN memories m ON m.key = d.key "
                "WHERE d.namespace = ? AND m.digest IS NULL LIMIT 1", (namespace,)
            ).fetchone() is not None

    def expires_by(self, namespace: str, epoch: int | None) -> bool:
        """A published row of ``namespace`` ends at or before ``epoch``."""
        if epoch is None:
            return False
        row = self.catalog.query_one(
            "SELECT 1 FROM memories WHERE namespace = ? AND end_epoch <= ? "
            "AND status = 'published' LIMIT 1", (namespace, epoch))
        return row is not None

    def pending(self, namespace: str) -> dict[str, Any]:
        """Memory id -> manifest entry (JSON) of the memories a merge took in but could
        not fetch yet (404 on every aggregator, or a failed read): retried by every
        pull and sync, and listed in this data dir's manifests meanwhile."""
        row = self.catalog.query_one("SELECT value FROM meta WHERE key = ?",
                                     (PENDING_KEY + namespace,))
        return _pending_json(row[0] if row else None)

    def set_pending(self, namespace: str, entries: dict[str, Any]) -> None:
        with self.catalog.write() as c:
            if entries:
                c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                          (PENDING_KEY + namespace, json.dumps(entries, sort_keys=True)))
            else:
                c.execute("DELETE FROM meta WHERE key = ?", (PENDING_KEY + namespace,))

    def drop_page(self, namespace: str, digest: str) -> None:
        """Forget a cached page location that failed verification."""
        with self.catalog.write() as c:
            c.execute("DELETE FROM manifest_pages WHERE namespace = ? AND digest = ?",
                      (namespace, digest))

    def record_manifest(
        self,
        namespace: str,
        *,
        seq: int,
        blob_id: str,
        head: str,
        parents: Sequence[str],
        entries: int,
        pages: int,
        end_epoch: int | None,
        new_pages: Sequence[tuple[str, str, str | None, int | None]],
        writes_seen: int,
        registered_epoch: int | None,
        announce: dict[str, Any],
        segments: manifest_cache.Segments | None = None,
        upto: int = 0,
    ) -> None:
        """A manifest became the namespace's head: record it and its new pages (and its
        ``segments``, cached for the next one, clearing the dirty marks up to ``upto``), and
        ``announce`` (what :meth:`unannounced` returns) until :meth:`announced`: a
        process killed before it wrote the heads file announces it at the next sync."""
        now = time.time()
        cat = self.catalog
        with cat.write() as c:
            c.executemany(
                "INSERT INTO manifest_pages (namespace, digest, blob_id, patch_id, end_epoch) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, digest) DO UPDATE SET "
                "blob_id = excluded.blob_id, patch_id = excluded.patch_id, "
                "end_epoch = excluded.end_epoch",
                [(namespace, d, b, p, e) for d, b, p, e in new_pages],
            )
            c.execute(
                "INSERT OR REPLACE INTO manifests (namespace, seq, blob_id, prev_blob_id, "
                "entries, pages, at, end_epoch, head, parents) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?)",
                (namespace, seq, blob_id, parents[0] if parents else None, entries, pages, now,
                 end_epoch, head, json.dumps(list(parents))),
            )
            c.execute(
                "UPDATE namespaces SET manifest_blob_id = ?, manifest_seq = ?, manifest_at = ?, "
                "log_heads = ?, writes_since_manifest = max(writes_since_manifest - ?, 0) "
                "WHERE name = ?",
                (head, seq, now, json.dumps([head]), writes_seen, namespace),
            )
            c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                      (UNANNOUNCED_KEY + namespace, json.dumps(announce, sort_keys=True)))
            # the segments of this manifest (None: not kept) and the changes it covers
            manifest_cache.save(c, namespace, segments, upto)
            cat.note_epoch(registered_epoch)

    def unannounced(self, namespace: str) -> dict[str, Any] | None:
        """The head this data dir recorded for ``namespace`` and has not announced yet
        (``head``, ``writer``, ``parents``, ``origins``), or None."""
        row = self.catalog.query_one("SELECT value FROM meta WHERE key = ?",
                                     (UNANNOUNCED_KEY + namespace,))
        value: Any = json.loads(row[0]) if row else None
        return value if isinstance(value, dict) and isinstance(value.get("head"), str) else None

    def announced(self, namespace: str, head: str) -> None:
        """``head`` is in heads.sqlite3 and the heads file (a newer one stays pending)."""
        with self.catalog.write() as c:
            c.execute("DELETE FROM meta WHERE key = ? AND json_extract(value, '$.head') = ?",
                      (UNANNOUNCED_KEY + namespace, head))

    def merged_heads(self, namespace: str) -> list[str]:
        """Head references the local state of ``namespace`` contains."""
        row = self.catalog.query_one("SELECT log_heads FROM namespaces WHERE name = ?",
                                     (namespace,))
        if row is None or row[0] is None:
            return []
        value: Any = json.loads(row[0])
        return [str(h) for h in value] if isinstance(value, list) else []

    def set_head_state(self, namespace: str, heads: Sequence[str], *, ahead: int) -> None:
        """After a complete merge: the local state contains ``heads`` (newest first)
        plus ``ahead`` changes no manifest lists yet."""
        seq = max((int(h.split(".")[1]) for h in heads), default=0)
        with self.catalog.write() as c:
            c.execute(
                "UPDATE namespaces SET log_heads = ?, manifest_blob_id = ?, "
                "manifest_seq = max(manifest_seq, ?), "
                "writes_since_manifest = writes_since_manifest + ? WHERE name = ?",
                (json.dumps(list(heads)), heads[0] if heads else None, seq, ahead, namespace))

    def restoring(self, namespace: str) -> dict[str, Any] | None:
        """The unfinished restore / pull of ``namespace`` (None when there is none)."""
        row = self.catalog.query_one("SELECT restoring FROM namespaces WHERE name = ?",
                                     (namespace,))
        if row is None or row[0] is None:
            return None
        value: Any = json.loads(row[0])
        return value if isinstance(value, dict) else None

    def set_restoring(self, namespace: str, state: dict[str, Any] | None) -> None:
        with self.catalog.write() as c:
            c.execute("UPDATE namespaces SET restoring = ? WHERE name = ?",
                      (None if state is None else json.dumps(state, sort_keys=True), namespace))

    def fill_digests(self, pairs: Sequence[tuple[str, str]]) -> None:
        """(digest, memory id): digests computed for rows that had none."""
        with self.catalog.write() as c:
            c.executemany("UPDATE memories SET digest = ? WHERE id = ?", pairs)


def _pending_json(text: str | None) -> dict[str, Any]:
    value: Any = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {}
