"""Issue 27 item 8: the MCP server as a host starts it, and what its search returns.

A host that does not pass the agent's key variable must see the server refuse to
start (a clear error, exit non-zero), not a server whose every tool call fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from walrus_mem.tools import call_tool

from .helpers_agents import make_memory

RESEARCHER_KEY = "a1" * 32  # an Ed25519 seed (hex)


def serve(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Start ``python -m walrus_mem.mcp_server`` with stdin closed: a server that starts
    reads EOF and exits 0; one that refuses exits non-zero before reading."""
    pytest.importorskip("mcp")
    config = tmp_path / "agents.toml"
    config.write_text('[agents.researcher]\nkey = "${RESEARCHER_KEY}"\n\n[agents.writer]\n',
                      encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if not k.startswith("WALRUS_MEM_")}
    base.update({
        "HOME": str(tmp_path / "home"),
        "WALRUS_MEM_HOME": str(tmp_path / "wm-home"),
        "WALRUS_MEM_DATA_DIR": str(tmp_path / "data"),
        "WALRUS_MEM_STATE_DIR": str(tmp_path / "state"),
        "WALRUS_MEM_EMBEDDING_MODEL": "test-hash",
        "WALRUS_MEM_USE_KEYRING": "false",
        "WALRUS_MEM_KEY_FILE": str(tmp_path / "no-key-file"),
        "WALRUS_MEM_CONFIG": str(config),
        "HF_HUB_OFFLINE": "1",
    })
    base.pop("RESEARCHER_KEY", None)
    base.update(env)
    return subprocess.run([sys.executable, "-m", "walrus_mem.mcp_server", *args],
                          input="", capture_output=True, text=True, timeout=120,
                          env=base, cwd=tmp_path)


def test_the_server_refuses_to_start_without_the_agents_key_variable(tmp_path):
    out = serve(tmp_path, {}, "--agent", "researcher")
    assert out.returncode != 0, out.stderr
    assert "RESEARCHER_KEY" in out.stderr and "researcher" in out.stderr
    assert out.stdout == ""  # nothing on the protocol channel


def test_the_server_refuses_to_start_without_a_master_key_for_a_derived_agent(tmp_path):
    out = serve(tmp_path, {}, "--agent", "writer")
    assert out.returncode != 0, out.stderr
    assert "master key" in out.stderr.lower() and "writer" in out.stderr


def test_the_server_starts_when_the_key_resolves(tmp_path):
    out = serve(tmp_path, {"RESEARCHER_KEY": RESEARCHER_KEY}, "--agent", "researcher")
    assert out.returncode == 0, out.stderr


def test_the_cli_mcp_command_refuses_too(tmp_path, monkeypatch):
    from .helpers_cli import invoke

    pytest.importorskip("mcp")
    config = tmp_path / "agents.toml"
    config.write_text('[agents.researcher]\nkey = "${RESEARCHER_KEY}"\n', encoding="utf-8")
    monkeypatch.delenv("RESEARCHER_KEY", raising=False)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    res = invoke(["--config", str(config), "--data-dir", str(tmp_path / "d"),
                  "--agent", "researcher", "mcp"], expect=1)
    assert "RESEARCHER_KEY" in res.stderr


def test_memory_search_results_carry_the_escaped_text(tmp_path, master_hex):
    mem = make_memory(tmp_path, master_hex)
    try:
        mem.remember('User likes <b>bold</b> "quotes" & tea.', namespace="writer")
        found = call_tool(mem, "memory_search", {"query": "bold quotes tea", "min_score": 0},
                          namespace="writer")
        assert found["ok"], found
        (hit,) = found["result"]["memories"]
        assert hit["text"] == ("User likes &lt;b&gt;bold&lt;/b&gt; &quot;quotes&quot; "
                               "&amp; tea.")
        assert hit["text"] in found["result"]["context"]  # the same escaping as the block
    finally:
        mem.close()
