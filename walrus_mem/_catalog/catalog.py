"""The local catalog: one SQLite file (WAL) that is the source of truth on this machine.

Tables (schema version :data:`SCHEMA_VERSION`, migrations in :data:`MIGRATIONS`):

``namespaces``    per namespace: embedding model id + dim, key fingerprint,
                  latest head reference, the heads the local state
                  contains, an unfinished restore's mark, writes since
                  the last manifest.
``memories``      live memories. ``key`` (INTEGER PRIMARY KEY AUTOINCREMENT,
                  never reused) is the USearch key; ``vector`` holds the
                  normalised embedding as float16 bytes so the index can be
                  rebuilt without re-embedding (empty when ``sealed`` carries
                  it: vectors.py); ``sealed`` the envelope bytes of the
                  current version (republished as-is by sync/extend), NULL for
                  a published row whose bytes the embedded relayer holds
                  (read from its folder, checked against ``digest``: held.py).
``fts_<hash>``    one FTS5 table per namespace over ``memories.text`` (rowid =
                  ``memories.key``; the name is a hash, not the namespace), so
                  bm25 statistics are per namespace and lexical search needs
                  no join. Contentless (schema 9): it holds no copy of the
                  text, and ``fts_remove`` is given the text that was indexed.
``lex_<hash>``    the same rows' postings (:mod:`walrus_mem._catalog.postings`, which
``lexdf_<hash>``  recall scores from), per-term row counts and, in
``lexicon_stats`` ``lexicon_stats``, rows and tokens; written with the FTS5 row.
``versions``      history: superseded versions (text, metadata, blob id), CONFLICT
                  losers and ``DELETE`` tombstones; a live memory's current version
                  is its ``memories`` row (``event``, ``event_at``; schema 8), copied
                  here when it is superseded or forgotten. Forget blanks the text and
                  adds a ``DELETE`` tombstone.
``outbox``        publish batches not yet on Walrus (``blob`` or ``quilt``),
``outbox_items``  their members (memory id + version; bytes come from memories).
``changes``       append-only log of touched index keys, so every process can
                  bring its in-memory index up to date incrementally.
``manifests``, ``manifest_pages``  published manifests and reusable pages.
``idempotency``   results of calls made with an ``idempotency_key``.
``blob_objects``  the Sui object id of each blob the store named one for (once per
                  blob, not per row: writes.py ``note_object``).
``meta``          small key/value facts (current epoch, FTS tokenizer, ...).

Pages are 16 KiB (:data:`PAGE_SIZE`; an older file switches at ``vacuum``).

Every write goes through :meth:`Catalog.write` (``BEGIN IMMEDIATE``), so
several processes can share the file; ``busy_timeout`` makes them wait for
each other instead of failing. A file that is not a database or is malformed
raises :class:`~walrus_mem.errors.CatalogCorrupt`; the file is never
overwritten or recreated.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .._local.private_dirs import make_private_dirs
from .._recall.ranking import FTS_TOKENIZE
from .._walrus.epoch_guard import EpochGuard
from .._walrus.expiry import record_seen
from ..errors import LocalStoreError
from . import manifest_cache, postings
from .changes import ChangeLog
from .dedupe import Dedupe, dedupe_key, plain_dedupe_hash, stored_dedupe_hash, twin_slot
from .fts import FtsQueries, fts_table
from .guard import _guarded, _translate
from .held import HeldCopies, shed_held
from .outbox import OutboxQueue
from .postings_reads import PostingsQueries
from .reads import MEMORY_COLUMNS, MemoryQueries
from .schema import MIGRATIONS, SCHEMA_VERSION
from .vectors import (
    VECTOR_COLUMNS,
    VectorConnection,
    VectorSource,
    resolve_vectors,
    stored_vector,
)
from .writes import MemoryWrites, move_object_ids

__all__ = [
    "MEMORY_COLUMNS",
    "MIGRATIONS",
    "PAGE_SIZE",
    "SCHEMA_VERSION",
    "Catalog",
    "dedupe_key",
    "fts_table",
    "plain_dedupe_hash",
    "twin_slot",
    "vector_from_blob",
    "vectors_from_blobs",
    "vector_to_blob",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS: Final = 30_000
PAGE_SIZE: Final = 16384
"""The catalog's page size. A row keeping a caller-given vector is ~1,250 B: a 4 KiB page
held three and left about a tenth of itself empty (109 B a memory at 200k, benchmarks.md
"Run 4"); 16 KiB pages hold thirteen. A new file gets it; an older one at ``vacuum``."""
RECLAIM_MIN_PAGES: Final = 64  # scrub() gives free pages back from 1 MiB of them (_reclaim)
_INCREMENTAL: Final = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
POSTINGS_FORMAT: Final = postings.FORMAT  # meta 'postings': a change rebuilds them all
FTS_CONTENT: Final = "none"  # meta 'fts_content': FTS5 tables without a text copy (schema 9)


def vector_to_blob(vector: npt.NDArray[np.float32]) -> bytes:
    """Store vectors as little-endian float16 (the index's own precision)."""
    return np.asarray(vector, dtype="<f2").tobytes()


def vector_from_blob(blob: bytes) -> npt.NDArray[np.float32]:
    return np.frombuffer(blob, dtype="<f2").astype(np.float32)


def vectors_from_blobs(blobs: Sequence[bytes], dim: int) -> npt.NDArray[np.float16]:
    """Many stored vectors as one float16 matrix (one decode instead of one per row)."""
    joined = b"".join(blobs)
    if len(joined) != 2 * dim * len(blobs) or any(len(b) != 2 * dim for b in blobs):
        raise LocalStoreError(f"catalog holds a vector that is not {dim} float16 values")
    return np.frombuffer(joined, dtype="<f2").reshape(len(blobs), dim)


class Catalog(FtsQueries, PostingsQueries, ChangeLog, OutboxQueue, MemoryQueries, Dedupe,
              MemoryWrites):
    """A connection to the catalog file with the project's SQL in one place.

    Thread-safe: one connection, guarded by a re-entrant lock. ``write()``
    transactions nest (inner ones join the outer one).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._depth = 0
        self._reading = False  # inside snapshot(): one read transaction
        self._read_checked = False  # its staleness check done
        # fts_doc_counts cache: namespace -> term -> matching rows, valid for one
        # (data_version, total_changes) pair, i.e. until any connection writes.
        self._df_cache: dict[str, dict[str, int]] = {}
        self._df_version: tuple[int, int] | None = None
        self._lex_counts: dict[str, dict[str, int]] = {}  # the postings' (postings_reads.py)
        self._lex_stats: dict[str, tuple[int, int] | None] = {}
        self._ns_rows: dict[str, sqlite3.Row | None] = {}  # namespace(): one read per change
        # Rows (key, text) added in the open write transaction: their postings are written
        # together before it commits (a batch appends once to each term's last block).
        self._pending_postings: dict[str, list[tuple[int, str]]] = {}
        self.epoch_guard: EpochGuard | None = None
        """Set by Memory (epoch_guard.py): refuses store answers' implausible epochs."""
        make_private_dirs(self.path.parent)
        new_file = not self.path.exists()
        try:
            self.conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
                cached_statements=256,
                factory=VectorConnection,
            )
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc
        if new_file:
            os.chmod(self.path, 0o600)
        self.conn.row_factory = sqlite3.Row
        try:
            self._configure()
            self._migrate()
            self._ensure_fts()
            with self.write():
                manifest_cache.ensure(self.conn)  # dirty keys for incremental manifests
        except sqlite3.Error as exc:
            self.conn.close()
            raise _translate(exc, self.path) from exc
        except BaseException:
            self.conn.close()
            raise

    # -- connection and schema ------------------------------------------------

    def _configure(self) -> None:
        c = self.conn
        c.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # Reading the schema fails fast on a file that is not a database.
        c.execute("SELECT count(*) FROM sqlite_master").fetchone()
        # Free pages can be given back to the file system (scrub() after large forgets).
        # Both take effect in a new file; an older one switches at its next VACUUM (compact).
        c.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        c.execute("PRAGMA auto_vacuum = INCREMENTAL")
        mode = c.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise LocalStoreError(f"catalog {self.path}: cannot enable WAL (mode {mode})")
        # FULL: a commit that returned survives power loss too, not only a process
        # crash (WAL + NORMAL may drop the last commits on an OS crash).
        c.execute("PRAGMA synchronous = FULL")
        c.execute("PRAGMA foreign_keys = ON")
        # Deleted content (forgotten memories) is overwritten, not just unlinked.
        c.execute("PRAGMA secure_delete = ON")
        # Recall touches ~100 random rows and the FTS index per query: keep pages
        # in a 64 MiB cache. No memory map: its pages count in the process's RSS on top
        # of the cache (256 MiB at 1M memories), for no recall time measured at 100k
        # (docs/benchmarks.md, "The importing process's memory").
        c.execute("PRAGMA cache_size = -65536")
        c.execute("PRAGMA mmap_size = 0")
        c.execute("PRAGMA temp_store = MEMORY")

    def _migrate(self) -> None:
        c = self.conn
        with self.write():
            c.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = c.execute("SELECT max(version) FROM schema_version").fetchone()
            current = int(row[0] or 0)
            if current > SCHEMA_VERSION:
                raise LocalStoreError(
                    f"catalog {self.path} has schema version {current}; this walrus_mem "
                    f"understands up to {SCHEMA_VERSION}: upgrade walrus-mem"
                )
            c.create_function("stored_dedupe_hash", 1, stored_dedupe_hash, deterministic=True)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _split_sql(MIGRATIONS[version - 1]):
                    c.execute(statement)
                c.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    def _ensure_fts(self) -> None:
        """Create missing per-namespace FTS5 tables and postings; rebuild all if the
        tokenizer (or the postings' format) changed."""
        c = self.conn
        with self.write():
            rebuild = self.get_meta("fts_tokenize") != FTS_TOKENIZE
            relex = rebuild or self.get_meta("postings") != POSTINGS_FORMAT
            recopy = self.get_meta("fts_content") != FTS_CONTENT
            for (name,) in c.execute("SELECT name FROM namespaces").fetchall():
                self._create_fts(str(name), rebuild=rebuild, relex=relex, recopy=recopy)
            self.set_meta("fts_tokenize", FTS_TOKENIZE)
            self.set_meta("postings", POSTINGS_FORMAT)
            self.set_meta("fts_content", FTS_CONTENT)

    def _create_fts(self, namespace: str, *, rebuild: bool = False,
                    relex: bool = False, recopy: bool = False) -> None:
        """Make the namespace's FTS5 table and postings. ``rebuild``: both again from
        ``memories``; ``relex``: the postings again from the FTS5 index; ``recopy``: the
        FTS5 table again without a text copy (the same tokens: postings kept)."""
        c = self.conn
        table = fts_table(namespace)
        exists = c.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        self._pending_postings.pop(namespace, None)  # the rebuild reads them from FTS5
        lexed = c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                          (postings.postings_table(namespace),)).fetchone() is not None
        if exists and not rebuild and not recopy:
            if relex or not lexed:
                postings.rebuild(c, namespace)
            return
        if exists:
            c.execute(f"DROP TABLE {table}")
        tokenize = FTS_TOKENIZE.replace("'", "''")
        # content='': FTS5 keeps the index and row sizes (bm25), not the text, which
        # memories.text holds; so a row is deleted by giving its text (fts_remove).
        c.execute(f"CREATE VIRTUAL TABLE {table} USING fts5(text, content = '', "
                  f"tokenize = '{tokenize}')")
        c.execute(
            f"INSERT INTO {table} (rowid, text) SELECT key, text FROM memories WHERE namespace = ?",
            (namespace,),
        )
        if rebuild or relex or not exists or not lexed:
            postings.rebuild(c, namespace)

    @_guarded
    def rebuild_lexical(self, namespace: str) -> None:
        """The namespace's FTS5 table and postings again from ``memories.text`` (repair of
        rows whose text rotted: the tokens indexed for them are not known any more)."""
        with self.write():
            self._create_fts(namespace, rebuild=True)

    @_guarded
    def fts_add(self, namespace: str, key: int, text: str) -> None:
        """Index ``text`` under ``key``: FTS5 row now, postings before the write transaction
        this runs in commits."""
        with self._lock:
            self.conn.execute(
                f"INSERT INTO {fts_table(namespace)} (rowid, text) VALUES (?, ?)", (key, text)
            )
            if self._depth:
                self._pending_postings.setdefault(namespace, []).append((key, text))
            else:  # pragma: no cover - every caller writes inside write()
                postings.add(self.conn, namespace, key, postings.tokenizer().counts(text))

    def _flush_postings(self) -> None:
        """Write the postings of the rows added in this write transaction (under the lock):
        their texts tokenized together, each term's new keys appended together."""
        while self._pending_postings:
            namespace, rows = self._pending_postings.popitem()
            counts = postings.tokenizer().counts_many([text for _, text in rows])
            postings.add_many(self.conn, namespace,
                              [(key, c) for (key, _), c in zip(rows, counts, strict=True)])

    @_guarded
    def fts_remove(self, namespace: str, key: int, text: str) -> None:
        """Drop ``key``'s FTS5 row and postings (inside a write transaction). ``text`` must
        be the text indexed for it (what memories.text held when fts_add ran): FTS5 keeps
        no copy, and removes the tokens of the text it is given."""
        table = fts_table(namespace)
        with self._lock:
            self._flush_postings()  # a row added earlier in this transaction has them first
            if self.conn.execute(f"SELECT 1 FROM {table} WHERE rowid = ?",
                                 (key,)).fetchone() is None:
                return
            postings.remove(self.conn, namespace, key, postings.tokenizer().counts(text))
            self.conn.execute(f"INSERT INTO {table} ({table}, rowid, text) "
                              "VALUES ('delete', ?, ?)", (key, text))

    def close(self) -> None:
        with self._lock:
            try:
                self.conn.close()
            except sqlite3.Error:  # pragma: no cover - closing a broken connection
                pass

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one."""
        with self._lock:
            if self._reading:
                raise LocalStoreError("catalog write inside a read snapshot")
            if self._depth:
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
            self._depth = 1
            try:
                yield self.conn
                self._flush_postings()
            except BaseException:
                self._pending_postings.clear()
                self._depth = 0
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:  # pragma: no cover - rollback after a failed commit
                    pass
                raise
            else:
                self._depth = 0
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    try:
                        self.conn.execute("ROLLBACK")
                    except sqlite3.Error:  # pragma: no cover
                        pass
                    raise _translate(exc, self.path) from exc

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees one consistent state.

        Reads of other processes' commits wait for the next snapshot, and the
        cached counts, statistics and namespace rows check for changes
        (``PRAGMA data_version``) once instead of at each use: a recall's reads
        run in one. Holds the lock throughout (the connection's other users
        wait). Inside a write, the write's own view serves; a write inside a
        snapshot is refused.
        """
        with self._lock:
            if self._depth or self._reading:
                yield self.conn
                return
            try:
                self.conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
            self._reading, self._read_checked = True, False
            try:
                yield self.conn
            finally:
                self._reading = False
                self.conn.execute("COMMIT")  # a read transaction: ends it, writes nothing

    @_guarded
    def data_version(self) -> int:
        """Changes whenever *another* connection commits (cheap staleness check). Inside a
        snapshot: the snapshot's, read once."""
        with self._lock:
            if self._reading:
                self._fresh_caches()
                assert self._df_version is not None
                return self._df_version[0]
            return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    @_guarded
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self.conn.execute(sql, params).fetchall()

    @_guarded
    def query_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self.conn.execute(sql, params).fetchone()
            return row

    @_guarded
    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self.conn.execute(sql, params)

    @_guarded
    def scrub(self) -> None:
        """Push deleted text out of the files: merge FTS5 segments, checkpoint the WAL.

        With ``secure_delete`` on, SQLite zeroes freed content; the FTS5 merge
        drops index entries of deleted rows; the checkpoint rewrites the main
        file and truncates the WAL that still held the old page images.
        """
        with self.write() as c:
            for (name,) in c.execute("SELECT name FROM namespaces").fetchall():
                table = fts_table(str(name))
                c.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
        self._reclaim()
        for attempt in range(20):
            with self._lock:
                busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy:
                return
            # Another process is reading: the WAL (still holding the deleted
            # page images) can only be truncated once it is done.
            time.sleep(0.01 * (attempt + 1))
        log.warning("catalog %s: WAL checkpoint kept being blocked by readers; deleted text "
                    "stays in the -wal file until the next checkpoint", self.path)

    def _reclaim(self) -> None:
        """Give free pages back to the file system when they are a quarter of the file
        (after a large forget): ``incremental_vacuum`` moves the last pages into the free
        ones and truncates, at the checkpoint. Fewer free pages are left for the next
        writes to reuse. Catalogs made before auto_vacuum was set keep their free pages
        until a VACUUM (``Memory.compact``) switches them over."""
        with self._lock:
            c = self.conn
            if self._depth or int(c.execute("PRAGMA auto_vacuum").fetchone()[0]) != _INCREMENTAL:
                return
            free = int(c.execute("PRAGMA freelist_count").fetchone()[0])
            pages = int(c.execute("PRAGMA page_count").fetchone()[0])
            if free >= RECLAIM_MIN_PAGES and 4 * free >= pages:
                # executescript steps the pragma to its end (execute() frees one page)
                c.executescript("PRAGMA incremental_vacuum;")

    @_guarded
    def shed_vectors(self, batch: int = 2000) -> int:
        """Empty the ``vector`` of every row whose sealed copy carries exactly that vector
        (rows written before schema 7 keep theirs until this runs, from ``vacuum``);
        returns how many. Rows whose sealed copy this process cannot open keep theirs."""
        if self.vector_source is None:
            return 0
        shed, last = 0, 0
        while True:
            with self.write() as c:
                rows = c.execute(
                    "SELECT key, namespace, vector, sealed FROM memories WHERE key > ? AND "
                    "length(vector) > 0 AND sealed IS NOT NULL ORDER BY key LIMIT ?",
                    (last, batch)).fetchall()
                if not rows:
                    return shed
                empty = [(int(r[0]),) for r in rows
                         if not stored_vector(c, str(r[1]), r[3], bytes(r[2]))]
                c.executemany("UPDATE memories SET vector = x'' WHERE key = ?", empty)
                shed += len(empty)
                last = int(rows[-1][0])

    @_guarded
    def shed_sealed(self, batch: int = 2000) -> int:
        """Drop the sealed copy of every published row whose bytes the embedded relayer
        holds (held.py; those published before, or while another backend was in use, keep
        theirs until this runs, from ``vacuum``); returns how many."""
        source = self.sealed_source
        if source is None or not source.drops:
            return 0
        shed, last = 0, 0
        while True:
            with self.write() as c:
                done, seen = shed_held(c, after=last, limit=batch)
            shed += done
            if seen is None:
                return shed
            last = seen

    @_guarded
    def vacuum(self) -> None:
        self.shed_vectors()  # first: it reads the vectors from the copies still kept
        self.shed_sealed()
        with self.write() as c:
            move_object_ids(c)
        with self._lock:
            if self._vacuum_to_page_size():
                return  # the VACUUM ran outside WAL: nothing to checkpoint
            self.conn.execute("VACUUM")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()

    def _vacuum_to_page_size(self) -> bool:
        """VACUUM a catalog made with other pages into :data:`PAGE_SIZE` ones (WAL keeps
        the size: the VACUUM runs in rollback mode, then WAL again). Leaving WAL needs the
        only connection to the file: with another open, False (a plain VACUUM then)."""
        c = self.conn
        if int(c.execute("PRAGMA page_size").fetchall()[0][0]) == PAGE_SIZE:
            return False
        c.execute("PRAGMA busy_timeout = 0")
        try:
            mode = c.execute("PRAGMA journal_mode = DELETE").fetchall()[0][0]
        except sqlite3.OperationalError:
            mode = "wal"
        finally:
            c.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if str(mode).lower() == "wal":
            return False
        try:
            c.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            c.execute("VACUUM")
        finally:
            c.execute("PRAGMA journal_mode = WAL").fetchall()
        return True

    # -- meta -------------------------------------------------------------------

    @_guarded
    def get_meta(self, key: str) -> str | None:
        row = self.query_one("SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    @_guarded
    def set_meta(self, key: str, value: str) -> None:
        with self.write() as c:
            c.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    @_guarded
    def current_epoch(self) -> int | None:
        value = self.get_meta("current_epoch")
        return None if value is None else int(value)

    @_guarded
    def note_epoch(self, epoch: int | None, *, at: float | None = None,
                   trusted: bool = False) -> None:
        """Remember the highest current epoch seen in a store response, and when it was seen.

        The sightings feed :class:`walrus_mem._walrus.expiry.EpochClock`. Unless ``trusted``
        (the mock's own clock route), a sighting :attr:`epoch_guard` finds implausible
        is ignored with a warning: one lying store answer must not expire everything.
        """
        if epoch is None:
            return
        when = time.time() if at is None else at
        if not trusted and self.epoch_guard is not None \
                and self.epoch_guard.refuses(int(epoch), when):
            return
        with self.write() as c:
            record_seen(c, int(epoch), when)
            c.execute(
                "INSERT INTO meta (key, value) VALUES ('current_epoch', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = "
                "CAST(max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER)) AS TEXT)",
                (str(int(epoch)),),
            )

    # -- namespaces ---------------------------------------------------------------

    def cached_namespace(self, name: str) -> sqlite3.Row | None:
        """The namespace row as :meth:`namespace` last read it, unchecked (None: not read
        since the last change). A hint: what it answers must be checked in a snapshot."""
        with self._lock:
            return self._ns_rows.get(name)

    @_guarded
    def namespace(self, name: str) -> sqlite3.Row | None:
        with self._lock:
            # Cached between changes (every recall asks): not inside a transaction,
            # whose reads a rollback could take back.
            cached = self._reading or not self.conn.in_transaction
            if cached:
                self._fresh_caches()
                if name in self._ns_rows:
                    return self._ns_rows[name]
            row = self.query_one("SELECT * FROM namespaces WHERE name = ?", (name,))
            if cached:
                if len(self._ns_rows) >= 1024:
                    self._ns_rows.clear()
                self._ns_rows[name] = row
            return row

    @_guarded
    def namespaces(self) -> list[str]:
        return [str(r[0]) for r in self.query("SELECT name FROM namespaces ORDER BY name")]

    @_guarded
    def ensure_namespace(self, name: str, fingerprint: str | None) -> sqlite3.Row:
        with self.write() as c:
            c.execute(
                "INSERT INTO namespaces (name, key_fingerprint, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET key_fingerprint = "
                "coalesce(namespaces.key_fingerprint, excluded.key_fingerprint)",
                (name, fingerprint, time.time()),
            )
            self._create_fts(name)
            row = c.execute("SELECT * FROM namespaces WHERE name = ?", (name,)).fetchone()
        assert row is not None
        return row  # type: ignore[no-any-return]

    @_guarded
    def set_model(self, name: str, model_id: str | None, dim: int | None) -> None:
        with self.write() as c:
            c.execute(
                "UPDATE namespaces SET model_id = ?, dim = ? WHERE name = ?",
                (model_id, dim, name),
            )

    # -- memories ----------------------------------------------------------------

    @_guarded
    def memory(self, namespace: str, memory_id: str) -> sqlite3.Row | None:
        return self.query_one(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ? AND namespace = ?",
            (memory_id, namespace),
        )

    @_guarded
    def memories_by_keys(self, namespace: str, keys: Sequence[int]) -> dict[int, sqlite3.Row]:
        # By rowid alone, the namespace checked here: with it in the WHERE clause SQLite
        # walks the (namespace, key) index and then the table, two descents a row.
        wanted = [int(k) for k in keys]
        if len(wanted) <= 16:  # a recall's winners: bound parameters, no JSON
            rows = self.query(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE key IN "
                              f"({','.join('?' * len(wanted))})", wanted)
        else:
            rows = self.query(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE key IN "
                              "(SELECT value FROM json_each(?))", (json.dumps(wanted),))
        return {int(r["key"]): r for r in rows if r["namespace"] == namespace}

    @_guarded
    def texts_by_keys(self, namespace: str,
                      keys: Sequence[int]) -> dict[int, tuple[str, str, float]]:
        """(text, metadata JSON, created_at) of the given keys: recall's query priors."""
        rows = self.query(
            "SELECT key, text, metadata, created_at FROM memories WHERE key IN "
            "(SELECT value FROM json_each(?)) AND namespace = ?",
            (json.dumps([int(k) for k in keys]), namespace),
        )
        return {int(r[0]): (str(r[1]), str(r[2]), float(r[3])) for r in rows}

    @_guarded
    def memories_by_ids(self, namespace: str, ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        # "+namespace": found by the id index. A plain "namespace = ?" let SQLite pick a
        # (namespace, ...) index and scan every row of the namespace: 70 ms per write at
        # 100k memories, 0.8 s at 1M (issue 28).
        rows = self.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN "
            "(SELECT value FROM json_each(?)) AND +namespace = ?",
            (json.dumps(list(ids)), namespace),
        )
        return {str(r["id"]): r for r in rows}

    @property
    def vector_source(self) -> VectorSource | None:
        """Where a row's vector comes from when its sealed copy carries it (vectors.py):
        set by Memory, which holds the keys."""
        return getattr(self.conn, "vector_source", None)

    @vector_source.setter
    def vector_source(self, source: VectorSource | None) -> None:
        self.conn.vector_source = source  # type: ignore[attr-defined]

    @property
    def sealed_source(self) -> HeldCopies | None:
        """Where a published row without its sealed copy reads it (held.py): set by the
        publisher when the data dir has an embedded relayer."""
        return getattr(self.conn, "sealed_source", None)

    @sealed_source.setter
    def sealed_source(self, source: HeldCopies | None) -> None:
        self.conn.sealed_source = source  # type: ignore[attr-defined]

    @_guarded
    def vectors_by_keys(
        self, namespace: str, keys: Sequence[int]
    ) -> dict[int, npt.NDArray[np.float32]]:
        with self._lock:
            rows = self.query(
                f"SELECT key, {VECTOR_COLUMNS} FROM memories WHERE key IN "
                "(SELECT value FROM json_each(?)) AND namespace = ?",
                (json.dumps([int(k) for k in keys]), namespace),
            )
            vectors = resolve_vectors(self.conn, namespace, [(r[1], r[2]) for r in rows])
        return {int(r[0]): vector_from_blob(v) for r, v in zip(rows, vectors, strict=True)}

    @_guarded
    def index_rows(
        self, namespace: str, keys: Sequence[int]
    ) -> dict[int, tuple[npt.NDArray[np.float32], tuple[float, float, float | None]]]:
        """What the index needs per key: the vector and (created_at, importance, expires_at)."""
        with self._lock:
            rows = self.query(
                f"SELECT key, {VECTOR_COLUMNS}, created_at, importance, expires_at FROM memories "
                "WHERE key IN (SELECT value FROM json_each(?)) AND namespace = ?",
                (json.dumps([int(k) for k in keys]), namespace),
            )
            vectors = resolve_vectors(self.conn, namespace, [(r[1], r[2]) for r in rows])
        return {
            int(r[0]): (vector_from_blob(v), (float(r[3]), float(r[4]), r[5]))
            for r, v in zip(rows, vectors, strict=True)
        }

    @_guarded
    def count(self, namespace: str) -> int:
        row = self.query_one("SELECT count(*) FROM memories WHERE namespace = ?", (namespace,))
        return int(row[0]) if row else 0

    @_guarded
    def iter_memories(self, namespace: str, batch: int = 1000) -> Iterator[sqlite3.Row]:
        """All memories of a namespace in key order, fetched in batches."""
        last = 0
        while True:
            rows = self.query(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ? AND key > ? "
                "ORDER BY key LIMIT ?",
                (namespace, last, batch),
            )
            if not rows:
                return
            yield from rows
            last = int(rows[-1]["key"])

    # -- write path: the memories' writes are in writes.py, idempotency and dedupe in dedupe.py --

    @_guarded
    def adopt_model(self, namespace: str, model_id: str, dim: int) -> None:
        """Record the namespace's embedding model unless it already has one."""
        with self.write() as c:
            c.execute(
                "UPDATE namespaces SET model_id = ?, dim = ? WHERE name = ? AND model_id IS NULL",
                (model_id, dim, namespace),
            )

    @_guarded
    def stats_counts(self, namespace: str) -> dict[str, int]:
        row = self.query_one(
            "SELECT count(*), coalesce(sum(status = 'published'), 0), "
            "coalesce(sum(status = 'queued'), 0), coalesce(sum(length(CAST(text AS BLOB))), 0), "
            "coalesce(sum(length(sealed)), 0) FROM memories WHERE namespace = ?", (namespace,))
        assert row is not None
        forgotten = self.query_one(
            "SELECT count(DISTINCT memory_id) FROM versions WHERE namespace = ? "
            "AND event = 'DELETE'", (namespace,))
        return {
            "memories": int(row[0]), "published": int(row[1]), "queued": int(row[2]),
            "text_bytes": int(row[3]), "sealed_bytes": int(row[4]),
            "forgotten": int(forgotten[0]) if forgotten else 0,
            "outbox_batches": self.outbox_count(namespace),
        }


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside our literals)."""
    return [s.strip() for s in script.split(";") if s.strip()]
