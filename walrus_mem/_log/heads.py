"""What a data dir remembers about head references (head_types.py).

:class:`SeenHeads` is the per-data-dir record of every manifest this data dir
has published, pulled, restored or walked past: its reference, writer and
parents. It lives in ``<data_dir>/heads.sqlite3``, outside the catalog, so it
survives the catalog's loss (restore then knows where to start). The
newest heads of a namespace are the ones no other seen head names as parent.

:class:`HeadsFile` is the optional text file (``Settings.heads_file``, e.g. on
a synced folder) through which machines exchange heads: ``sync`` writes its
new head there and ``sync`` / ``pull`` read the others'.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import tempfile
import threading
import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from filelock import FileLock

from .._local.private_dirs import make_private_dirs
from ..errors import InvalidHead, LocalStoreError
from .head_types import HeadRef, SeenHead, parse_head
from .heads_mirror import HeadsMirror, add_columns

__all__ = ["HeadRef", "HeadsFile", "SeenHead", "SeenHeads", "parse_head"]

_MAX_PROBLEMS: Final = 10  # unreadable heads-file lines named one by one

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS heads (namespace TEXT NOT NULL, blob_id TEXT NOT NULL, "
    "seq INTEGER NOT NULL, digest TEXT NOT NULL, writer TEXT NOT NULL, parents TEXT NOT NULL, "
    "origins TEXT NOT NULL, seen_at REAL NOT NULL, end_epoch INTEGER, gone_at REAL, "
    "stored_epoch INTEGER, PRIMARY KEY (namespace, blob_id))",
    "CREATE TABLE IF NOT EXISTS edges (namespace TEXT NOT NULL, child TEXT NOT NULL, "
    "parent TEXT NOT NULL, PRIMARY KEY (namespace, child, parent))",
    "CREATE INDEX IF NOT EXISTS edges_parent ON edges (namespace, parent)",
    "CREATE INDEX IF NOT EXISTS heads_writer_seq ON heads (namespace, writer, seq)",
)
_MARK: Final = "served_mark:"
"""meta ``served_mark:<namespace>``: a copy of the catalog's served mark (served_mark.py)."""
_MARKS: Final = "substr(key, 1, 12) = 'served_mark:'"  # every namespace's copy
_ADDED_COLUMNS: Final = (("end_epoch", "INTEGER"), ("gone_at", "REAL"),
                         ("stored_epoch", "INTEGER"))
"""Columns newer than the first heads stores: added in place when an older one opens."""


