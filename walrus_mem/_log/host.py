"""What the namespace log needs from its Memory (:class:`LogHost`).

Kept apart from namespace_log.py so the log's parts (pages, expired, context) can name
it without importing the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from .._recall.embeddings import Embedder
from .._walrus.expiry import EpochClock
from ..config import Settings
from ..keys import NamespaceKeys
from ..walrus import WalrusClient
from .heads import HeadRef

__all__ = ["BlobDeleter", "KeyAdopter", "LogHost"]


class LogHost(Protocol):
    """What the log needs from its Memory."""

    settings: Settings
    data_dir: Path

    @property
    def embedder(self) -> Embedder: ...

    @property
    def walrus(self) -> WalrusClient: ...

    def keys_for(self, namespace: str | None = None) -> NamespaceKeys: ...

    def derive_keys(self, namespace: str, *, generation: int | None = None) -> NamespaceKeys: ...



    def embed_texts(self, texts: list[str]) -> npt.NDArray[np.float32]: ...

    def check_model(self, namespace: str) -> None: ...

    def reseal_fetched(self, namespace: str, ids: set[str]) -> int: ...

    def publish_queued(self, namespace: str) -> list[str]: ...

    @property
    def epoch_clock(self) -> EpochClock: ...

    def epoch_estimate(
        self, *, probe: bool = False, fresh_since: float | None = None
    ) -> tuple[int | None, bool]: ...

    def probe_epoch(self) -> int | None: ...

    def reset_followed(self, namespace: str, ref: HeadRef) -> bool: ...

    def settle_reset(self, namespace: str,
                     backwards: tuple[int, int] | None = None) -> None: ...

    def manifest_published(self, namespace: str, ref: HeadRef) -> None: ...




class BlobDeleter(Protocol):
    """Deletes blobs the log no longer needs (Memory's Publisher)."""

    def delete_blobs(
        self, blobs: Mapping[str, bool | None]
    ) -> tuple[list[str], dict[str, str]]: ...


class KeyAdopter(Protocol):
    """Makes a verified key generation current for a namespace this data dir holds nothing
    of (rotation's adopt_keys, bound to the Memory's parts)."""

    def __call__(self, namespace: str, keys: NamespaceKeys) -> bool: ...
