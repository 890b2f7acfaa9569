"""``repair`` of a data dir with a Memory of given settings: what ``walrus-mem repair``
runs. Apart from repair.py, which takes a factory, so repair never imports memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..memory import Memory
from .repair import CatalogRebuild, RepairReport, repair_with

if TYPE_CHECKING:
    from .._log.context import ProgressCallback
    from .._recall.embeddings import Embedder
    from ..config import Settings

__all__ = ["repair_data_dir"]


def repair_data_dir(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    namespace: str | None = None,
    manifest_blob_id: str | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[CatalogRebuild | None, list[RepairReport]]:
    """Repair a data dir (:func:`walrus_mem._memory.repair.repair_with`), opening
    ``Memory(settings, embedder=embedder)`` on it."""
    return repair_with(settings, lambda: Memory(settings, embedder=embedder),
                       namespace=namespace, manifest_blob_id=manifest_blob_id,
                       progress=progress)
