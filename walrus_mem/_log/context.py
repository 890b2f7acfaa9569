"""What the namespace log's parts see of it.

:class:`LogContext` is what the helper modules (announce, apply, generation, gone,
legacy) use of :class:`~walrus_mem._log.namespace_log.NamespaceLog`, which implements
it: they take it instead of importing the log, which imports them. :class:`LogPart`
adds what the log's mixins (merging.py, publishing.py) use of the rest of the class.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._catalog.catalog import Catalog
from .._catalog.log_tables import LogTables
from .._recall.index_store import IndexStore
from .._walrus.expiry import EpochClock
from ..keys import NamespaceKeys
from ..models import PullReport
from . import manifest as mf
from .heads import HeadRef, HeadsFile, SeenHead, SeenHeads
from .host import BlobDeleter, KeyAdopter, LogHost
from .pages import ManifestPages

__all__ = ["LogContext", "LogPart", "ProgressCallback"]

ProgressCallback = Callable[[int, int], object]


@dataclass
class _Read:
    """A verified manifest: its head, root and the entries read (all but those of the
    pages a merge skipped: _log/page_memory.py)."""

    ref: HeadRef
    root: mf.Root
    entries: list[mf.Entry] = field(default_factory=list)
    pages: dict[str, list[mf.Entry]] = field(default_factory=dict)
    """The pages read: digest -> entries."""



class LogContext(Protocol):
    """What the log's helper modules use of it."""

    host: LogHost
    catalog: Catalog
    tables: LogTables
    indexes: IndexStore
    lock: threading.RLock
    seen: SeenHeads
    ahead: dict[str, NamespaceKeys]
    _unusable: dict[tuple[str, HeadRef], str]

    def heads_file(self) -> HeadsFile | None: ...

    def turn(self, ns: str, *, wait: bool) -> AbstractContextManager[bool]: ...

    def descends(self, ns: str, keys: NamespaceKeys, newer: HeadRef, older: HeadRef) -> bool:
        ...

    @staticmethod
    def check_root(keys: NamespaceKeys, data: bytes, ref: HeadRef) -> mf.Root: ...

    def _fetch(self, keys: NamespaceKeys,
               entry: mf.Entry) -> tuple[mf.Entry, bytes, dict[str, Any]]: ...

    def _merge_read(
        self,
        ns: str,
        keys: NamespaceKeys,
        reads: list[_Read],
        *,
        progress: ProgressCallback | None,
        resumed: bool,
        legacy: tuple[str, list[mf.Entry]] | None = None,
        gone: Sequence[HeadRef] = (),
        unread: Sequence[HeadRef] = (),
    ) -> PullReport: ...


class LogPart(LogContext, Protocol):
    """What the log's mixins use of the rest of NamespaceLog (and of each other)."""

    pages: ManifestPages
    deleter: BlobDeleter
    adopt_keys: KeyAdopter
    merged_on_publish: dict[str, PullReport]
    _gone_blobs: set[str]

    def merged(self, ns: str) -> list[HeadRef]: ...

    def unmerged(self, ns: str, keys: NamespaceKeys) -> list[HeadRef]: ...

    def origins(self, ns: str) -> set[str]: ...

    def _refresh_from_mirror(self) -> None: ...

    def learn(self, ns: str, keys: NamespaceKeys, ref: HeadRef) -> SeenHead: ...

    def _remember(self, ns: str, ref: HeadRef, root: mf.Root) -> SeenHead: ...

    def _read_root(self, ns: str, keys: NamespaceKeys, ref: HeadRef, *,
                   deadline: float | None = None) -> mf.Root: ...

    def _read_entries(self, keys: NamespaceKeys, root: mf.Root) -> list[mf.Entry]: ...

    def _read_pages(self, keys: NamespaceKeys, root: mf.Root, skip: Collection[str] = (),
                    ) -> tuple[list[mf.Entry], dict[str, list[mf.Entry]]]: ...

    def _clock(self) -> EpochClock: ...

    def _fill_digests(self, ns: str) -> None: ...

    def _merge(
        self,
        ns: str,
        keys: NamespaceKeys,
        refs: list[HeadRef],
        *,
        progress: ProgressCallback | None,
        allow_unrelated: bool = True,
        resumed: bool = False,
        gone_ok: bool = False,
        hold: Collection[HeadRef] = (),
        reuse: bool = False,
    ) -> PullReport: ...
