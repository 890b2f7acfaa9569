"""The catalog's read-only queries over memories, their history and tombstones,
used by sync, restore, expiry, rotation and integrity checks.

A mixin of :class:`~walrus_mem._catalog.catalog.Catalog`; :data:`MEMORY_COLUMNS` is the
column list every query of whole ``memories`` rows selects.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from .guard import CatalogPart, _guarded
from .held import digest_of, resolve_sealed

__all__ = ["HISTORY_NOW", "MEMORY_COLUMNS", "MemoryQueries"]

MEMORY_COLUMNS: Final = (
    "key, id, namespace, text, metadata, category, importance, created_at, updated_at, "
    "expires_at, version, status, blob_id, quilt_patch_id, end_epoch"
)
# The history row of a live memory's current version is the memory row itself while its
# ``event`` is set (schema 8): ``versions`` holds superseded versions, CONFLICT losers and
# DELETE tombstones. These are its columns in ``versions``' order and names.
HISTORY_NOW: Final = (
    "SELECT id AS memory_id, namespace, version, event, text, metadata, event_at AS at, "
    "blob_id, quilt_patch_id, end_epoch, deletable FROM memories"
)
_HISTORY_COLUMNS: Final = (
    "memory_id, namespace, version, event, text, metadata, at, blob_id, quilt_patch_id, "
    "end_epoch, deletable"
)


class MemoryQueries(CatalogPart):
    """Reads of ``memories`` and ``versions`` that change nothing."""

    @_guarded
    def is_tombstoned(self, namespace: str, memory_id: str) -> bool:
        # The ``+`` keeps SQLite on the primary key (memory_id, version): a few rows of
        # one memory. Left to itself it picked the (namespace, event) index, i.e. read
        # every tombstone of the namespace per call (record_location asks per memory).
        return self.query_one(
            "SELECT 1 FROM versions WHERE memory_id = ? AND +namespace = ? "
            "AND +event = 'DELETE'",
            (memory_id, namespace),
        ) is not None

    @_guarded
    def tombstones(self, namespace: str) -> dict[str, int]:
        """Forgotten memory id -> the version of its DELETE tombstone."""
        return {str(r[0]): int(r[1]) for r in self.query(
            "SELECT memory_id, max(version) FROM versions WHERE namespace = ? "
            "AND event = 'DELETE' GROUP BY memory_id", (namespace,))}

    @_guarded
    def live_versions_in_blob(self, blob_id: str) -> int:
        """Live memories with any version stored in ``blob_id`` (a shared quilt)."""
        row = self.query_one(
            "SELECT (SELECT count(*) FROM versions v JOIN memories m ON m.id = v.memory_id "
            "WHERE v.blob_id = ?) + (SELECT count(*) FROM memories WHERE blob_id = ? "
            "AND event IS NOT NULL)", (blob_id, blob_id),
        )
        return int(row[0]) if row else 0

    @_guarded
    def memory_ids(self, namespace: str, *, published_only: bool = False) -> list[str]:
        """Live memory ids in key order."""
        extra = " AND status = 'published'" if published_only else ""
        return [str(r[0]) for r in self.query(
            f"SELECT id FROM memories WHERE namespace = ?{extra} ORDER BY key", (namespace,))]

    @_guarded
    def sealed_of(self, namespace: str, memory_id: str) -> tuple[bytes, int] | None:
        """(sealed bytes, version) of a memory's current version, if it has them."""
        row = self.query_one(
            "SELECT sealed, version, blob_id, quilt_patch_id, digest FROM memories "
            "WHERE id = ? AND namespace = ?", (memory_id, namespace),
        )
        if row is None:
            return None
        data = resolve_sealed(self.conn, row[0], row[2], row[3], row[4])  # held.py
        return None if data is None else (data, int(row[1]))

    @_guarded
    def sealed_and_digest(self, namespace: str,
                          memory_id: str) -> tuple[bytes | None, str | None]:
        """(sealed bytes, their digest) of a memory's current version; (None, None) if it
        has none (the relayer's copy gone or changed: held.py)."""
        row = self.query_one(
            "SELECT sealed, digest, blob_id, quilt_patch_id FROM memories WHERE id = ? "
            "AND namespace = ?", (memory_id, namespace))
        if row is None:
            return None, None
        data = resolve_sealed(self.conn, row[0], row[2], row[3], row[1])
        if data is None:
            return None, None
        return data, row[1] or digest_of(data)

    def sealed_from_row(self, row: sqlite3.Row) -> bytes | None:
        """The sealed bytes of a ``memories`` row read with its ``sealed``, ``blob_id``,
        ``quilt_patch_id`` and ``digest`` columns (held.py: the relayer's copy when the
        row keeps none)."""
        return resolve_sealed(self.conn, row["sealed"], row["blob_id"], row["quilt_patch_id"],
                              row["digest"])

    @_guarded
    def newest_first(self, namespace: str, cursor: tuple[float, int] | None,
                     limit: int = 500) -> list[sqlite3.Row]:
        """One page of memories, newest first, after ``cursor`` (created_at, key)."""
        if cursor is None:
            return self.query(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ? "
                "ORDER BY created_at DESC, key DESC LIMIT ?", (namespace, limit))
        return self.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ? AND "
            "(created_at < ? OR (created_at = ? AND key < ?)) "
            "ORDER BY created_at DESC, key DESC LIMIT ?",
            (namespace, cursor[0], cursor[0], cursor[1], limit))

    @_guarded
    def had_version(self, namespace: str, memory_id: str, version: int,
                    blob_id: str | None, patch_id: str | None) -> bool:
        """Whether this memory's own history (not a CONFLICT loser) held that version
        in that blob: then the current version descends from it."""
        if blob_id is None:
            return False
        args = (memory_id, namespace, version, blob_id, patch_id)
        return self.query_one(
            "SELECT 1 FROM versions WHERE memory_id = ? AND namespace = ? AND version = ? "
            "AND event != 'CONFLICT' AND blob_id = ? AND quilt_patch_id IS ? UNION ALL "
            "SELECT 1 FROM memories WHERE id = ? AND namespace = ? AND version = ? "
            "AND event IS NOT NULL AND event != 'CONFLICT' AND blob_id = ? "
            "AND quilt_patch_id IS ?", args + args) is not None

    @_guarded
    def history_rows(self, namespace: str, memory_id: str) -> list[sqlite3.Row]:
        return self.query(
            f"SELECT * FROM (SELECT {_HISTORY_COLUMNS} FROM versions WHERE memory_id = ? "
            f"AND namespace = ? UNION ALL {HISTORY_NOW} WHERE id = ? AND namespace = ? "
            "AND event IS NOT NULL) "
            "ORDER BY version, CASE event WHEN 'CONFLICT' THEN 0 ELSE 1 END, at",
            (memory_id, namespace, memory_id, namespace),
        )

    @_guarded
    def has_end_epochs(self, namespace: str | None) -> bool:
        """Some memory (of ``namespace``, or any) has a blob with an end epoch."""
        if namespace is None:
            row = self.query_one("SELECT 1 FROM memories WHERE end_epoch IS NOT NULL LIMIT 1")
        else:
            row = self.query_one("SELECT 1 FROM memories WHERE namespace = ? AND end_epoch "
                                 "IS NOT NULL LIMIT 1", (namespace,))
        return row is not None

    @_guarded
    def expiring(self, namespace: str | None, limit_epoch: int) -> list[sqlite3.Row]:
        """Memories whose blob ends at or before ``limit_epoch`` (all namespaces if None)."""
        if namespace is None:
            return self.query(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE end_epoch IS NOT NULL "
                "AND end_epoch <= ? ORDER BY end_epoch, key", (limit_epoch,))
        return self.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ? AND end_epoch IS NOT "
            "NULL AND end_epoch <= ? ORDER BY end_epoch, key", (namespace, limit_epoch))

    @_guarded
    def texts_after(self, namespace: str, key: int, limit: int = 512) -> list[sqlite3.Row]:
        """(key, text) of memories after ``key``, in key order (re-embedding)."""
        return self.query(
            "SELECT key, text FROM memories WHERE namespace = ? AND key > ? ORDER BY key "
            "LIMIT ?", (namespace, key, limit))

    @_guarded
    def versions_now(self, namespace: str) -> dict[str, tuple[int, float, str | None]]:
        """Live memory id -> (version, updated_at, digest of the sealed bytes)."""
        return {str(r[0]): (int(r[1]), float(r[2]), r[3]) for r in self.query(
            "SELECT id, version, updated_at, digest FROM memories WHERE namespace = ?",
            (namespace,))}

    @_guarded
    def sealed_without_digest(self, namespace: str) -> list[tuple[str, bytes]]:
        """(memory id, sealed bytes) of rows whose digest is not computed yet."""
        return [(str(r[0]), bytes(r[1])) for r in self.query(
            "SELECT id, sealed FROM memories WHERE namespace = ? AND digest IS NULL "
            "AND sealed IS NOT NULL", (namespace,))]
