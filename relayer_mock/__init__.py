"""relayer_mock: a local, persistent, fault-injecting Walrus publisher/aggregator.

Public entry points (imported lazily so embedded use stays cheap):

- ``create_app(data_dir, *, faults=..., ...)`` -> Starlette ASGI app (``relayer_mock.app``)
- ``FaultConfig`` / ``FaultKind`` (``relayer_mock.faults``)
- ``RelayerServer`` (uvicorn in a thread) / ``RelayerProcess`` (``python -m relayer_mock``)
  (``relayer_mock.server``)
- ``EmbeddedRelayer`` (in-process sync + async httpx transports) (``relayer_mock.embedded``)
- ``relayer_command`` (click command) / ``main(argv)`` (``relayer_mock.cli``)
- ``mock_blob_id(body, files=, metadata=)``: the id the mock gives a blob or a quilt, like
  ``walrus blob-id`` (``relayer_mock._ids_oracle``)

relayer_mock does not import walrus_mem.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._ids_oracle import mock_blob_id
    from .app import create_app
    from .embedded import EmbeddedRelayer
    from .faults import FaultConfig, FaultKind
    from .server import RelayerProcess, RelayerServer

_EXPORTS = {
    "create_app": "relayer_mock.app",
    "EmbeddedRelayer": "relayer_mock.embedded",
    "FaultConfig": "relayer_mock.faults",
    "FaultKind": "relayer_mock.faults",
    "RelayerProcess": "relayer_mock.server",
    "RelayerServer": "relayer_mock.server",
    "mock_blob_id": "relayer_mock._ids_oracle",
}

__all__ = [
    "EmbeddedRelayer",
    "FaultConfig",
    "FaultKind",
    "RelayerProcess",
    "RelayerServer",
    "create_app",
    "mock_blob_id",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'relayer_mock' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
