"""Persistent, multi-process-safe state of the mock: blob files plus a SQLite index.

Layout of ``data_dir``::

    blobs/<hh>/<hex>    content-addressed blob bytes; <hex> is the raw 32-byte blob id in hex
                        (case-insensitive file systems cannot hold base64 names safely)
    tmp/                staging area for atomic writes (tmp + fsync + os.replace)
    index.sqlite3       WAL-mode index: blobs, Blob objects, epoch clock, counters,
                        blocklist (schema 2; see below)

A quilt's patches are found from its container's own header (:mod:`relayer_mock._quilt_index`),
not from a row per patch: the index marks the blobs a quilt store registered
(``blobs.has_patches``). Schema 1 (before 2026-11-29) kept a ``patches`` table, about 320
bytes a patch with its two indexes and all of it in the header too; opening such an index
marks its quilts, drops the table and vacuums, once.

Several processes (or app instances) may share one data dir: every write runs in a
``BEGIN IMMEDIATE`` transaction, the epoch clock and counters live in SQLite, and a blob file
is only moved into place or removed while holding that write lock, so a concurrent delete can
never leave an index entry without its file.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ._ids import (
    blob_file_name,
    blob_id_for,
    new_object_id,
    new_tx_digest,
    parse_quilt_patch_id,
)
from ._quilt import PatchLayout, QuiltError
from ._quilt_index import QuiltIndex, QuiltIndexCache
from ._store_types import (
    BlobBlocked,
    BlobInfo,
    BlobObject,
    BlobUnavailable,
    NotDeletable,
    PatchRecord,
    StagedBlob,
    StoreOutcome,
)

SCHEMA_VERSION = 2
_UNSET: Any = object()

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS blobs(
    blob_id TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    encoded_length INTEGER NOT NULL,
    is_quilt INTEGER NOT NULL DEFAULT 0,
    first_stored_at REAL NOT NULL,
    store_count INTEGER NOT NULL DEFAULT 0,
    newly_created_count INTEGER NOT NULL DEFAULT 0,
    already_certified_count INTEGER NOT NULL DEFAULT 0,
    has_patches INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS objects(
    object_id TEXT PRIMARY KEY,
    blob_id TEXT NOT NULL,
    registered_epoch INTEGER NOT NULL,
    certified_epoch INTEGER,
    start_epoch INTEGER NOT NULL,
    end_epoch INTEGER NOT NULL,
    storage_id TEXT NOT NULL,
    storage_size INTEGER NOT NULL,
    deletable INTEGER NOT NULL,
    owner TEXT NOT NULL,
    shared_object_id TEXT UNIQUE,
    tx_digest TEXT NOT NULL,
    event_seq TEXT NOT NULL,
    created_at REAL NOT NULL,
    deleted_at REAL
);
CREATE INDEX IF NOT EXISTS objects_by_blob ON objects(blob_id);
CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blocked(blob_id TEXT PRIMARY KEY, blocked_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS used_tokens(jti TEXT PRIMARY KEY, expires_at REAL NOT NULL);
"""