class SeenHeads:
    """``<data_dir>/heads.sqlite3``: every manifest this data dir has seen, per namespace.

    The file is created on the first write only, so reading (and failing a
    restore with the wrong key) leaves a data dir exactly as it was. Every row
    is also written to ``mirror`` (heads_mirror.py, outside the data dir), and
    :meth:`catch_up` copies back what a rolled-back data dir forgot.
    """

    def __init__(self, path: Path, mirror: HeadsMirror | None = None) -> None:
        self.path = Path(path)
        self.mirror = mirror
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        with self._lock:
            if self._conn is not None:
                return self._conn
            if not create and not self.path.exists():
                return None
            new = not self.path.exists()
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=30,
                                       check_same_thread=False)
                if new:
                    os.chmod(self.path, 0o600)
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
                for statement in _SCHEMA:
                    conn.execute(statement)
                add_columns(conn, "heads", _ADDED_COLUMNS)
            except sqlite3.Error as exc:
                raise LocalStoreError(f"heads store {self.path}: {exc}") from exc
            self._conn = conn
            return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connect(create=True)
            assert conn is not None
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise LocalStoreError(f"heads store {self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        if self.mirror is not None:
            self.mirror.close()

    @staticmethod
    def _writer_in(c: sqlite3.Connection) -> str:
        row = c.execute("SELECT value FROM meta WHERE key = 'writer'").fetchone()
        if row is not None:
            return str(row[0])
        writer = secrets.token_hex(8)
        c.execute("INSERT INTO meta (key, value) VALUES ('writer', ?)", (writer,))
        return writer

    def writer_id(self) -> str:
        """This data dir's writer id (random, created with the store)."""
        with self._tx() as c:
            return self._writer_in(c)

    def _stored_writer(self) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = 'writer'", ())
        return str(rows[0][0]) if rows else None

    def set_writer(self, writer: str) -> None:
        """Keep ``writer`` as this data dir's writer id (a heads store rebuilt by repair)."""
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('writer', ?)", (writer,))
        if self.mirror is not None:
            self.mirror.record(writer, [])

    @staticmethod
    def _insert(c: sqlite3.Connection, namespace: str, head: SeenHead) -> None:
        # A row seen again keeps its first sighting; an end epoch learned later (the
        # store answer, a root read again) tightens the bound: both are upper bounds.
        # Stored epochs are lower bounds: the higher one holds.
        c.execute(
            "INSERT INTO heads (namespace, blob_id, seq, digest, writer, parents, origins, "
            "seen_at, end_epoch, stored_epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (namespace, blob_id) DO UPDATE SET end_epoch = CASE "
            "WHEN heads.end_epoch IS NULL THEN excluded.end_epoch "
            "WHEN excluded.end_epoch IS NULL THEN heads.end_epoch "
            "ELSE min(heads.end_epoch, excluded.end_epoch) END, "
            "stored_epoch = coalesce(max(heads.stored_epoch, excluded.stored_epoch), "
            "heads.stored_epoch, excluded.stored_epoch)",
            (namespace, head.ref.blob_id, head.ref.seq, head.ref.digest, head.writer,
             json.dumps([str(p) for p in head.parents]), json.dumps(list(head.origins)),
             time.time(), head.end_epoch, head.stored_epoch),
        )
        c.executemany(
            "INSERT OR IGNORE INTO edges (namespace, child, parent) VALUES (?, ?, ?)",
            [(namespace, head.ref.blob_id, p.blob_id) for p in head.parents],
        )

    def add(self, namespace: str, head: SeenHead) -> None:
        with self._tx() as c:
            self._insert(c, namespace, head)
            writer = self._writer_in(c)  # a store with heads always has a writer id
        if self.mirror is not None:
            self.mirror.record(writer, [(namespace, head)])

    def catch_up(self) -> dict[str, list[SeenHead]]:
        """Copy in the heads the mirror holds for this data dir and its store lacks
        (a data dir restored from a backup, or copied), per namespace; seed the mirror
        with what it lacks (a store from before the mirror)."""
        mirror = self.mirror
        if mirror is None:
            return {}
        owner = self._stored_writer() or mirror.owner_of_data_dir()
        if owner is None:
            return {}
        theirs = {(str(r[0]), str(r[1])): (str(r[0]), self._row(r[1:7], r[7], r[8]))
                  for r in mirror.rows(owner)}
        ours = {(str(r[0]), str(r[1])): (str(r[0]), self._row(r[1:])) for r in self._query(
            "SELECT namespace, blob_id, seq, digest, writer, parents, origins FROM heads", ())}
        missing = [theirs[k] for k in sorted(theirs.keys() - ours.keys())]
        if missing:
            with self._tx() as c:
                if c.execute("SELECT 1 FROM meta WHERE key = 'writer'").fetchone() is None:
                    c.execute("INSERT INTO meta (key, value) VALUES ('writer', ?)", (owner,))
                for ns, head in missing:
                    self._insert(c, ns, head)
        unmirrored = [ours[k] for k in sorted(ours.keys() - theirs.keys())]
        if unmirrored or mirror.owner_of_data_dir() != owner:
            mirror.record(owner, unmirrored)
        out: dict[str, list[SeenHead]] = {}
        for ns, head in missing:
            out.setdefault(ns, []).append(head)
        return out

    def equivocations(self, namespace: str) -> list[tuple[SeenHead, SeenHead]]:
        """Pairs of seen heads one writer published with the same seq: a data dir
        restored from a backup (or copied) that forgot its own newer manifest."""
        rows = self._query(
            "SELECT a.blob_id, a.seq, a.digest, a.writer, a.parents, a.origins, "
            "b.blob_id, b.seq, b.digest, b.writer, b.parents, b.origins FROM heads a "
            "JOIN heads b ON a.namespace = b.namespace AND a.writer = b.writer "
            "AND a.seq = b.seq AND a.blob_id < b.blob_id WHERE a.namespace = ? AND a.writer != ''"
            " ORDER BY a.seq, a.blob_id", (namespace,))
        return [(self._row(r[:6]), self._row(r[6:])) for r in rows]

    def same_seq(self, namespace: str, head: SeenHead) -> list[SeenHead]:
        """Other seen heads ``head``'s writer published with its seq (an equivocation)."""
        if not head.writer:
            return []
        rows = self._query(
            "SELECT blob_id, seq, digest, writer, parents, origins FROM heads WHERE "
            "namespace = ? AND writer = ? AND seq = ? AND blob_id != ? ORDER BY blob_id",
            (namespace, head.writer, head.ref.seq, head.ref.blob_id))
        return [self._row(r) for r in rows]

    def max_own_seq(self, namespace: str, writer: str) -> int:
        """The highest seq this data dir's writer id published of ``namespace`` (seen)."""
        rows = self._query("SELECT max(seq) FROM heads WHERE namespace = ? AND writer = ?",
                           (namespace, writer))
        return int(str(rows[0][0])) if rows and rows[0][0] is not None else 0

    def _query(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._lock:
            conn = self._connect(create=False)
            if conn is None:
                return []
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise LocalStoreError(f"heads store {self.path}: {exc}") from exc

    @staticmethod
    def _row(row: tuple[object, ...], end_epoch: object = None,
             stored_epoch: object = None) -> SeenHead:
        blob_id, seq, digest, writer, parents, origins = row
        return SeenHead(
            HeadRef(int(str(seq)), str(blob_id), str(digest)), str(writer),
            tuple(HeadRef.parse(p) for p in json.loads(str(parents))),
            tuple(str(o) for o in json.loads(str(origins))),
            None if end_epoch is None else int(str(end_epoch)),
            None if stored_epoch is None else int(str(stored_epoch)),
        )

    def end_bound(self, namespace: str, blob_id: str) -> tuple[int | None, float | None]:
        """(the highest its manifest's end epoch can be, when it was first seen) of a seen
        head; (None, None) for one never seen."""
        rows = self._query("SELECT end_epoch, seen_at FROM heads WHERE namespace = ? AND "
                           "blob_id = ?", (namespace, blob_id))
        if not rows:
            return None, None
        end, seen_at = rows[0]
        return (None if end is None else int(str(end)),
                None if seen_at is None else float(str(seen_at)))

    def mark_gone(self, namespace: str, blob_id: str, gone: bool) -> None:
        """Record that the head's manifest answered 404 past its end epoch and was taken
        as merged without its content (``gone``), or that its content is in now."""
        with self._tx() as c:
            c.execute("UPDATE heads SET gone_at = ? WHERE namespace = ? AND blob_id = ?",
                      (time.time() if gone else None, namespace, blob_id))

    def is_gone(self, namespace: str, blob_id: str) -> bool:
        rows = self._query("SELECT gone_at FROM heads WHERE namespace = ? AND blob_id = ?",
                           (namespace, blob_id))
        return bool(rows) and rows[0][0] is not None

    def end_all(self, epoch: int, *, stored_above: int, seen_before: float) -> None:
        """Every head stored before a reset ends by ``epoch``: the network lost them (a
        wipe, an epoch reset: network_reset.py), so a 404 for one proves it gone. Such a
        head was stored at an epoch above ``stored_above`` (impossible on the new
        network so far: a writer never names an epoch above the one its root was
        stored in, gone.store_root) or, where that epoch is unknown, seen before
        ``seen_before`` (when the new network's epochs were first seen)."""
        if self._connect(create=False) is None:
            return
        with self._tx() as c:
            c.execute("UPDATE heads SET end_epoch = ? WHERE stored_epoch > ? OR "
                      "(stored_epoch IS NULL AND seen_at <= ?)",
                      (epoch, stored_above, seen_before))

    def end_seen_by(self, epoch: int, seen_by: float) -> None:
        """Every head first seen by ``seen_by`` ends by ``epoch`` (unless it ends sooner):
        another network behind the endpoints lacks them whatever epoch they were stored
        in (network_reset.py, a change of network); heads seen later may be the new
        network's own and are left as they are."""
        if self._connect(create=False) is None:
            return
        with self._tx() as c:
            c.execute("UPDATE heads SET end_epoch = ? WHERE seen_at <= ? AND "
                      "(end_epoch IS NULL OR end_epoch > ?)", (epoch, seen_by, epoch))

    def stored_floor(self) -> tuple[int, str, HeadRef] | None:
        """(the highest epoch a seen head was stored in, that head's namespace and
        reference): an epoch the network has reached. Heads a followed reset ended are
        left aside (their end now lies below it). It outlives the catalog, so even a
        rebuilt one knows the network went back below it."""
        rows = self._query(
            "SELECT stored_epoch, namespace, seq, blob_id, digest FROM heads WHERE "
            "stored_epoch IS NOT NULL AND (end_epoch IS NULL OR end_epoch > stored_epoch) "
            "ORDER BY stored_epoch DESC, seen_at DESC LIMIT 1", ())
        if not rows:
            return None
        epoch, ns, seq, blob_id, digest = rows[0]
        return (int(str(epoch)), str(ns),
                HeadRef(int(str(seq)), str(blob_id), str(digest)))

    def get(self, namespace: str, blob_id: str) -> SeenHead | None:
        rows = self._query(
            "SELECT blob_id, seq, digest, writer, parents, origins, end_epoch, stored_epoch "
            "FROM heads WHERE namespace = ? AND blob_id = ?", (namespace, blob_id))
        return self._row(rows[0][:6], rows[0][6], rows[0][7]) if rows else None

    def newest(self, namespace: str) -> list[SeenHead]:
        """The seen heads no other seen head descends from, newest first."""
        rows = self._query(
            "SELECT blob_id, seq, digest, writer, parents, origins FROM heads h "
            "WHERE namespace = ? AND NOT EXISTS (SELECT 1 FROM edges e WHERE "
            "e.namespace = h.namespace AND e.parent = h.blob_id) ORDER BY seq DESC, blob_id",
            (namespace,))
        return [self._row(r) for r in rows]

    def namespaces(self) -> list[str]:
        return [str(r[0]) for r in self._query(
            "SELECT DISTINCT namespace FROM heads ORDER BY namespace", ())]

    def seen_at(self, namespace: str) -> dict[str, float]:
        """Blob id -> when it was first seen, of every manifest of ``namespace`` seen."""
        return {str(b): float(str(t)) for b, t in self._query(
            "SELECT blob_id, seen_at FROM heads WHERE namespace = ?", (namespace,))}

    def known_origins(self, namespace: str) -> set[str]:
        """The origins (first manifests) of every head of ``namespace`` seen here."""
        out: set[str] = set()
        for (origins,) in self._query("SELECT DISTINCT origins FROM heads WHERE namespace = ?",
                                      (namespace,)):
            out.update(str(o) for o in json.loads(str(origins)))
        return out

    def record_change(self, change: dict[str, object]) -> None:
        """A network change this data dir followed (network_reset.py ``_apply``): kept
        here and in the mirror, so a catalog rolled back past it (a backup of the data
        dir) learns of it and reads its blobs again (N10b)."""
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('network_change', ?)",
                      (json.dumps(change),))
            writer = self._writer_in(c)
        if self.mirror is not None:
            self.mirror.record_change(writer, change)

    def last_change(self) -> dict[str, Any] | None:
        """The latest network change followed here or, by this data dir's writer id, in
        the mirror (a heads store rolled back with its data dir lacks it)."""
        rows = self._query("SELECT value FROM meta WHERE key = 'network_change'", ())
        found = [str(rows[0][0])] if rows else []
        owner = self._stored_writer()
        if self.mirror is not None and owner is not None:
            found += self.mirror.changes(owner)
        changes = []
        for raw in found:
            try:
                change = json.loads(raw)
                float(change["at"])
                changes.append(change)
            except (ValueError, KeyError, TypeError):
                continue
        return max(changes, key=lambda ch: float(ch["at"]), default=None)

    def keep_mark(self, namespace: str | None, record: dict[str, Any] | None) -> None:
        """Keep a copy of the catalog's served mark of ``namespace`` (served_mark.py; None
        drops it, and a namespace of None drops every copy): a catalog lost to garbage
        takes its mark with it, and its repair then has only the heads it remembers,
        which answer 404 after a change of network just as they do behind a lagging
        aggregator (N14)."""
        if record is None and self._connect(create=False) is None:
            return
        with self._tx() as c:
            if namespace is None:
                c.execute(f"DELETE FROM meta WHERE {_MARKS}")
            elif record is None:
                c.execute("DELETE FROM meta WHERE key = ?", (_MARK + namespace,))
            else:
                c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                          (_MARK + namespace, json.dumps(record)))

    def kept_mark(self, namespace: str) -> dict[str, Any] | None:
        """The copy :meth:`keep_mark` kept (None: none, or unreadable)."""
        rows = self._query("SELECT value FROM meta WHERE key = ?", (_MARK + namespace,))
        try:
            record = json.loads(str(rows[0][0])) if rows else None
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def drop_witnesses(self, blobs: Collection[str]) -> None:
        """``blobs`` were deleted (a forget): a kept mark no longer counts on them being
        served, or a lagging head beside one would read as a lost network."""
        gone = set(blobs)
        if not gone or self._connect(create=False) is None:
            return
        with self._tx() as c:
            for key, raw in c.execute(f"SELECT key, value FROM meta WHERE {_MARKS}").fetchall():
                try:
                    record = json.loads(str(raw))
                    witnesses = record["witnesses"]
                    kept = [w for w in witnesses if str(w[0]) not in gone]
                except (ValueError, KeyError, TypeError, IndexError):
                    continue
                if len(kept) != len(witnesses):
                    record["witnesses"] = kept
                    c.execute("UPDATE meta SET value = ? WHERE key = ?",
                              (json.dumps(record), key))

    def max_seq(self, namespace: str) -> int:
        rows = self._query("SELECT max(seq) FROM heads WHERE namespace = ?", (namespace,))
        return int(str(rows[0][0])) if rows and rows[0][0] is not None else 0


