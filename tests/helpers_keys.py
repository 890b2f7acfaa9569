"""Helpers for the key, envelope and secrets-hygiene tests: the published vectors."""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

KEYS_DIR = Path(__file__).resolve().parent.parent / "keys"
VECTORS_PATH = KEYS_DIR / "vectors.json"


@cache
def vectors() -> dict[str, Any]:
    """keys/vectors.json, parsed once (callers must not mutate it)."""
    return json.loads(VECTORS_PATH.read_text(encoding="utf-8"))


def generator() -> ModuleType:
    """keys/generate_vectors.py as a module (keys/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "walrus_mem_generate_vectors", KEYS_DIR / "generate_vectors.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seed_bytes(i: int) -> bytes:
    """A distinct, obviously fake 32-byte seed for test number ``i``."""
    return bytes((i * 37 + j * 11 + 5) % 256 for j in range(32))
