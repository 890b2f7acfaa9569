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
    import walrus_mem._cli.main as cli_module

    monkeypatch.setitem(cli_module.LAZY_COMMANDS, "mcp", ("walrus_mem._no_such_module", "x"))
    res = invoke(["mcp"], expect=1)
    assert "pip install 'walrus-mem[mcp]'" in res.stderr
    assert "mcp" in invoke(["--help"]).stdout


def test_global_agent_and_namespace_options_choose_what_mcp_serves(tmp_path, monkeypatch):
    """`ASSISTANT_KEY=… walrus-mem --agent assistant mcp` (docs/configuration.md) served
    the default namespace, under the master key, instead of the assistant's."""
    from tests.helpers_cli import invoke
    from walrus_mem import mcp_server

    served: list[tuple[str | None, str]] = []

    def fake_run_stdio(settings, agent, *, read_only=False, memory=None):
        served.append((agent, settings.default_namespace))

    monkeypatch.setattr(mcp_server, "run_stdio", fake_run_stdio)
    cfg = tmp_path / "agents.toml"
    cfg.write_text('[agents.assistant]\nkey = "${ASSISTANT_KEY}"\n', encoding="utf-8")
    base = ["--config", str(cfg)]
    invoke([*base, "--agent", "assistant", "mcp"])
    invoke([*base, "mcp", "--agent", "assistant"])
    invoke([*base, "-n", "scratch", "mcp"])
    assert served == [("assistant", "default"), ("assistant", "default"), (None, "scratch")]
    assert "differ" in invoke([*base, "--agent", "assistant", "mcp", "--agent", "x"],
                              expect=2).stderr
    assert "namespace assistant" in invoke([*base, "--agent", "assistant", "-n", "other", "mcp"],
                                           expect=2).stderr
