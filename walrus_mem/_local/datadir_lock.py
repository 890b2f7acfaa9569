"""The data-dir lock: every open :class:`Memory` holds it shared, ``repair`` exclusively.

Several processes may share a data dir (SQLite WAL). Repair is the exception:
it moves the catalog aside and rebuilds it, and a process that kept it open
would go on writing acknowledged memories into the moved-aside file. So each
Memory takes a shared ``flock`` on ``locks/datadir.lock`` for its lifetime
and writes a holder file (``locks/open/<pid>-<n>``: its pid and program) that
repair names when its exclusive, non-blocking ``flock`` is refused. A
Memory opened in the process that holds the exclusive lock (repair's own)
takes nothing. ``flock`` locks die with their process, so a killed holder
never blocks repair; its stale holder file is ignored and removed.

POSIX only: where ``fcntl`` is missing (Windows) the lock is a no-op.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from pathlib import Path

from ..errors import DataDirBusy
from .private_dirs import make_private_dirs

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["DataDirLock", "exclusive_held"]

_EXCLUSIVE: dict[Path, int] = {}  # data dir -> fd, held by this process
_GUARD = threading.Lock()
_COUNTER = itertools.count()


def _lock_path(data_dir: Path) -> Path:
    path = Path(data_dir).expanduser().resolve() / "locks" / "datadir.lock"
    make_private_dirs(path.parent)
    return path


def exclusive_held(data_dir: Path) -> bool:
    """Whether this process holds the data dir exclusively (a repair runs here)."""
    return Path(data_dir).expanduser().resolve() in _EXCLUSIVE


def _holders(data_dir: Path) -> list[str]:
    """"<pid> <command>" of each live process with a holder file (stale ones removed)."""
    folder = _lock_path(data_dir).parent / "open"
    out: list[str] = []
    for entry in sorted(folder.glob("*")) if folder.is_dir() else []:
        try:
            pid = int(entry.name.split("-")[0])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            entry.unlink(missing_ok=True)
            continue
        except PermissionError:
            pass  # alive, another user's
        try:
            out.append(entry.read_text(encoding="utf-8").strip()[:200])
        except OSError:
            out.append(str(pid))
    return list(dict.fromkeys(out))


class DataDirLock:
    """A lock on one data dir: :meth:`shared` for a Memory, :meth:`exclusive` for repair."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self._fd: int | None = None
        self._holder: Path | None = None
        self._exclusive = False

    def shared(self) -> DataDirLock:
        """Hold the data dir open; DataDirBusy while a repair holds it."""
        if fcntl is None or exclusive_held(self.data_dir):
            return self
        try:
            fd = os.open(_lock_path(self.data_dir), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:  # e.g. a read-only data dir: nothing there can be repaired anyway
            return self
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirBusy(
                f"data dir {self.data_dir} is being repaired (`walrus-mem repair`) by another "
                "process; open it when the repair has finished") from None
        self._fd = fd
        holder = self.data_dir / "locks" / "open" / f"{os.getpid()}-{next(_COUNTER)}"
        try:
            make_private_dirs(holder.parent)
            # the program's name only: arguments may carry secrets
            program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
            with open(os.open(holder, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
                      encoding="utf-8") as fh:
                fh.write(f"pid {os.getpid()}: {program}\n")
            self._holder = holder
        except OSError:
            pass  # the lock still protects; only the name of this holder is missing
        return self

    def exclusive(self) -> DataDirLock:
        """Hold the data dir alone; DataDirBusy naming the holders when any is open."""
        if fcntl is None:
            return self
        with _GUARD:
            if self.data_dir in _EXCLUSIVE:
                raise DataDirBusy(f"data dir {self.data_dir} is already being repaired here")
            fd = os.open(_lock_path(self.data_dir), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                holders = _holders(self.data_dir)
                raise DataDirBusy(
                    f"data dir {self.data_dir} is open in another process "
                    f"({'; '.join(holders) or 'unknown'}): stop it (agent, MCP server, CLI) "
                    "and run repair again; repair moves files that process writes to",
                    holders) from None
            _EXCLUSIVE[self.data_dir] = fd
            self._fd, self._exclusive = fd, True
        return self

    def release(self) -> None:
        if self._holder is not None:
            self._holder.unlink(missing_ok=True)
            self._holder = None
        if self._fd is None:
            return
        with _GUARD:
            if self._exclusive:
                _EXCLUSIVE.pop(self.data_dir, None)
            os.close(self._fd)  # closing drops the flock
            self._fd, self._exclusive = None, False

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
