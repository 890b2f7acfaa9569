"""The parts of the ``mcp`` SDK the stdio server uses, imported without the rest.

``mcp/__init__.py`` imports the SDK's client and ``mcp/server/__init__.py`` its
high-level server, with their pydantic models: about 0.4 s of CPU on a cold
``walrus-mem mcp`` start (bench/cold.py), none of it used by the low-level stdio
server. Those two packages are registered *bare* here, so their submodules
import without their ``__init__``; the first lookup of a name a bare package
lacks (``from mcp import Client``, ``mcp.server.MCPServer``) runs the real
``__init__`` in place, so other users of the SDK in the same process see the
whole package. Packages already imported are left alone.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["Server", "ServerRequestContext", "stdio_server", "types"]


def defer_package_inits(*names: str) -> None:
    """Register each package of ``names`` (parents first) without running its ``__init__``."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return  # not a package here: the plain imports below do whatever they do
        module = importlib.util.module_from_spec(spec)

        def complete(attr: str, module: ModuleType = module, spec: ModuleSpec = spec) -> Any:
            if attr.startswith("__") or module.__dict__.pop("__getattr__", None) is None:
                raise AttributeError(f"module {module.__name__!r} has no attribute {attr!r}")
            assert spec.loader is not None
            spec.loader.exec_module(module)  # the real __init__, in the registered module
            return getattr(module, attr)

        module.__getattr__ = complete  # type: ignore[method-assign]
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


defer_package_inits("mcp", "mcp.server")

import mcp_types as types  # noqa: E402
from mcp.server.context import ServerRequestContext  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402
