"""Shared helpers for the agent-integration tests (hooks, tools, MCP, middleware)."""

from __future__ import annotations

from pathlib import Path

from walrus_mem._memory.inputs import normalise_text
from walrus_mem.config import AgentConfig, Settings
from walrus_mem.hooks import MemoryHooks
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.tools import call_tool

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


def fold(text: str) -> str:
    """``text`` as Memory.remember stores it (whitespace runs folded to one space)."""
    return normalise_text(text, max_bytes=100_000)


def assert_remembered_payload_is_withheld(
    tmp_path: Path, master_hex: str, text: str, cfg: dict[str, AgentConfig],
    question: str, absent: str,
) -> None:
    """memory_store refuses ``text``; Memory.remember stores it folded; memory_get and
    auto-recall withhold it while an ordinary memory is still recalled."""
    mem = make_memory(tmp_path, master_hex)
    try:
        refused = call_tool(mem, "memory_store", {"facts": [text]}, config=cfg)
        assert "result" not in refused and "refused" in str(refused["error"]), refused
        fine = mem.remember("The user likes hiking in the Alps on weekends.", namespace="default")
        record = mem.remember(text, namespace="default")
        assert record.text == fold(text)
        got = call_tool(mem, "memory_get", {"id": record.id}, config=cfg)["result"]
        assert got["withheld_as_injection"] == [record.id] and got["context"] == ""
        hooks = MemoryHooks(mem, cfg)
        try:
            ctx = hooks.before_prompt_build(question, "main")
        finally:
            hooks.close()
        assert fine.id in {t.memory_id for t in ctx.trace if t.included}
        assert any(t.memory_id == record.id and t.reason.startswith("injection")
                   for t in ctx.trace), ctx.trace
        assert absent not in ctx.prepend_context
    finally:
        mem.close()
