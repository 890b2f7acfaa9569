"""What the catalog's mixins share: sqlite3 error translation and the Catalog surface they use.

Kept apart from catalog.py so the mixins (fts.py, changes.py, outbox.py, reads.py,
writes.py, dedupe.py, postings_reads.py) can use :func:`_guarded` without importing the
Catalog class.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

from ..errors import CatalogCorrupt, LocalStoreError

__all__ = ["CatalogPart"]

P = ParamSpec("P")
T = TypeVar("T")

_CORRUPT_CODES: Final = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_BUSY_CODES: Final = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


class CatalogPart:
    """Base of :class:`~walrus_mem._catalog.catalog.Catalog` and its mixins.

    Declares (for mypy only) the connection and helpers Catalog defines and the
    mixins' SQL calls, so a mixin needs no import of catalog.py.
    """

    path: Path
    conn: sqlite3.Connection
    _lock: threading.RLock

    if TYPE_CHECKING:
        def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]: ...

        def query_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None: ...

        def write(self) -> AbstractContextManager[sqlite3.Connection]: ...

        def get_meta(self, key: str) -> str | None: ...

        def set_meta(self, key: str, value: str) -> None: ...

        def _fresh_caches(self) -> None: ...

        def _flush_postings(self) -> None: ...


def _translate(exc: sqlite3.Error, path: Path) -> Exception:
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _CORRUPT_CODES:
        return CatalogCorrupt(
            f"catalog {path} is not a usable SQLite database ({exc}); it was left untouched. "
            "Run `walrus-mem repair`: it moves the file aside and rebuilds the catalog from "
            "the newest manifest (head) of each namespace this data dir remembers"
        )
    if primary in _BUSY_CODES:
        return LocalStoreError(f"catalog {path} is locked by another process ({exc})")
    return LocalStoreError(f"catalog {path}: {exc}")


def _guarded(method: Callable[P, T]) -> Callable[P, T]:
    """Translate sqlite3 errors into the walrus_mem tree (corruption → CatalogCorrupt)."""

    @wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(*args, **kwargs)
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            self = args[0]
            assert isinstance(self, CatalogPart)
            raise _translate(exc, self.path) from exc

    return wrapper
