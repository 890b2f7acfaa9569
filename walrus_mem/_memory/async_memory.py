"""AsyncMemory: the :class:`~walrus_mem.Memory` API as coroutines.

There is one engine: each coroutine runs the thread-safe synchronous
:class:`~walrus_mem.Memory` method in a worker thread (``anyio.to_thread``,
so it works under asyncio and trio). The event loop is never blocked by
embedding, SQLite or Walrus I/O, and the sync and async APIs cannot drift
apart. Callbacks (``restore(progress=...)``) run in the worker thread.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread

from .._recall.embeddings import Embedder
from .._recall.ranking import FusionParams
from ..config import Settings
from ..keys import MasterSeed
from ..memory import Memory, ProgressCallback
from ..models import (
    ExtendReport,
    ForgetReport,
    HistoryEntry,
    MemoryRecord,
    MemoryStats,
    PullReport,
    RecallResult,
    RememberManyResult,
    RestoreReport,
    SyncReport,
)
from ..walrus import WalrusClient
from .inputs import UNSET

if TYPE_CHECKING:
    from .grants import Grant
    from .rotation import RotationReport

__all__ = ["AsyncMemory"]

T = TypeVar("T")


class AsyncMemory:
    """Async twin of :class:`~walrus_mem.Memory` (same arguments, same results).

    **Usage**::

        async with AsyncMemory() as mem:
            await mem.remember("I'm allergic to peanuts", namespace="researcher")
            hits = await mem.recall("food allergies", namespace="researcher")
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        master_key: str | bytes | MasterSeed | None = None,
        walrus: WalrusClient | None = None,
    ) -> None:
        self.sync_memory = Memory(settings, embedder=embedder, master_key=master_key,
                                  walrus=walrus)

    async def _run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))

    def __repr__(self) -> str:
        return f"<Async{repr(self.sync_memory)[1:]}"

    @property
    def settings(self) -> Settings:
        return self.sync_memory.settings

    @property
    def data_dir(self) -> Path:
        return self.sync_memory.data_dir

    @property
    def embedder(self) -> Embedder:
        return self.sync_memory.embedder

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._run(self.sync_memory.close)

    async def remember(
        self,
        text: str | bytes,
        *,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        category: str | None = None,
        importance: float | None = None,
        expires_at: Any = None,
        idempotency_key: str | None = None,
    ) -> MemoryRecord:
        return await self._run(
            self.sync_memory.remember, text, namespace=namespace, metadata=metadata,
            category=category, importance=importance, expires_at=expires_at,
            idempotency_key=idempotency_key,
        )

    async def remember_many(
        self,
        items: Sequence[str | bytes | Mapping[str, Any]],
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> RememberManyResult:
        return await self._run(self.sync_memory.remember_many, items, namespace=namespace,
                               idempotency_key=idempotency_key)

    async def analyze(
        self,
        text_or_messages: Any,
        *,
        namespace: str | None = None,
        extractor: Any = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> RememberManyResult:
        return await self._run(
            self.sync_memory.analyze, text_or_messages, namespace=namespace,
            extractor=extractor, metadata=metadata, idempotency_key=idempotency_key,
        )

    async def recall(
        self,
        query: str,
        *,
        namespace: str | None = None,
        k: int = 5,
        filters: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        include_expired: bool = False,
        params: FusionParams | None = None,
    ) -> RecallResult:
        return await self._run(
            self.sync_memory.recall, query, namespace=namespace, k=k, filters=filters,
            min_score=min_score, include_expired=include_expired, params=params,
        )

    async def get(
        self, memory_id: str, *, namespace: str | None = None, verify: bool = False
    ) -> MemoryRecord:
        return await self._run(self.sync_memory.get, memory_id, namespace=namespace,
                               verify=verify)

    async def list(
        self,
        namespace: str | None = None,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_expired: bool = False,
    ) -> list[MemoryRecord]:
        return await self._run(self.sync_memory.list, namespace, filters=filters, limit=limit,
                               offset=offset, include_expired=include_expired)

    async def update(
        self,
        memory_id: str,
        text: str | bytes | None = None,
        *,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        category: str | None = None,
        importance: float | None = None,
        expires_at: Any = UNSET,
    ) -> MemoryRecord:
        return await self._run(
            self.sync_memory.update, memory_id, text, namespace=namespace, metadata=metadata,
            category=category, importance=importance, expires_at=expires_at,
        )

    async def history(
        self, memory_id: str, *, namespace: str | None = None
    ) -> builtins.list[HistoryEntry]:
        return await self._run(self.sync_memory.history, memory_id, namespace=namespace)

    async def forget(self, memory_id: str, *, namespace: str | None = None) -> ForgetReport:
        return await self._run(self.sync_memory.forget, memory_id, namespace=namespace)

    async def forget_all(
        self, namespace: str | None = None, *, confirm: bool = False
    ) -> ForgetReport:
        return await self._run(self.sync_memory.forget_all, namespace, confirm=confirm)

    async def sync(self, namespace: str | None = None) -> SyncReport:
        return await self._run(self.sync_memory.sync, namespace)

    async def restore(
        self,
        namespace: str | None = None,
        manifest_blob_id: str | Sequence[str] | None = None,
        progress: ProgressCallback | None = None,
        *,
        allow_stale: bool = False,
        allow_unrelated: bool = False,
        allow_legacy: bool = False,
    ) -> RestoreReport:
        return await self._run(self.sync_memory.restore, namespace, manifest_blob_id, progress,
                               allow_stale=allow_stale, allow_unrelated=allow_unrelated,
                               allow_legacy=allow_legacy)

    async def pull(
        self,
        heads: str | Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        allow_stale: bool = False,
        allow_unrelated: bool = False,
        progress: ProgressCallback | None = None,
        allow_legacy: bool = False,
    ) -> PullReport:
        return await self._run(self.sync_memory.pull, heads, namespace=namespace,
                               allow_stale=allow_stale, allow_unrelated=allow_unrelated,
                               progress=progress, allow_legacy=allow_legacy)

    async def stats(self, namespace: str | None = None) -> MemoryStats:
        return await self._run(self.sync_memory.stats, namespace)

    async def namespaces(self) -> builtins.list[str]:
        return await self._run(self.sync_memory.namespaces)

    async def current_epoch(self) -> int | None:
        return await self._run(self.sync_memory.current_epoch)

    async def expiring(
        self, within_epochs: int = 1, *, namespace: str | None = None, probe: bool = False
    ) -> builtins.list[MemoryRecord]:
        return await self._run(self.sync_memory.expiring, within_epochs, namespace=namespace,
                               probe=probe)

    async def probe_epoch(self) -> int | None:
        return await self._run(self.sync_memory.probe_epoch)

    async def extend(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        epochs: int | None = None,
    ) -> ExtendReport:
        return await self._run(self.sync_memory.extend, memory_ids, namespace=namespace,
                               epochs=epochs)

    # -- keys (issue 14): sharing by grant and rotation ------------------------------

    async def share(
        self, memory_ids: Sequence[str] | str, *, to: str | bytes, namespace: str | None = None
    ) -> Grant:
        return await self._run(self.sync_memory.share, memory_ids, to=to, namespace=namespace)

    async def accept(self, grant: str, *, namespace: str | None = None) -> RememberManyResult:
        return await self._run(self.sync_memory.accept, grant, namespace=namespace)

    async def rotate_key(self, namespace: str | None = None, *, delete_old: bool = False
                         ) -> RotationReport:
        return await self._run(self.sync_memory.rotate_key, namespace, delete_old=delete_old)

    async def reindex(self, namespace: str | None = None) -> int:
        return await self._run(self.sync_memory.reindex, namespace)

    async def compact(self, namespace: str | None = None) -> None:
        await self._run(self.sync_memory.compact, namespace)
