"""The catalog's write path for memories: insert, new versions, published locations,
history rows and forgets (the SQL of Memory).

A mixin of :class:`~walrus_mem._catalog.catalog.Catalog`; callers hold ``write()``
around multi-step changes.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._walrus.epoch_guard import EpochGuard, plausible_end
from ..errors import LocalStoreError
from .guard import CatalogPart, _guarded
from .held import shed_held
from .vectors import VECTOR_COLUMNS, resolve_vectors, stored_vector

__all__ = ["MemoryWrites", "move_object_ids", "note_object"]

_BLOB_OBJECTS: Final = ("CREATE TABLE IF NOT EXISTS blob_objects (blob_id TEXT PRIMARY KEY, "
                        "object_id TEXT NOT NULL) WITHOUT ROWID")
"""The Sui Blob object of each blob the store answered with one: kept once per blob (a
quilt holds up to 666 memories), not in every row (``memories.object_id``, 66 B of hex a
row, read by nothing; NULL since issue 28's footprint work). Made on first use; older
walrus_mem ignores it."""


def note_object(c: sqlite3.Connection, blob_id: str, object_id: str) -> None:
    """Record the Sui object a store answer named for ``blob_id`` (the latest wins)."""
    c.execute(_BLOB_OBJECTS)
    c.execute("INSERT OR REPLACE INTO blob_objects (blob_id, object_id) VALUES (?, ?)",
              (blob_id, object_id))


def move_object_ids(c: sqlite3.Connection) -> int:
    """Move the object ids rows written before still hold into ``blob_objects`` (one per
    blob; a blob's own entry wins) and empty them; returns the rows emptied. ``compact``
    runs it before its VACUUM."""
    c.execute(_BLOB_OBJECTS)
    c.execute("INSERT OR IGNORE INTO blob_objects (blob_id, object_id) SELECT blob_id, "
              "max(object_id) FROM memories WHERE object_id IS NOT NULL AND blob_id IS NOT "
              "NULL GROUP BY blob_id")
    return c.execute("UPDATE memories SET object_id = NULL WHERE object_id IS NOT NULL").rowcount

_MEMORY_DEFAULTS: Final[dict[str, Any]] = {
    "blob_id": None, "quilt_patch_id": None, "end_epoch": None, "digest": None,
    "status": "queued", "expires_at": None, "category": None,
}


class MemoryWrites(CatalogPart):
    """Changes to ``memories`` and their ``versions`` history, FTS and change log rows.

    Declares (for mypy only) what Catalog and its other mixins define and the writes
    call, so this module needs no import of catalog.py.
    """

    epoch_guard: EpochGuard | None

    if TYPE_CHECKING:
        def fts_add(self, namespace: str, key: int, text: str) -> None: ...

        def fts_remove(self, namespace: str, key: int, text: str) -> None: ...

        def note_epoch(self, epoch: int | None, *, at: float | None = None,
                       trusted: bool = False) -> None: ...

        def is_tombstoned(self, namespace: str, memory_id: str) -> bool: ...

        def _drop_empty_outbox(self, namespace: str) -> None: ...

    @_guarded
    def insert_memory(self, namespace: str, row: Mapping[str, Any], *, event: str,
                      at: float, carried: bool = False) -> int | None:
        """Insert a live memory (+ FTS, change log, history row); None if its text or id exists.

        ``row`` holds the ``memories`` columns: id, text, metadata (JSON), category,
        importance, created_at, updated_at, expires_at, version, dedupe_hash,
        status, sealed, vector and optionally blob_id, quilt_patch_id,
        end_epoch, digest. ``carried``: the vector was taken from ``sealed`` by the
        caller (vectors.stored_vector).
        """
        values = {**_MEMORY_DEFAULTS, **row}
        with self.write() as c:
            vector = stored_vector(c, namespace, values["sealed"], values["vector"],
                                   carried=carried)
            # The row is its current version's history row (event, event_at), unless
            # ``versions`` holds one at that version and event already (a forgotten id's
            # blanked history): that one stays the history, as INSERT OR IGNORE kept it.
            held = c.execute(
                "SELECT 1 FROM versions WHERE memory_id = ? AND version = ? AND event = ?",
                (values["id"], values["version"], event)).fetchone() is not None
            cur = c.execute(
                "INSERT INTO memories (id, namespace, text, metadata, category, importance, "
                "created_at, updated_at, expires_at, version, dedupe_hash, status, blob_id, "
                "quilt_patch_id, end_epoch, sealed, vector, digest, event, event_at) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (values["id"], namespace, values["text"], values["metadata"],
                 values["category"], values["importance"], values["created_at"],
                 values["updated_at"], values["expires_at"], values["version"],
                 values["dedupe_hash"], values["status"], values["blob_id"],
                 values["quilt_patch_id"], values["end_epoch"], values["sealed"],
                 vector, values["digest"], None if held else event, None if held else at),
            )
            if cur.rowcount == 0:
                return None
            key = int(cur.lastrowid or 0)
            self.fts_add(namespace, key, str(values["text"]))
            c.execute("INSERT INTO changes (namespace, key) VALUES (?, ?)", (namespace, key))
            return key

    @_guarded
    def record_location(self, namespace: str, versions: Mapping[str, int],
                        locations: Mapping[str, str | None], blob: Any,
                        *, only_if_longer: Mapping[str, int | None] | None = None,
                        batch_id: int | None = None) -> dict[str, int | None]:
        """Record where memory versions now live (a store result ``blob``).

        Marks them published, updates their history rows, drops them from the
        outbox and counts them as manifest-worthy writes. With ``only_if_longer``
        (memory id -> current end epoch) a memory whose current blob already
        lasts longer keeps it. Returns memory id -> end epoch now in effect.
        """
        deletable = None if blob.deletable is None else int(blob.deletable)
        end_epoch = plausible_end(self.epoch_guard, blob)
        result: dict[str, int | None] = {}
        placed: list[tuple[str, int]] = []
        with self.write() as c:
            for mid, patch in locations.items():
                version = versions[mid]
                if only_if_longer is not None:
                    old_end = only_if_longer.get(mid)
                    if old_end is not None and end_epoch is not None and old_end >= end_epoch:
                        result[mid] = int(old_end)
                        continue
                c.execute(
                    "UPDATE memories SET status = 'published', blob_id = ?, quilt_patch_id = ?, "
                    "object_id = NULL, end_epoch = ?, deletable = ? WHERE id = ? AND version = ?",
                    (blob.blob_id, patch, end_epoch, deletable, mid, version),
                )
                c.execute(
                    "UPDATE versions SET blob_id = ?, quilt_patch_id = ?, end_epoch = ?, "
                    "deletable = ? WHERE memory_id = ? AND version = ? AND event != 'CONFLICT'",
                    (blob.blob_id, patch, end_epoch, deletable, mid, version),
                )
                c.execute("DELETE FROM outbox_items WHERE memory_id = ? AND version = ?",
                          (mid, version))
                if self.is_tombstoned(namespace, mid):  # forgotten while it was being stored
                    c.execute("INSERT OR IGNORE INTO pending_deletions (blob_id, namespace, "
                              "deletable, at) VALUES (?, ?, ?, ?)",
                              (blob.blob_id, namespace, deletable, time.time()))
                result[mid] = end_epoch
                placed.append((mid, version))
            if placed and blob.object_id is not None:
                note_object(c, str(blob.blob_id), str(blob.object_id))
            if placed:  # held.py: the embedded relayer's copy replaces the row's
                wanted = dict(placed)
                keys = [int(r[0]) for r in c.execute(
                    "SELECT key, id, version FROM memories WHERE id IN "
                    "(SELECT value FROM json_each(?))", (json.dumps(list(wanted)),)).fetchall()
                    if wanted.get(str(r[1])) == int(r[2])]
                shed_held(c, keys=keys)
            if batch_id is not None:
                c.execute("DELETE FROM outbox WHERE id = ?", (batch_id,))
            self._drop_empty_outbox(namespace)
            self.bump_writes(namespace, len(locations))
            self.note_epoch(blob.registered_epoch)
        return result

    @_guarded
    def bump_writes(self, namespace: str, count: int) -> None:
        """Count changes a future manifest must carry."""
        with self.write() as c:
            c.execute(
                "UPDATE namespaces SET writes_since_manifest = writes_since_manifest + ? "
                "WHERE name = ?", (count, namespace),
            )

    @_guarded
    def replace_version(self, namespace: str, key: int, row: Mapping[str, Any], *,
                        vector: bytes | None, event: str, at: float,
                        carried: bool = False) -> None:
        """Make ``row`` (text, metadata JSON, category, importance, updated_at,
        expires_at, version, dedupe_hash, sealed, status and optionally blob_id,
        quilt_patch_id, end_epoch, digest) the current version of memory ``key``.
        ``carried``: ``vector`` was taken from ``row``'s sealed copy by the caller."""
        values = {**_MEMORY_DEFAULTS, **row}
        with self.write() as c:
            before = c.execute(f"SELECT dedupe_hash, {VECTOR_COLUMNS}, id, version, event, "
                               "text FROM memories WHERE key = ?", (key,)).fetchone()
            if before is None:
                raise LocalStoreError(f"no memory with key {key} to replace")
            mid = str(before["id"])
            if (int(before["version"]), before["event"]) != (int(values["version"]), event):
                _retire_current(c, key)  # superseded: its history row moves to versions
            # the new version's history row replaces one of the same version and event
            c.execute("DELETE FROM versions WHERE memory_id = ? AND version = ? AND event = ?",
                      (mid, values["version"], event))
            kept = vector
            if kept is None and before is not None and not before[1]:
                # the vector stays, but the sealed copy it was read from is replaced
                kept = resolve_vectors(c, namespace, [(before[1], before[2])])[0]
            c.execute(
                "UPDATE memories SET text = ?, metadata = ?, category = ?, importance = ?, "
                "updated_at = ?, expires_at = ?, version = ?, dedupe_hash = ?, status = ?, "
                "blob_id = ?, quilt_patch_id = ?, object_id = NULL, end_epoch = ?, "
                "deletable = NULL, sealed = ?, digest = ?, event = ?, event_at = ? "
                "WHERE key = ?",
                (values["text"], values["metadata"], values["category"], values["importance"],
                 values["updated_at"], values["expires_at"], values["version"],
                 values["dedupe_hash"], values["status"], values["blob_id"],
                 values["quilt_patch_id"], values["end_epoch"], values["sealed"],
                 values["digest"], event, at, key),
            )
            if before is not None and str(before[0]) != values["dedupe_hash"]:
                self._promote_twin(c, namespace, str(before[0]))
            if kept is not None:
                c.execute("UPDATE memories SET vector = ? WHERE key = ?",
                          (stored_vector(c, namespace, values["sealed"], kept,
                                         carried=carried and vector is not None), key))
            if vector is not None or str(before["text"]) != str(values["text"]):
                self.fts_remove(namespace, key, str(before["text"]))
                self.fts_add(namespace, key, str(values["text"]))
            # Even without a new vector: the index keeps importance / expiry too.
            c.execute("INSERT INTO changes (namespace, key) VALUES (?, ?)", (namespace, key))

    @_guarded
    def add_history(self, namespace: str, memory_id: str, version: int, event: str, at: float,
                    *, text: str | None = None, metadata: str | None = None,
                    blob_id: str | None = None, patch_id: str | None = None,
                    end_epoch: int | None = None) -> None:
        with self.write() as c:
            c.execute(
                "INSERT OR IGNORE INTO versions (memory_id, namespace, version, event, text, "
                "metadata, at, blob_id, quilt_patch_id, end_epoch) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (memory_id, namespace, version, event, text, metadata, at, blob_id, patch_id,
                 end_epoch),
            )

    @_guarded
    def forget_memory(self, namespace: str, memory_id: str, at: float,
                      version: int | None = None) -> dict[str, bool | None] | None:
        """Delete a memory's row, FTS entry and queued publishes, blank its history's
        text and add a DELETE tombstone (at ``version``, default current + 1).

        Returns the blob ids its versions used (-> deletable flag), also recorded
        in ``pending_deletions`` in this same transaction (walrus_mem._memory.deletions
        clears them once deleted or kept for good), or None when
        the memory is not live here (a tombstone is still written if
        ``version`` is given, so a merge can record a forget it learned of).
        """
        with self.write() as c:
            row = c.execute(
                "SELECT key, version, dedupe_hash, text FROM memories WHERE id = ? "
                "AND namespace = ?",
                (memory_id, namespace),
            ).fetchone()
            blobs: dict[str, bool | None] = {}
            if row is not None:
                key = int(row["key"])
                _retire_current(c, key)  # its history row goes to versions (blanked below)
                for v in c.execute(
                    "SELECT blob_id, deletable FROM versions WHERE memory_id = ? "
                    "AND blob_id IS NOT NULL", (memory_id,),
                ).fetchall():
                    blobs[str(v[0])] = None if v[1] is None else bool(v[1])
                c.executemany(
                    "INSERT OR IGNORE INTO pending_deletions (blob_id, namespace, deletable, at) "
                    "VALUES (?, ?, ?, ?)",
                    [(b, namespace, None if d is None else int(d), at) for b, d in blobs.items()])
                c.execute("DELETE FROM memories WHERE key = ?", (key,))
                self._promote_twin(c, namespace, str(row["dedupe_hash"]))
                self.fts_remove(namespace, key, str(row["text"]))
                c.execute("INSERT INTO changes (namespace, key) VALUES (?, ?)", (namespace, key))
                c.execute("DELETE FROM outbox_items WHERE memory_id = ?", (memory_id,))
                self._drop_empty_outbox(namespace)
            elif version is None:
                return None
            c.execute("UPDATE versions SET text = NULL, metadata = NULL WHERE memory_id = ?",
                      (memory_id,))
            if not self.is_tombstoned(namespace, memory_id):
                tomb = version if version is not None else int(row["version"]) + 1
                c.execute(
                    "INSERT OR IGNORE INTO versions (memory_id, namespace, version, event, at) "
                    "VALUES (?, ?, ?, 'DELETE', ?)", (memory_id, namespace, tomb, at),
                )
            return blobs if row is not None else None

    @staticmethod
    def _promote_twin(c: sqlite3.Connection, namespace: str, dedupe_hash: str) -> None:
        """The plain hash's holder is gone: its oldest twin (if any) takes the hash, so
        remember() of that text dedupes to it again."""
        if ":" in dedupe_hash:
            return
        twin = c.execute(
            "SELECT key FROM memories WHERE namespace = ? AND dedupe_hash >= ? AND "
            "dedupe_hash < ? ORDER BY key LIMIT 1",
            (namespace, dedupe_hash + ":", dedupe_hash + ";")).fetchone()
        if twin is not None:
            c.execute("UPDATE memories SET dedupe_hash = ? WHERE key = ?",
                      (dedupe_hash, int(twin[0])))

    @_guarded
    def set_vectors(self, pairs: Sequence[tuple[bytes, int]]) -> None:
        """(vector bytes, key) pairs."""
        with self.write() as c:
            c.executemany("UPDATE memories SET vector = ? WHERE key = ?", pairs)


def _retire_current(c: sqlite3.Connection, key: int) -> None:
    """Copy memory ``key``'s current version's history row (schema 8: the memory row is
    it while ``event`` is set) to ``versions``, as it is before the row changes or goes
    (the caller overwrites ``event`` or deletes the row)."""
    c.execute(
        "INSERT OR IGNORE INTO versions (memory_id, namespace, version, event, text, metadata, "
        "at, blob_id, quilt_patch_id, end_epoch, deletable) SELECT id, namespace, version, "
        "event, text, metadata, event_at, blob_id, quilt_patch_id, end_epoch, deletable "
        "FROM memories WHERE key = ? AND event IS NOT NULL", (key,))
