"""What Memory's satellites (rotation, renewal, network_reset, follow, repair, ...)
work with: the collaborators one Memory builds, handed over instead of the Memory.

They name no Memory: memory.py imports them, so they sit below it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._catalog.catalog import Catalog
    from .._keys.chain import KeyChain
    from .._log.namespace_log import NamespaceLog
    from .._recall.embedding import Embedding
    from .._recall.index_store import IndexStore
    from ..config import Settings
    from ..models import MemoryRecord
    from .epochs import Epochs
    from .publisher import Publisher

__all__ = ["Parts"]


@dataclass(frozen=True)
class Parts:
    """One Memory's collaborators; ``lock`` is its re-entrant lock over catalog and
    indexes (embedding and network calls run outside it)."""

    settings: Settings
    data_dir: Path
    catalog: Catalog
    indexes: IndexStore
    lock: threading.RLock
    keys: KeyChain
    embedding: Embedding
    publisher: Publisher
    epochs: Epochs
    log: NamespaceLog
    # Store a fact under an id it already had (repair's salvage of a memory no head
    # lists): Memory's write path, keyword arguments as Memory.remember's.
    remember_as: Callable[..., MemoryRecord]
