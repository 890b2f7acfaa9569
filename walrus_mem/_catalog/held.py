"""Sealed copies the catalog does not keep: those the embedded relayer of this data dir holds.

A memory's sealed envelope is the source of sync, ``extend``, re-stores after a network
loss and (schema 7) its vector. With a real Walrus endpoint the catalog keeps it in
``memories.sealed``: it is the client's insurance against losing the network's copy. With
the embedded relayer (``Settings.embedded``) the store's copy is a file in
``<data_dir>/relayer`` on the same disk, so a published row whose bytes that folder holds
keeps none (schema 10; about 1,410 B a short fact): its location (``blob_id``,
``quilt_patch_id``) and ``digest`` (BLAKE2b-256 of the sealed bytes) name them.

A read (:func:`resolve_sealed`) takes the bytes from the folder in-process (no HTTP,
about 20 µs a patch) and checks them against the row's digest: the folder is plain files,
which anything with access to it can change or remove. Bytes that are gone or differ are
treated as lost (None, logged), never used; the callers then do what a lost copy gets
(``walrus-mem repair`` seals it again from the row, _memory/held_copies.py).

Rows drop their copy when the store answer is recorded (:meth:`HeldCopies.shed` from
``record_location``: the bytes are read back from the folder and compared byte for
byte first) and at ``compact`` (rows published before this, or while another backend was
in use). A row that is queued again (an update, a rotation, a re-seal) keeps its new
copy until that is published. Without a source (a catalog opened alone) nothing is
dropped and a row without its copy reads as having none.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Sequence
from typing import Final, Protocol

__all__ = ["HELD_LOCATOR", "HeldCopies", "digest_of", "locator_of", "resolve_many",
           "resolve_sealed", "shed_held"]

log = logging.getLogger(__name__)

HELD_LOCATOR: Final = b"wm-held:"
"""The prefix of what VECTOR_COLUMNS selects for a row whose sealed copy the relayer
holds (an envelope starts with ``WMEM``): ``wm-held:<blob id> <patch id> <digest>``."""

LOCATOR_SQL: Final = (
    "CAST('wm-held:' || coalesce(blob_id, '') || ' ' || coalesce(quilt_patch_id, '') "
    "|| ' ' || coalesce(digest, '') AS BLOB)"
)


class HeldCopies(Protocol):
    """Where a row without its sealed copy reads it (installed by the publisher)."""

    def read(self, blob_id: str, patch_id: str | None) -> bytes | None:
        """The bytes stored at that location in this data dir's relayer folder, or None."""

    def read_many(self, blob_id: str, patch_ids: list[str]) -> dict[str, bytes]:
        """Many patches of one quilt there (patch id -> bytes, those found)."""

    @property
    def drops(self) -> bool:
        """Whether rows published now may drop their copy (the embedded relayer stores)."""


def digest_of(data: bytes) -> str:
    """BLAKE2b-256 (hex) of sealed bytes, as manifest.sealed_digest."""
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def locator_of(blob: bytes) -> tuple[str, str | None, str] | None:
    """(blob id, patch id, digest) of a locator, or None if ``blob`` is not one."""
    if not blob.startswith(HELD_LOCATOR):
        return None
    parts = blob[len(HELD_LOCATOR):].decode("ascii", "replace").split(" ")
    if len(parts) != 3 or not parts[0] or not parts[2]:
        return None
    return parts[0], parts[1] or None, parts[2]


def resolve_sealed(conn: sqlite3.Connection, sealed: bytes | None, blob_id: str | None,
                   patch_id: str | None, digest: str | None) -> bytes | None:
    """A row's sealed bytes: its own copy, else the relayer's if it matches ``digest``."""
    if sealed is not None:
        return bytes(sealed)
    source: HeldCopies | None = getattr(conn, "sealed_source", None)
    if source is None or blob_id is None or digest is None:
        return None
    raw = source.read(str(blob_id), None if patch_id is None else str(patch_id))
    if raw is None:
        _warn_once(str(blob_id), "the sealed copy of a memory stored in blob %s is not in the "
                   "embedded relayer's folder any more (walrus-mem repair seals it again)")
        return None
    if digest_of(raw) != digest:
        _warn_once(str(blob_id), "the sealed copy of a memory in the embedded relayer's blob "
                   "%s does not match its digest (the folder was changed); not used: "
                   "walrus-mem repair seals it again")
        return None
    return raw


_warned: set[str] = set()


def _warn_once(blob_id: str, message: str) -> None:
    """One warning per blob and process (every reader of its memories would repeat it)."""
    if blob_id in _warned:
        log.debug(message, blob_id)
        return
    if len(_warned) > 10_000:
        _warned.clear()
    _warned.add(blob_id)
    log.warning(message, blob_id)


