"""Shared helpers for the agent-integration tests (hooks, tools, MCP, middleware)."""

from __future__ import annotations

from pathlib import Path

from walrus_mem.config import AgentConfig, Settings
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

UUID_A = "0b0e1a52-3c1f-4d8e-9f3a-7c2b1d0e5f6a"
UUID_B = "5d6c7b8a-1e2f-4a3b-8c9d-0e1f2a3b4c5d"

# The fake embedder scores loosely related texts lower than the real model
# does, so integration tests use a lower relevance cutoff than the default.
TEST_RELEVANCE = 0.1


def make_memory(tmp_path: Path, master_hex: str, **settings: object) -> Memory:
    """A real Memory on the embedded relayer with the fake embedder."""
    return Memory(
        Settings(data_dir=tmp_path / "walrus-mem", **settings),  # type: ignore[arg-type]
        embedder=HashEmbedder(dim=64),
        master_key=master_hex,
    )


def agents_config(**overrides: object) -> dict[str, AgentConfig]:
    base: dict[str, object] = {"min_relevance": TEST_RELEVANCE}
    base.update(overrides)
    return {
        "researcher": AgentConfig.model_validate({"namespace": "research", **base}),
        "coder": AgentConfig.model_validate(base),
        "main": AgentConfig.model_validate(base),
    }
