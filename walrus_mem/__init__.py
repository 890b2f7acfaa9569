"""walrus_mem: encrypted, decentralized long-term memory for AI agents.

Facts are sealed on the client (XChaCha20-Poly1305 + Ed25519, per-namespace
keys) and published as Walrus blobs; a local USearch index + SQLite catalog
recall them in milliseconds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    AccessDenied,
    AggregatorError,
    AggregatorUnavailable,
    AuthenticationFailed,
    BadRequest,
    BlobMismatch,
    BlobNotFound,
    BodyTooLarge,
    CatalogCorrupt,
    ConfigError,
    DataDirBusy,
    EmbeddingError,
    EnvelopeError,
    EpochUnknown,
    ForbiddenBlob,
    ForkedHead,
    GrantError,
    HeadMismatch,
    IndexCorrupt,
    InsecureDataDir,
    InsecureKeyFile,
    InsufficientConfirmations,
    InvalidEnvelope,
    InvalidHead,
    InvalidInput,
    InvalidNamespace,
    InvalidResponse,
    InvalidSessionKey,
    KeyExists,
    KeyMaterialError,
    KeyNotFound,
    KeyringUnavailable,
    LegacyManifest,
    LocalStoreError,
    LogError,
    MalformedKey,
    MemoryNotFound,
    MissingExtra,
    ModelMismatch,
    NamespaceDenied,
    NetworkResetPending,
    PayloadTooLarge,
    PlaceholderError,
    PublisherError,
    PublisherUnavailable,
    RateLimited,
    ReadOnlySession,
    RestoreIncomplete,
    RotationIncomplete,
    StaleDataDir,
    StaleManifest,
    StorageError,
    StoreFailed,
    TamperedBlob,
    UnknownAgent,
    UnsafeContent,
    UnsupportedVersion,
    VerificationFailed,
    WalrusMemError,
    WrongNamespace,
)

if TYPE_CHECKING:
    from ._log.heads import HeadRef
    from ._memory.async_memory import AsyncMemory
    from ._recall.embeddings import Embedder, SentenceTransformerEmbedder
    from .config import AgentConfig, Settings
    from .keys import MasterSeed, NamespaceKeys
    from .memory import Memory
    from .models import (
        ExtendReport,
        ForgetReport,
        HistoryEntry,
        MemoryRecord,
        MemoryStats,
        PullReport,
        RecallHit,
        RecallResult,
        RememberManyResult,
        RestoreReport,
        SyncReport,
    )

__version__ = "0.1.0"

#: The public classes outside errors.py, imported on first use (PEP 562): `import
#: walrus_mem` (and so the pytest plugin every project with walrus-mem installed
#: loads) costs the error classes only, not the engine, httpx and numpy.
_LAZY: dict[str, str] = {
    "AgentConfig": ".config",
    "AsyncMemory": "._memory.async_memory",
    "Embedder": "._recall.embeddings",
    "ExtendReport": ".models",
    "ForgetReport": ".models",
    "HeadRef": "._log.heads",
    "HistoryEntry": ".models",
    "MasterSeed": ".keys",
    "Memory": ".memory",
    "MemoryRecord": ".models",
    "MemoryStats": ".models",
    "NamespaceKeys": ".keys",
    "PullReport": ".models",
    "RecallHit": ".models",
    "RecallResult": ".models",
    "RememberManyResult": ".models",
    "RestoreReport": ".models",
    "SentenceTransformerEmbedder": "._recall.embeddings",
    "Settings": ".config",
    "SyncReport": ".models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AccessDenied",
    "AgentConfig",
    "AggregatorError",
    "AggregatorUnavailable",
    "AsyncMemory",
    "AuthenticationFailed",
    "BadRequest",
    "BlobMismatch",
    "BlobNotFound",
    "BodyTooLarge",
    "CatalogCorrupt",
    "ConfigError",
    "DataDirBusy",
    "Embedder",
    "EmbeddingError",
    "EnvelopeError",
    "EpochUnknown",
    "ExtendReport",
    "ForbiddenBlob",
    "ForgetReport",
    "ForkedHead",
    "GrantError",
    "HeadMismatch",
    "HeadRef",
    "HistoryEntry",
    "IndexCorrupt",
    "InsecureDataDir",
    "InsecureKeyFile",
    "InsufficientConfirmations",
    "InvalidEnvelope",
    "InvalidHead",
    "InvalidInput",
    "InvalidNamespace",
    "InvalidResponse",
    "InvalidSessionKey",
    "KeyExists",
    "KeyMaterialError",
    "KeyNotFound",
    "KeyringUnavailable",
    "LegacyManifest",
    "LocalStoreError",
    "LogError",
    "MalformedKey",
    "MasterSeed",
    "Memory",
    "MemoryNotFound",
    "MemoryRecord",
    "MemoryStats",
    "MissingExtra",
    "ModelMismatch",
    "NamespaceDenied",
    "NamespaceKeys",
    "NetworkResetPending",
    "PayloadTooLarge",
    "PlaceholderError",
    "PublisherError",
    "PublisherUnavailable",
    "PullReport",
    "RateLimited",
    "ReadOnlySession",
    "RecallHit",
    "RecallResult",
    "RememberManyResult",
    "RestoreIncomplete",
    "RestoreReport",
    "RotationIncomplete",
    "SentenceTransformerEmbedder",
    "Settings",
    "StaleDataDir",
    "StaleManifest",
    "StorageError",
    "StoreFailed",
    "SyncReport",
    "TamperedBlob",
    "UnknownAgent",
    "UnsafeContent",
    "UnsupportedVersion",
    "VerificationFailed",
    "WalrusMemError",
    "WrongNamespace",
    "__version__",
]
