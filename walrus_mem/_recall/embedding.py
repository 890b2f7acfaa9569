"""A Memory's embedder in use: batched and checked embeddings (one caller at a time),
a small cache of query vectors, and the check that a namespace was indexed with the
same model."""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from ..errors import ModelMismatch
from .embeddings import Embedder, embed_checked

if TYPE_CHECKING:
    from .._catalog.catalog import Catalog
    from ..config import Settings

__all__ = ["QUERY_CACHE", "Embedding"]

QUERY_CACHE: Final = 256  # query vectors kept (recall right after recall is free)


class Embedding:
    """Embeds texts and queries with one embedder; checks namespaces against it."""

    def __init__(self, settings: Settings, catalog: Catalog, embedder: Embedder,
                 lock: threading.RLock) -> None:
        self.settings = settings
        self.catalog = catalog
        self.embedder = embedder
        self.lock = lock  # the Memory's: guards the query cache
        self.embed_lock = threading.Lock()
        self.query_cache: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()

    def check_model(self, namespace: str, row: sqlite3.Row | None = None) -> None:
        """Raise ModelMismatch if ``namespace`` was indexed with another embedding model."""
        row = row if row is not None else self.catalog.namespace(namespace)
        if row is None or row["model_id"] is None:
            return
        emb = self.embedder
        if row["model_id"] != emb.model_id or row["dim"] != emb.dim:
            raise ModelMismatch(
                f"namespace {namespace!r} is indexed with {row['model_id']} (dim {row['dim']}) "
                f"but this Memory embeds with {emb.model_id} (dim {emb.dim}); re-embed with "
                f"`walrus-mem reindex --namespace {namespace}` or Memory.reindex({namespace!r}), "
                "or configure the original model"
            )

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` (batched, checked, one caller at a time)."""
        with self.embed_lock:
            return embed_checked(self.embedder, texts, self.settings.embedding_batch_size)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The vector of a query, from the cache when it was embedded lately."""
        key = f"{self.embedder.model_id}\x00{text}"
        with self.lock:
            cached = self.query_cache.get(key)
            if cached is not None:
                self.query_cache.move_to_end(key)
                return cached
        vector: npt.NDArray[np.float32] = self.embed([text])[0]
        with self.lock:
            self.query_cache[key] = vector
            while len(self.query_cache) > QUERY_CACHE:
                self.query_cache.popitem(last=False)
        return vector
