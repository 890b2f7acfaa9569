"""`walrus-mem mcp` and `walrus-mem relayer` are mounted in the CLI."""

from __future__ import annotations

import json
import sys

import pytest

from .helpers_cli import TEST_MASTER_HEX, invoke

mcp = pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402


@pytest.mark.anyio
async def test_walrus_mem_mcp_serves_the_tools_over_stdio(tmp_path):
    """`python -m walrus_mem --data-dir DIR mcp`: the CLI's settings reach the server."""
    data = tmp_path / "cli-data"
    env = {
        "WALRUS_MEM_MASTER_KEY": TEST_MASTER_HEX,
        "WALRUS_MEM_EMBEDDING_MODEL": "test-hash",
        "WALRUS_MEM_USE_KEYRING": "false",
        "WALRUS_MEM_DATA_DIR": str(tmp_path / "not-this-one"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "WALRUS_MEM_STATE_DIR": str(tmp_path / "state"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "walrus_mem", "--data-dir", str(data), "mcp"],
        env=env, cwd=str(tmp_path),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"memory_search", "memory_store"} <= names
        stored = await client.call_tool("memory_store", {"facts": ["User likes green tea."]})
        assert json.loads(stored.content[0].text)["ok"]
    assert (data / "catalog.sqlite3").exists()
    assert not (tmp_path / "not-this-one").exists()


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_relayer_help_comes_from_relayer_mock():
    out = invoke(["relayer", "--help"]).stdout
    assert "--fault-rate" in out and "--port" in out


def test_missing_optional_dependency_is_one_clear_error(monkeypatch):
    import walrus_mem.cli as cli_module

    monkeypatch.setitem(cli_module.LAZY_COMMANDS, "mcp", ("walrus_mem._no_such_module", "x"))
    res = invoke(["mcp"], expect=1)
    assert "pip install 'walrus-mem[mcp]'" in res.stderr
    assert "mcp" in invoke(["--help"]).stdout