def resolve_many(conn: sqlite3.Connection,
                 locators: Sequence[tuple[str, str | None, str]]) -> list[bytes | None]:
    """:func:`resolve_sealed` of many rows' locators (blob id, patch id, digest), each
    quilt's file read once (a rebuild's batch reads ~1,000 rows of a few quilts)."""
    source: HeldCopies | None = getattr(conn, "sealed_source", None)
    if source is None:
        return [None] * len(locators)
    patches: dict[str, list[str]] = {}
    for blob_id, patch_id, _ in locators:
        if patch_id is not None:
            patches.setdefault(blob_id, []).append(patch_id)
    held = {b: source.read_many(b, p) for b, p in patches.items()}
    out: list[bytes | None] = []
    for blob_id, patch_id, digest in locators:
        raw = held[blob_id].get(patch_id) if patch_id is not None else None
        if raw is not None and digest_of(raw) == digest:
            out.append(raw)
        else:  # not in the quilt's file as read, or a blob of its own: one by one (logs)
            out.append(resolve_sealed(conn, None, blob_id, patch_id, digest))
    return out


def shed_held(conn: sqlite3.Connection, *, keys: Sequence[int] | None = None,
              after: int = 0, limit: int = 2000) -> tuple[int, int | None]:
    """Drop the sealed copy of published rows whose bytes the relayer's folder holds, byte
    for byte, at their location: the rows of ``keys``, or up to ``limit`` rows after key
    ``after``. Run inside the caller's write transaction. Returns (rows shed, the last key
    looked at, None when there was none)."""
    source: HeldCopies | None = getattr(conn, "sealed_source", None)
    if source is None or not source.drops:
        return 0, None
    base = ("SELECT key, sealed, blob_id, quilt_patch_id, digest FROM memories WHERE "
            "status = 'published' AND sealed IS NOT NULL AND blob_id IS NOT NULL "
            "AND digest IS NOT NULL")
    if keys is None:
        rows = conn.execute(f"{base} AND key > ? ORDER BY key LIMIT ?",
                            (after, limit)).fetchall()
    else:
        rows = []
        for start in range(0, len(keys), 500):
            chunk = [int(k) for k in keys[start:start + 500]]
            rows += conn.execute(f"{base} AND key IN ({','.join('?' * len(chunk))})",
                                 chunk).fetchall()
    return _shed_rows(conn, source, rows), (int(rows[-1][0]) if rows else None)


def _shed_rows(conn: sqlite3.Connection, source: HeldCopies,
               rows: Sequence[sqlite3.Row]) -> int:
    drop = []
    patches: dict[str, list[str]] = {}  # quilt -> its patches here: one read of its file
    for _, _, blob_id, patch_id, _ in rows:
        if patch_id is not None:
            patches.setdefault(str(blob_id), []).append(str(patch_id))
    held = {b: source.read_many(b, p) for b, p in patches.items()}
    for key, sealed, blob_id, patch_id, digest in rows:
        data = bytes(sealed)
        if digest_of(data) != digest:
            continue  # a row whose copy and digest disagree keeps it (doctor, repair)
        there = (source.read(str(blob_id), None) if patch_id is None
                 else held[str(blob_id)].get(str(patch_id)))
        if there == data:
            drop.append((int(key),))
    if drop:
        _rewrite_without_copy(conn, [k for (k,) in drop])
    return len(drop)


def _rewrite_without_copy(conn: sqlite3.Connection, keys: Sequence[int]) -> None:
    """Rows ``keys`` again without their sealed copy, deleted and inserted (same key and
    columns). An UPDATE that shrinks a row leaves its page as full of nothing as before
    (SQLite merges pages on delete only): 10k short facts kept 1,993 B a row of slack,
    against ~470 B when deleted and inserted (measured in benchmarks.md)."""
    columns = [str(r[1]) for r in conn.execute("PRAGMA main.table_info(memories)")]
    select = ", ".join("NULL" if c == "sealed" else c for c in columns)
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS held_rewrite AS SELECT * FROM main.memories "
                 "WHERE 0")
    conn.execute("DELETE FROM temp.held_rewrite")
    for start in range(0, len(keys), 500):
        chunk = [int(k) for k in keys[start:start + 500]]
        marks = ",".join("?" * len(chunk))
        conn.execute(f"INSERT INTO temp.held_rewrite SELECT {select} FROM main.memories "
                     f"WHERE key IN ({marks})", chunk)
        conn.execute(f"DELETE FROM main.memories WHERE key IN ({marks})", chunk)
    conn.execute(f"INSERT INTO main.memories ({', '.join(columns)}) SELECT {', '.join(columns)} "
                 "FROM temp.held_rewrite ORDER BY key")
    conn.execute("DELETE FROM temp.held_rewrite")
