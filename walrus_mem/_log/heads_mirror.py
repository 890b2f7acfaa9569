"""A per-user copy of every data dir's seen heads, outside the data dirs.

``<data_dir>/heads.sqlite3`` (heads.py) says which manifests a data dir has
seen, but it lives inside the data dir: restoring a backup of the whole data
dir rolls it back too, and the stale data dir would then publish a manifest
with the same seq as the newer one it forgot (a fork by one writer). The
mirror, ``<state dir>/seen-heads.sqlite3``, keeps the same rows keyed by the
data dir's **writer id** (restored with the backup, so a restored or copied
data dir finds its own rows) and remembers which writer id each data dir path
had (so a backup older than the heads store itself is still recognised).

When a data dir opens, rows the mirror holds and its own store lacks are
copied in (:meth:`SeenHeads.catch_up`): the data dir then sees the heads it
forgot, merges them before it publishes, and refuses to publish a manifest
that does not descend from them.

The state dir is ``Settings.state_dir`` (``WALRUS_MEM_STATE_DIR``), else the
platform's user state dir (``$XDG_STATE_HOME/walrus-mem``, by default
``~/.local/state/walrus-mem``); 0700, the file 0600. If it cannot be written
the data dir works with its own store only, after one warning.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

import platformdirs

from .._local.private_dirs import make_private_dirs
from .._local.user_dirs import home_dir

if TYPE_CHECKING:
    from .head_types import SeenHead

__all__ = ["MIRROR_FILE", "HeadsMirror", "add_columns", "default_state_dir"]

log = logging.getLogger(__name__)

MIRROR_FILE: Final = "seen-heads.sqlite3"
T = TypeVar("T")

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS heads (owner TEXT NOT NULL, namespace TEXT NOT NULL, "
    "blob_id TEXT NOT NULL, seq INTEGER NOT NULL, digest TEXT NOT NULL, writer TEXT NOT NULL, "
    "parents TEXT NOT NULL, origins TEXT NOT NULL, end_epoch INTEGER, stored_epoch INTEGER, "
    "PRIMARY KEY (owner, namespace, blob_id))",
    "CREATE TABLE IF NOT EXISTS data_dirs (path TEXT PRIMARY KEY, owner TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS changes (owner TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


def add_columns(conn: sqlite3.Connection, table: str,
                columns: Iterable[tuple[str, str]]) -> None:
    """Add the ``columns`` an older store's ``table`` lacks (the mirror, heads.sqlite3):
    stores written before those columns existed open as they are."""
    have = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
    for name, kind in columns:
        if name not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/walrus-mem`` or ``~/.local/state/walrus-mem`` (platform's equivalent);
    ``$WALRUS_MEM_HOME/state`` when that is set."""
    return home_dir("state") or Path(platformdirs.user_state_dir("walrus-mem", appauthor=False))


class HeadsMirror:
    """``<state dir>/seen-heads.sqlite3``, shared by every data dir of this user.

    Every failure (unwritable dir, locked or corrupt file) disables the mirror for
    this process after one warning: the data dir's own store stays authoritative.
    """

    def __init__(self, state_dir: Path, data_dir: Path) -> None:
        self.path = Path(state_dir).expanduser() / MIRROR_FILE
        self.data_dir = str(Path(data_dir).expanduser().resolve())
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self.disabled: str | None = None

    def _fail(self, exc: BaseException) -> None:
        if self.disabled is None:
            self.disabled = f"{type(exc).__name__}: {exc}"
            log.warning(
                "seen-heads mirror %s is unusable (%s): this data dir continues with its own "
                "heads store only, so a restore of the whole data dir from a backup is not "
                "detected (docs/sync.md)", self.path, self.disabled)
        self.close()

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        if self.disabled is not None:
            return None
        if self._conn is not None:
            return self._conn
        if not create and not self.path.exists():
            return None
        make_private_dirs(self.path.parent)
        new = not self.path.exists()
        if new:  # owner only from the first byte
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=10,
                               check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            for statement in _SCHEMA:
                conn.execute(statement)
            add_columns(conn, "heads", (("end_epoch", "INTEGER"), ("stored_epoch", "INTEGER")))
        except sqlite3.Error:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _run(self, work: Callable[[sqlite3.Connection], T], default: T, *,
             create: bool) -> T:
        """``work(connection)``, or ``default`` when the mirror is absent or unusable."""
        with self._lock:
            try:
                conn = self._connect(create=create)
                return default if conn is None else work(conn)
            except (OSError, sqlite3.Error) as exc:
                self._fail(exc)
                return default

    def unwritable(self) -> str | None:
        """Why the mirror could not be written now (doctor's probe), or None."""
        if self.disabled is not None:
            return self.disabled
        probe = self.path.parent
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if probe != self.path.parent and not probe.is_dir():
            return f"{probe} is not a directory"
        if not os.access(probe, os.W_OK | os.X_OK):
            return f"{probe} is not writable"
        if self.path.exists() and not os.access(self.path, os.W_OK):
            return f"{self.path} is not writable"
        return None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def owner_of_data_dir(self) -> str | None:
        """The writer id this data dir path had when it last recorded a head."""
        def work(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT owner FROM data_dirs WHERE path = ?",
                               (self.data_dir,)).fetchone()
            return None if row is None else str(row[0])
        return self._run(work, None, create=False)

    def record(self, owner: str, rows: list[tuple[str, SeenHead]]) -> None:
        """Copy seen heads of the data dir whose writer id is ``owner``."""
        def work(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT INTO heads (owner, namespace, blob_id, seq, digest, writer, "
                    "parents, origins, end_epoch, stored_epoch) VALUES (?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, ?) ON CONFLICT (owner, namespace, blob_id) DO UPDATE SET end_epoch = "
                    "coalesce(heads.end_epoch, excluded.end_epoch), stored_epoch = "
                    "coalesce(heads.stored_epoch, excluded.stored_epoch)",
                    [(owner, ns, h.ref.blob_id, h.ref.seq, h.ref.digest, h.writer,
                      json.dumps([str(p) for p in h.parents]), json.dumps(list(h.origins)),
                      h.end_epoch, h.stored_epoch)
                     for ns, h in rows])
                conn.execute("INSERT OR REPLACE INTO data_dirs (path, owner) VALUES (?, ?)",
                             (self.data_dir, owner))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        self._run(work, None, create=True)

    def rows(self, owner: str) -> list[tuple[object, ...]]:
        """(namespace, blob_id, seq, digest, writer, parents, origins, end_epoch,
        stored_epoch) of ``owner``."""
        def work(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
            return conn.execute(
                "SELECT namespace, blob_id, seq, digest, writer, parents, origins, end_epoch, "
                "stored_epoch FROM heads WHERE owner = ?", (owner,)).fetchall()
        return self._run(work, [], create=False)

    def record_change(self, owner: str, change: dict[str, object]) -> None:
        """The network change the data dir whose writer id is ``owner`` followed last."""
        def work(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO changes (owner, value) VALUES (?, ?)",
                         (owner, json.dumps(change)))
        self._run(work, None, create=True)

    def changes(self, owner: str) -> list[str]:
        """The recorded network change of ``owner`` (JSON), if any."""
        def work(conn: sqlite3.Connection) -> list[str]:
            return [str(r[0]) for r in conn.execute(
                "SELECT value FROM changes WHERE owner = ?", (owner,))]
        return self._run(work, [], create=False)