class HeadsFile:
    """A small text file of ``<namespace> <head reference>`` lines shared between machines.

    ``sync`` replaces the lines of heads its new manifest descends from with
    the new head; lines of other namespaces and of heads it has not merged
    stay. Writes are atomic (temporary file + rename) under a file lock.
    """

    HEADER: Final = (
        "# walrus-mem heads: <namespace> <head reference>; written by `walrus-mem sync`\n"
    )

    def __init__(self, path: Path) -> None:
        self.path = Path(path).expanduser()

    def read(self, namespace: str | None = None) -> list[tuple[str, HeadRef]]:
        """(namespace, head) pairs; lines that cannot be read are left out
        (:meth:`read_checked` names them)."""
        return self.read_checked(namespace)[0]

    def read_checked(
        self, namespace: str | None = None
    ) -> tuple[list[tuple[str, HeadRef]], list[str]]:
        """(namespace, head) pairs, and one problem per line that may belong to
        ``namespace`` but cannot be read (not UTF-8, not two fields, a malformed
        head). A byte-order mark and CRLF endings are tolerated. The file is
        written by other machines' sync (or a sync service, or a person): a
        damaged line must be reported, never raise nor vanish silently.
        """
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return [], []
        except OSError as exc:
            raise LocalStoreError(f"heads file {self.path}: {exc}") from exc
        out: list[tuple[str, HeadRef]] = []
        problems: list[str] = []
        for number, chunk in enumerate(raw.split(b"\n"), start=1):
            try:
                line = chunk.decode("utf-8").lstrip("\ufeff")
            except UnicodeDecodeError:
                problems.append(f"heads file line {number}: not valid UTF-8")
                continue
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if namespace is not None and parts[0] != namespace:
                continue
            if len(parts) != 2:
                problems.append(f"heads file line {number}: not '<namespace> <head reference>'")
                continue
            try:
                out.append((parts[0], HeadRef.parse(parts[1])))
            except InvalidHead as exc:
                problems.append(f"heads file line {number}: {exc}")
        if len(problems) > _MAX_PROBLEMS:
            problems[_MAX_PROBLEMS:] = [
                f"heads file: {len(problems) - _MAX_PROBLEMS} more unreadable line(s)"]
        return out, problems

    def replace(self, namespace: str, new: HeadRef, superseded: Iterable[HeadRef]) -> None:
        """Write ``new`` for ``namespace`` and drop the lines of ``superseded`` heads."""
        drop = {r.blob_id for r in superseded} | {new.blob_id}
        make_private_dirs(self.path.parent)
        with FileLock(str(self.path) + ".lock", timeout=30, mode=0o600):
            kept = [(ns, ref) for ns, ref in self.read()
                    if not (ns == namespace and ref.blob_id in drop)]
            kept.append((namespace, new))
            # The file sits in a folder others may write (a synced share): a fresh
            # name no one could plant a symlink at beforehand, 0600, never followed.
            fd, tmp_name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp",
                                            dir=self.path.parent)
            tmp = Path(tmp_name)
            try:
                with open(fd, "w", encoding="utf-8") as fh:
                    fh.write(self.HEADER)
                    for ns, ref in sorted(kept, key=lambda p: (p[0], -p[1].seq, p[1].blob_id)):
                        fh.write(f"{ns} {ref}\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
