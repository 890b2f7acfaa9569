"""Fixtures and helpers for the memory-engine tests (import the fixtures you use by name)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from walrus_mem.config import Settings
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

MASTER_HEX = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
OTHER_MASTER_HEX = "ff" * 32
# relayer_mock's admin token for servers whose /_mock/ routes the machines use (forget's
# deletes, the mock's epoch): RelayerServer(..., admin_token=MOCK_ADMIN_TOKEN)
MOCK_ADMIN_TOKEN = "test-only-relayer-mock-admin-token"


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"data_dir": data_dir, "use_keyring": False}
    values.update(overrides)
    if "publish_deadline" in overrides and "read_back_deadline" not in overrides:
        # A test that shortens the store's deadline means the whole publish to be short;
        # the read-back has had its own budget (30 s by default) since issue 25.
        values["read_back_deadline"] = overrides["publish_deadline"]
    return Settings(**values)


@pytest.fixture
def mem_dir(tmp_path: Path) -> Path:
    """The data dir of the ``mem`` fixture."""
    return tmp_path / "mem-data"


@pytest.fixture
def mem_settings(mem_dir: Path) -> Settings:
    return make_settings(mem_dir)


@pytest.fixture
def mem(mem_settings: Settings, fake_embedder: HashEmbedder) -> Iterator[Memory]:
    """A Memory on the embedded relayer with the fake embedder and the test master key."""
    memory = Memory(mem_settings, embedder=fake_embedder, master_key=MASTER_HEX)
    try:
        yield memory
    finally:
        memory.close()


def mock_admin(memory: Memory) -> httpx.Client:
    """An httpx client on the embedded relayer's /_mock/ admin routes."""
    backend = memory._get_backend()
    relayer = backend.embedded
    assert relayer is not None, "not in embedded mode"
    client: httpx.Client = relayer.client()
    return client


def blob_ids(admin: httpx.Client, *, available_only: bool = True) -> set[str]:
    response = admin.get("/_mock/blobs", params={"available": str(available_only).lower()})
    response.raise_for_status()
    return {b["blobId"] for b in response.json()["blobs"]}


def store_count(admin: httpx.Client, route: str | None = None) -> int:
    """Publisher store requests (PUT /v1/blobs + PUT /v1/quilts) the mock has received."""
    response = admin.get("/_mock/stats")
    response.raise_for_status()
    counters = response.json()["counters"]
    routes = [route] if route else ["put_blob", "put_quilt"]
    return sum(int(counters.get(f"requests.{r}", 0)) for r in routes)


class SeededEmbedder:
    """Dense pseudo-random unit vectors seeded by the text (no word overlap needed)."""

    def __init__(self, dim: int = 32, model_id: str = "seeded") -> None:
        self.dim = dim
        self.model_id = model_id

    def embed(self, texts: list[str]) -> np.ndarray:
        import zlib

        rows = [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim)
                for t in texts]
        return np.asarray(rows, dtype=np.float32)


class FixedEmbedder:
    """Embedder returning pre-set vectors by text (and a default for unknown texts)."""

    def __init__(self, vectors: dict[str, list[float]], dim: int, model_id: str = "fixed") -> None:
        self.vectors = {k: np.asarray(v, dtype=np.float32) for k, v in vectors.items()}
        self.dim = dim
        self.model_id = model_id

    def embed(self, texts: list[str]) -> np.ndarray:
        default = np.ones(self.dim, dtype=np.float32)
        return np.stack([self.vectors.get(t, default) for t in texts])
