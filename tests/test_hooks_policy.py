"""MemoryHooks failure policy: ``on_error="log"`` never silent, ``"raise"`` propagates."""

from __future__ import annotations

import logging

import pytest

from walrus_mem.config import Settings
from walrus_mem.errors import InvalidSessionKey, KeyMaterialError
from walrus_mem.hooks import MemoryHooks
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

from .helpers_agents import agents_config

TURN = [{"role": "user", "content": "I moved to Bergen last month for a new job at the port."},
        {"role": "assistant", "content": "Congratulations on the move!"}]


@pytest.fixture
def keyless(tmp_path, monkeypatch):
    """A real Memory with no master key anywhere: every write needs a key it cannot get."""
    monkeypatch.delenv("WALRUS_MEM_MASTER_KEY", raising=False)
    mem = Memory(Settings(data_dir=tmp_path / "data", use_keyring=False, config_file=None),
                 embedder=HashEmbedder(dim=64))
    yield mem
    mem.close()


def test_missing_key_is_logged_as_an_error_and_counted(keyless, caplog):
    hooks = MemoryHooks(keyless, agents_config())
    with caplog.at_level(logging.ERROR, logger="walrus_mem.hooks"):
        ticket = hooks.agent_end(TURN, "agent:coder:1")
        assert hooks.flush(30)
    outcome = ticket.wait(5)
    assert outcome is not None and outcome.status == "failed"
    assert "KeyNotFound" in outcome.reason or "Key" in outcome.reason
    assert hooks.stats.key_errors == 1 and hooks.stats.capture_errors == 1
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and "no usable key" in errors[0].getMessage()
    assert keyless.list("coder") == []
    hooks.close()


def test_raise_policy_reraises_a_failed_capture(keyless):
    hooks = MemoryHooks(keyless, agents_config(), on_error="raise")
    hooks.agent_end(TURN, "agent:coder:1")
    with pytest.raises(KeyMaterialError):
        hooks.flush(30)
    hooks.flush(30)  # raised once, not forever
    hooks.agent_end(TURN + [{"role": "user", "content": "My sister lives in Trondheim now."}],
                    "agent:coder:2")
    with pytest.raises(KeyMaterialError):
        hooks.close(30)


def test_unmappable_session_key_under_both_policies(tmp_path, master_hex, caplog):
    from .helpers_agents import make_memory

    mem = make_memory(tmp_path, master_hex)
    try:
        logged = MemoryHooks(mem, agents_config())
        with caplog.at_level(logging.ERROR, logger="walrus_mem.hooks"):
            ctx = logged.before_prompt_build("Where does the user live these days?",
                                             "agent:Coder:1")
        assert ctx.error is not None and "InvalidSessionKey" in ctx.error
        assert ctx.prepend_context == "" and "unavailable" in ctx.append_system_context
        assert 'namespace="' not in ctx.append_system_context  # no namespace is offered
        ticket = logged.agent_end(TURN, "agent:Coder:1")
        assert ticket.outcome is not None and ticket.outcome.status == "failed"
        assert logged.stats.session_errors == 2
        assert any(r.levelno == logging.ERROR for r in caplog.records)
        logged.close()
        strict = MemoryHooks(mem, agents_config(), on_error="raise")
        with pytest.raises(InvalidSessionKey):
            strict.before_prompt_build("Where does the user live these days?", "agent:Coder:1")
        with pytest.raises(InvalidSessionKey):
            strict.agent_end(TURN, "agent:Coder:1")
        strict.close()
        assert mem.list("coder") == [] and mem.list("default") == []
        with pytest.raises(ValueError, match="on_error"):
            MemoryHooks(mem, on_error="ignore")  # type: ignore[arg-type]
    finally:
        mem.close()