class Store:
    """The mock's persistent state. Thread-safe (one SQLite connection per thread) and safe to
    share between processes through the same ``data_dir``."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        epoch_duration: float | None = _UNSET,
        initial_epoch: int = 1,
        fsync: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.blobs_dir = self.data_dir / "blobs"
        self.tmp_dir = self.data_dir / "tmp"
        self.db_path = self.data_dir / "index.sqlite3"
        self.fsync = fsync
        self._clock = clock
        self._local = threading.local()
        self._closed = False
        self._quilts = QuiltIndexCache()
        # Owner only (0700 dirs, 0600 files): the embedded relayer lives in a data dir.
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.blobs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.tmp_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._init_schema(initial_epoch)
        for suffix in ("", "-wal", "-shm"):
            db_file = self.db_path.with_name(self.db_path.name + suffix)
            if db_file.exists():
                os.chmod(db_file, 0o600)
        if epoch_duration is not _UNSET and epoch_duration is not None:
            self.set_epoch_duration(epoch_duration)

    # -- connections and transactions ---------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if self._closed:
            if con is not None:
                self._local.con = None
                con.close()
            raise RuntimeError("store is closed")
        if con is None:
            con = sqlite3.connect(
                self.db_path, timeout=60.0, isolation_level=None, check_same_thread=False
            )
            con.row_factory = sqlite3.Row
            con.execute("PRAGMA busy_timeout=60000")
            self._set_wal(con)
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA foreign_keys=OFF")
            self._local.con = con
        return con

    @staticmethod
    def _set_wal(con: sqlite3.Connection) -> None:
        # Switching to WAL needs a moment of exclusivity; retry while another process holds it.
        for attempt in range(200):
            try:
                con.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError:
                if attempt == 199:
                    raise
                time.sleep(0.01)

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        con = self._conn()
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for multi-statement reads."""
        con = self._conn()
        con.execute("BEGIN")
        try:
            yield con
        finally:
            con.execute("COMMIT")

    def _init_schema(self, initial_epoch: int) -> None:
        migrated = False
        with self._write() as con:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
            defaults = {
                "schema_version": str(SCHEMA_VERSION),
                "epoch_base": str(initial_epoch),
                "epoch_anchor": repr(self._clock()),
                "epoch_duration": "",
                "publisher_address": new_object_id(),
            }
            for key, value in defaults.items():
                con.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))
            version = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if int(version["value"]) == 1:
                self._migrate_from_1(con)
                migrated = True
            elif int(version["value"]) != SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.db_path} has schema version {version['value']}, "
                    f"expected {SCHEMA_VERSION}"
                )
        if migrated:
            self._reclaim()

    @staticmethod
    def _migrate_from_1(con: sqlite3.Connection) -> None:
        """Schema 1 -> 2: mark the blobs a quilt store registered patches for (exactly those
        schema 1 had rows for, so the quilt routes answer as before), drop the rows."""
        con.execute("ALTER TABLE blobs ADD COLUMN has_patches INTEGER NOT NULL DEFAULT 0")
        con.execute("UPDATE blobs SET has_patches=1 WHERE blob_id IN"
                    " (SELECT DISTINCT quilt_id FROM patches)")
        con.execute("DROP TABLE patches")
        con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def _reclaim(self) -> None:
        """Give the dropped pages back to the file system (best effort: a busy database
        keeps them free inside the file, where later writes reuse them)."""
        con = self._conn()
        with contextlib.suppress(sqlite3.OperationalError):
            con.execute("VACUUM")
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Close the store: this thread's connection now; other threads' connections are
        closed by their own threads on next use, or when those threads end (closing a SQLite
        connection another thread may be using is not safe)."""
        self._closed = True
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is not None:
            self._local.con = None
            with contextlib.suppress(sqlite3.Error):
                con.close()

    # -- epoch clock ----------------------------------------------------------------------

    @staticmethod
    def _meta(con: sqlite3.Connection) -> dict[str, str]:
        return {row["key"]: row["value"] for row in con.execute("SELECT key, value FROM meta")}

    def _epoch_from_meta(self, meta: Mapping[str, str], now: float) -> int:
        base = int(meta["epoch_base"])
        duration = float(meta["epoch_duration"]) if meta["epoch_duration"] else None
        if not duration:
            return base
        return base + max(0, int((now - float(meta["epoch_anchor"])) // duration))

    def _current_epoch(self, con: sqlite3.Connection) -> int:
        return self._epoch_from_meta(self._meta(con), self._clock())

    def current_epoch(self) -> int:
        return self._current_epoch(self._conn())

    def epoch_info(self) -> dict[str, Any]:
        meta = self._meta(self._conn())
        now = self._clock()
        current = self._epoch_from_meta(meta, now)
        duration = float(meta["epoch_duration"]) if meta["epoch_duration"] else None
        next_at = None
        if duration:
            anchor = float(meta["epoch_anchor"])
            elapsed = current - int(meta["epoch_base"])
            next_at = anchor + (elapsed + 1) * duration
        return {"currentEpoch": current, "epochDuration": duration, "nextEpochAt": next_at}

    def advance_epoch(self, by: int = 1) -> int:
        """Move the clock ``by`` epochs forward (keeps the automatic schedule's phase)."""
        if by < 0:
            raise ValueError("epochs only move forward")
        with self._write() as con:
            meta = self._meta(con)
            base = int(meta["epoch_base"]) + by
            con.execute("UPDATE meta SET value=? WHERE key='epoch_base'", (str(base),))
            return self._epoch_from_meta({**meta, "epoch_base": str(base)}, self._clock())

    def set_epoch_duration(self, duration: float | None) -> None:
        """Set (or clear, with None) the automatic epoch length in seconds, starting now."""
        if duration is not None and duration <= 0:
            raise ValueError("epoch duration must be positive")
        with self._write() as con:
            now = self._clock()
            current = self._epoch_from_meta(self._meta(con), now)
            for key, value in (
                ("epoch_base", str(current)),
                ("epoch_anchor", repr(now)),
                ("epoch_duration", "" if duration is None else repr(float(duration))),
            ):
                con.execute("UPDATE meta SET value=? WHERE key=?", (value, key))

    def publisher_address(self) -> str:
        return self._meta(self._conn())["publisher_address"]

    # -- blob files -----------------------------------------------------------------------

    def blob_path(self, blob_id: str) -> Path:
        name = blob_file_name(blob_id)
        return self.blobs_dir / name[:2] / name

    def new_tmp_path(self) -> Path:
        return self.tmp_dir / f"{uuid.uuid4().hex}.part"

    def _write_file(self, path: Path, data: bytes) -> None:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as handle:
            handle.write(data)
            handle.flush()
            if self.fsync:
                os.fsync(handle.fileno())

    def sync_file(self, handle: BinaryIO) -> None:
        handle.flush()
        if self.fsync:
            os.fsync(handle.fileno())

    def stage_bytes(self, data: bytes) -> StagedBlob:
        """Hash ``data`` and, unless its file already exists, write a fsynced temp copy."""
        blob_id = blob_id_for(data)
        staged = StagedBlob(blob_id=blob_id, size=len(data), data=data)
        if not self.blob_path(blob_id).exists():
            tmp = self.new_tmp_path()
            self._write_file(tmp, data)
            staged.tmp_path = tmp
        return staged

    def _place_file(self, staged: StagedBlob) -> None:
        """Under the write lock: make sure the blob file exists (atomic rename into place)."""
        final = self.blob_path(staged.blob_id)
        if final.exists():
            return
        final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if staged.tmp_path is None or not staged.tmp_path.exists():
            if staged.data is None:
                raise RuntimeError("staged blob lost its bytes")
            tmp = self.new_tmp_path()
            self._write_file(tmp, staged.data)
            staged.tmp_path = tmp
        os.chmod(staged.tmp_path, 0o600)  # quilts are staged by the publisher's own writer
        os.replace(staged.tmp_path, final)
        staged.tmp_path = None
        if self.fsync:
            self._fsync_dir(final.parent)

    @staticmethod
    def _fsync_dir(path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def discard(self, staged: StagedBlob) -> None:
        if staged.tmp_path is not None:
            with contextlib.suppress(FileNotFoundError):
                staged.tmp_path.unlink()
            staged.tmp_path = None

    # -- publisher ------------------------------------------------------------------------

    def store(
        self,
        staged: StagedBlob,
        *,
        encoded_length: int,
        epochs: int,
        permanent: bool,
        force: bool = False,
        send_object_to: str | None = None,
        share: bool = False,
        quilt: list[PatchLayout] | None = None,
    ) -> StoreOutcome:
        """Register a store of ``staged``: ``alreadyCertified`` when a live permanent Blob object
        already covers ``current + epochs`` (and not ``force``), else a new Blob object."""
        try:
            with self._write() as con:
                now = self._clock()
                current = self._current_epoch(con)
                target_end = current + epochs
                if con.execute(
                    "SELECT 1 FROM blocked WHERE blob_id=?", (staged.blob_id,)
                ).fetchone():
                    raise BlobBlocked(staged.blob_id)
                con.execute(
                    "INSERT OR IGNORE INTO blobs(blob_id, size, encoded_length, is_quilt,"
                    " first_stored_at) VALUES (?, ?, ?, ?, ?)",
                    (staged.blob_id, staged.size, encoded_length, int(quilt is not None), now),
                )
                match = None
                if not force:
                    match = con.execute(
                        "SELECT * FROM objects WHERE blob_id=? AND deleted_at IS NULL"
                        " AND deletable=0 AND certified_epoch IS NOT NULL AND end_epoch>=?"
                        " ORDER BY end_epoch DESC, created_at LIMIT 1",
                        (staged.blob_id, target_end),
                    ).fetchone()
                if match is not None:
                    self._place_file(staged)  # heals a file lost outside the mock's control
                    con.execute(
                        "UPDATE blobs SET store_count=store_count+1,"
                        " already_certified_count=already_certified_count+1 WHERE blob_id=?",
                        (staged.blob_id,),
                    )
                    return StoreOutcome(
                        "alreadyCertified", staged.blob_id, staged.size, encoded_length,
                        epochs, current, BlobObject.from_row(match),
                    )
                self._place_file(staged)
                if share:
                    owner = "shared"
                else:
                    owner = send_object_to or self._meta(con)["publisher_address"]
                obj = BlobObject(
                    object_id=new_object_id(),
                    blob_id=staged.blob_id,
                    registered_epoch=current,
                    certified_epoch=current,
                    start_epoch=current,
                    end_epoch=target_end,
                    storage_id=new_object_id(),
                    storage_size=encoded_length,
                    deletable=not permanent,
                    owner=owner,
                    shared_object_id=new_object_id() if share else None,
                    tx_digest=new_tx_digest(),
                    event_seq="0",
                    created_at=now,
                    deleted_at=None,
                )
                con.execute(
                    "INSERT INTO objects(object_id, blob_id, registered_epoch, certified_epoch,"
                    " start_epoch, end_epoch, storage_id, storage_size, deletable, owner,"
                    " shared_object_id, tx_digest, event_seq, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (obj.object_id, obj.blob_id, obj.registered_epoch, obj.certified_epoch,
                     obj.start_epoch, obj.end_epoch, obj.storage_id, obj.storage_size,
                     int(obj.deletable), obj.owner, obj.shared_object_id, obj.tx_digest,
                     obj.event_seq, obj.created_at),
                )
                con.execute(
                    "UPDATE blobs SET store_count=store_count+1,"
                    " newly_created_count=newly_created_count+1 WHERE blob_id=?",
                    (staged.blob_id,),
                )
                if quilt is not None:
                    # its patches are read from the container's header when asked for
                    con.execute("UPDATE blobs SET has_patches=1 WHERE blob_id=?",
                                (staged.blob_id,))
                    self._quilts.put(QuiltIndex.from_layout(staged.blob_id, quilt))
                return StoreOutcome(
                    "newlyCreated", staged.blob_id, staged.size, encoded_length, epochs,
                    current, obj,
                )
        finally:
            self.discard(staged)

    # -- aggregator -----------------------------------------------------------------------

    def get_blob(self, blob_id: str) -> BlobInfo:
        """The blob if some live Blob object holds it; raises BlobBlocked / BlobUnavailable."""
        con = self._conn()
        with self._read():
            if con.execute("SELECT 1 FROM blocked WHERE blob_id=?", (blob_id,)).fetchone():
                raise BlobBlocked(blob_id)
            row = con.execute(
                "SELECT b.size, b.is_quilt, b.first_stored_at FROM blobs b WHERE b.blob_id=?"
                " AND EXISTS ("
                " SELECT 1 FROM objects o WHERE o.blob_id=b.blob_id AND o.deleted_at IS NULL"
                " AND o.end_epoch>?)",
                (blob_id, self._current_epoch(con)),
            ).fetchone()
        if row is None:
            raise BlobUnavailable(blob_id)
        return BlobInfo(blob_id, row["size"], bool(row["is_quilt"]), self.blob_path(blob_id),
                        row["first_stored_at"])

    def just_expired(self, blob_id: str) -> bool:
        """Whether the blob's last live Blob object ended with the current epoch: it expired at
        the last epoch change (storage nodes are still dropping its slivers)."""
        con = self._conn()
        with self._read():
            current = self._current_epoch(con)
            row = con.execute(
                "SELECT max(end_epoch) FROM objects WHERE blob_id=? AND deleted_at IS NULL",
                (blob_id,),
            ).fetchone()
        return row is not None and row[0] is not None and int(row[0]) == current

    def read_range(self, info: BlobInfo, start: int = 0, length: int | None = None) -> bytes:
        """Bytes of an available blob; a file deleted meanwhile reads as unavailable."""
        try:
            with open(info.path, "rb") as handle:
                if start:
                    handle.seek(start)
                data = handle.read() if length is None else handle.read(length)
        except FileNotFoundError as exc:
            raise BlobUnavailable(info.blob_id) from exc
        return data

    def read_blob(self, blob_id: str) -> bytes:
        return self.read_range(self.get_blob(blob_id))

    def resolve_object(self, object_id: str) -> str | None:
        """Blob id of an undeleted Blob object, by its id or its shared wrapper's id."""
        row = self._conn().execute(
            "SELECT blob_id FROM objects WHERE (object_id=? OR shared_object_id=?)"
            " AND deleted_at IS NULL",
            (object_id, object_id),
        ).fetchone()
        return None if row is None else str(row["blob_id"])

    def quilt_index(self, quilt_id: str) -> QuiltIndex | None:
        """The patches of a blob a quilt store registered (None for any other blob), from
        its container's header; raises BlobUnavailable if the file is gone."""
        row = self._conn().execute(
            "SELECT has_patches FROM blobs WHERE blob_id=?", (quilt_id,)
        ).fetchone()
        if row is None or not row["has_patches"]:
            return None
        try:
            return self._quilts.get(quilt_id, self.blob_path(quilt_id))
        except FileNotFoundError as exc:
            raise BlobUnavailable(quilt_id) from exc
        except (QuiltError, ValueError, KeyError, TypeError) as exc:
            raise BlobUnavailable(quilt_id) from exc  # not the container it was stored as

    def get_patch_by_id(self, patch_id: str) -> PatchRecord | None:
        """The patch ``patch_id`` names, or None; BlobUnavailable if its file is gone."""
        try:
            quilt_id = parse_quilt_patch_id(patch_id)[0]
        except ValueError:
            return None
        index = self.quilt_index(quilt_id)
        return None if index is None else index.by_patch_id(patch_id)

    def get_patch(self, quilt_id: str, identifier: str) -> PatchRecord | None:
        """The patch ``identifier`` of ``quilt_id``, or None; BlobUnavailable if its file
        is gone."""
        index = self.quilt_index(quilt_id)
        return None if index is None else index.by_identifier(identifier)

    def list_patches(self, quilt_id: str) -> list[PatchRecord]:
        """A quilt's patches in index order ([] for other blobs); BlobUnavailable if its
        file is gone."""
        index = self.quilt_index(quilt_id)
        return [] if index is None else index.records()

    def random_other_blob(self, exclude: str, rng: random.Random) -> BlobInfo | None:
        """Some other available blob (for the lying-aggregator fault)."""
        con = self._conn()
        query = (
            "FROM blobs b WHERE b.blob_id!=? AND NOT EXISTS (SELECT 1 FROM blocked k"
            " WHERE k.blob_id=b.blob_id) AND EXISTS (SELECT 1 FROM objects o"
            " WHERE o.blob_id=b.blob_id AND o.deleted_at IS NULL AND o.end_epoch>?)"
        )
        with self._read():
            current = self._current_epoch(con)
            count = con.execute(f"SELECT COUNT(*) {query}", (exclude, current)).fetchone()[0]
            if not count:
                return None
            row = con.execute(
                f"SELECT b.blob_id, b.size, b.is_quilt {query} ORDER BY b.blob_id"
                " LIMIT 1 OFFSET ?",
                (exclude, current, rng.randrange(count)),
            ).fetchone()
        blob_id = row["blob_id"]
        return BlobInfo(blob_id, row["size"], bool(row["is_quilt"]), self.blob_path(blob_id))

    # -- counters, listing, admin ---------------------------------------------------------

    def bump(self, counters: Mapping[str, int]) -> None:
        items = [(name, n) for name, n in counters.items() if n]
        if not items:
            return
        with self._write() as con:
            con.executemany(
                "INSERT INTO counters(name, value) VALUES (?, ?)"
                " ON CONFLICT(name) DO UPDATE SET value=value+excluded.value",
                items,
            )

    def counters(self) -> dict[str, int]:
        rows = self._conn().execute("SELECT name, value FROM counters ORDER BY name")
        return {row["name"]: row["value"] for row in rows}

    def stats(self) -> dict[str, Any]:
        con = self._conn()
        with self._read():
            current = self._current_epoch(con)
            live = (
                "EXISTS (SELECT 1 FROM objects o WHERE o.blob_id=b.blob_id"
                " AND o.deleted_at IS NULL AND o.end_epoch>?)"
            )
            totals = con.execute(
                f"SELECT COUNT(*) AS blobs, COALESCE(SUM({live}), 0) AS available,"
                " COALESCE(SUM(is_quilt), 0) AS quilts, COALESCE(SUM(size), 0) AS bytes,"
                " COALESCE(SUM(store_count), 0) AS stores,"
                " COALESCE(SUM(newly_created_count), 0) AS created,"
                " COALESCE(SUM(already_certified_count), 0) AS certified FROM blobs b",
                (current,),
            ).fetchone()
            objects = con.execute(
                "SELECT COUNT(*) AS n, COALESCE(SUM(deleted_at IS NOT NULL), 0) AS deleted,"
                " COALESCE(SUM(deleted_at IS NULL AND end_epoch<=?), 0) AS expired"
                " FROM objects",
                (current,),
            ).fetchone()
            counters = self.counters()
        return {
            "currentEpoch": current,
            "blobCount": totals["blobs"],
            "availableBlobCount": totals["available"],
            "quiltCount": totals["quilts"],
            "storedBytes": totals["bytes"],
            "objectCount": objects["n"],
            "deletedObjectCount": objects["deleted"],
            "expiredObjectCount": objects["expired"],
            "stores": {
                "total": totals["stores"],
                "newlyCreated": totals["created"],
                "alreadyCertified": totals["certified"],
            },
            "requests": _group(counters, "requests."),
            "faults": _group(counters, "faults."),
            "counters": counters,
        }

    def _objects_for(self, con: sqlite3.Connection, blob_id: str) -> list[BlobObject]:
        rows = con.execute(
            "SELECT * FROM objects WHERE blob_id=? ORDER BY created_at, object_id", (blob_id,)
        ).fetchall()
        return [BlobObject.from_row(row) for row in rows]

    def describe_blob(self, blob_id: str) -> dict[str, Any] | None:
        con = self._conn()
        with self._read():
            row = con.execute("SELECT * FROM blobs WHERE blob_id=?", (blob_id,)).fetchone()
            if row is None:
                return None
            return self._describe(con, row, self._current_epoch(con))

    def list_blobs(self, *, include_unavailable: bool = True) -> list[dict[str, Any]]:
        con = self._conn()
        with self._read():
            current = self._current_epoch(con)
            rows = con.execute("SELECT * FROM blobs ORDER BY first_stored_at, blob_id").fetchall()
            described = [self._describe(con, row, current) for row in rows]
        if not include_unavailable:
            described = [entry for entry in described if entry["available"]]
        return described

    def _describe(self, con: sqlite3.Connection, row: sqlite3.Row, current: int) -> dict[str, Any]:
        objects = self._objects_for(con, row["blob_id"])
        live = [o for o in objects if o.deleted_at is None and o.end_epoch > current]
        blocked = con.execute(
            "SELECT 1 FROM blocked WHERE blob_id=?", (row["blob_id"],)
        ).fetchone() is not None
        latest = live[-1] if live else (objects[-1] if objects else None)
        return {
            "blobId": row["blob_id"],
            "size": row["size"],
            "encodedLength": row["encoded_length"],
            "isQuilt": bool(row["is_quilt"]),
            "available": bool(live) and not blocked,
            "blocked": blocked,
            "endEpoch": max((o.end_epoch for o in live), default=None),
            "deletable": all(o.deletable for o in live) if live else None,
            "objectId": latest.object_id if latest else None,
            "storeCount": row["store_count"],
            "newlyCreatedCount": row["newly_created_count"],
            "alreadyCertifiedCount": row["already_certified_count"],
            "objects": [
                {
                    "objectId": o.object_id,
                    "endEpoch": o.end_epoch,
                    "deletable": o.deletable,
                    "owner": o.owner,
                    "sharedBlobObject": o.shared_object_id,
                    "deleted": o.deleted_at is not None,
                    "expired": o.end_epoch <= current,
                }
                for o in objects
            ],
        }

    def delete(self, blob_id: str, object_id: str | None = None) -> dict[str, Any]:
        """Mock-only deletion of deletable Blob objects (real Walrus deletes on chain).

        Without ``object_id`` every undeleted object of the blob is deleted, and the call
        fails with NotDeletable (deleting nothing) if any unexpired permanent object exists.
        The file goes once no undeleted object remains.
        """
        with self._write() as con:
            current = self._current_epoch(con)
            objects = [o for o in self._objects_for(con, blob_id) if o.deleted_at is None]
            if object_id is not None:
                objects = [o for o in objects if object_id in (o.object_id, o.shared_object_id)]
            if not objects:
                raise BlobUnavailable(blob_id)
            permanent = [o for o in objects if not o.deletable and o.end_epoch > current]
            if permanent:
                raise NotDeletable(permanent[0].object_id)
            now = self._clock()
            con.executemany(
                "UPDATE objects SET deleted_at=? WHERE object_id=?",
                [(now, o.object_id) for o in objects],
            )
            remaining = con.execute(
                "SELECT COUNT(*) FROM objects WHERE blob_id=? AND deleted_at IS NULL", (blob_id,)
            ).fetchone()[0]
            available = con.execute(
                "SELECT COUNT(*) FROM objects WHERE blob_id=? AND deleted_at IS NULL"
                " AND end_epoch>?",
                (blob_id, current),
            ).fetchone()[0]
            if remaining == 0:
                with contextlib.suppress(FileNotFoundError):
                    self.blob_path(blob_id).unlink()
        return {
            "blobId": blob_id,
            "deletedObjects": [o.object_id for o in objects],
            "available": bool(available),
        }

    def set_blocked(self, blob_id: str, blocked: bool) -> None:
        with self._write() as con:
            if blocked:
                con.execute(
                    "INSERT OR IGNORE INTO blocked(blob_id, blocked_at) VALUES (?, ?)",
                    (blob_id, self._clock()),
                )
            else:
                con.execute("DELETE FROM blocked WHERE blob_id=?", (blob_id,))

    def blocked(self) -> list[str]:
        rows = self._conn().execute("SELECT blob_id FROM blocked ORDER BY blob_id")
        return [row["blob_id"] for row in rows]

    def use_token(self, jti: str, expires_at: float) -> bool:
        """Record a JWT id; False if it was used before (single-use tokens)."""
        with self._write() as con:
            con.execute("DELETE FROM used_tokens WHERE expires_at < ?", (self._clock() - 3600,))
            cursor = con.execute(
                "INSERT OR IGNORE INTO used_tokens(jti, expires_at) VALUES (?, ?)",
                (jti, expires_at),
            )
            return cursor.rowcount == 1

    def reset(self) -> None:
        """Forget everything: blobs, objects, patches, counters, blocklist, epoch (back to 1)."""
        with self._write() as con:
            for table in ("blobs", "objects", "counters", "blocked", "used_tokens"):
                con.execute(f"DELETE FROM {table}")
            con.execute("UPDATE meta SET value='1' WHERE key='epoch_base'")
            con.execute("UPDATE meta SET value=? WHERE key='epoch_anchor'", (repr(self._clock()),))
            self._quilts.clear()
            for path in self.blobs_dir.glob("*/*"):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def _group(counters: Mapping[str, int], prefix: str) -> dict[str, int]:
    return {name[len(prefix):]: n for name, n in counters.items() if name.startswith(prefix)}
