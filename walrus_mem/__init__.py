"""walrus_mem: encrypted, decentralized long-term memory for AI agents.

Facts are sealed on the client (XChaCha20-Poly1305 + Ed25519, per-namespace
keys) and published as Walrus blobs; a local USearch index + SQLite catalog
recall them in milliseconds.
"""

from __future__ import annotations

from .config import AgentConfig, Settings
from .errors import *  # noqa: F403 - the error tree is part of the public API
from .errors import __all__ as _error_names
from .keys import MasterSeed, NamespaceKeys

__version__ = "0.1.0"

__all__ = sorted(
    [
        "AgentConfig",
        "MasterSeed",
        "NamespaceKeys",
        "Settings",
        "__version__",
        *_error_names,
    ]
)
