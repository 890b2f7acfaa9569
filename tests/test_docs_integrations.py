"""Issue 27 item 8: the integrations as the docs write them work for a newcomer.

An MCP host starts the server without the user's shell: not its PATH (a bare
``walrus-mem`` is not found, or another install is), not its exported variables
(the agent's ``${VAR}`` key is unset). And memories on Walrus expire unless
something renews them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .test_docs import DOC_FILES, ROOT, extract_blocks


def mcp_host_configs() -> list[tuple[str, dict[str, object]]]:
    found = []
    for path in DOC_FILES:
        for block in extract_blocks(path):
            if block.lang == "json" and "mcpServers" in block.code:
                for name, server in json.loads(block.code)["mcpServers"].items():
                    found.append((f"{block.where} {name}", server))
    return found


def test_mcp_host_examples_use_an_absolute_command_and_pass_the_agents_key():
    configs = mcp_host_configs()
    assert configs, "no MCP host example found"
    for where, server in configs:
        command = str(server["command"])
        assert Path(command).is_absolute(), f"{where}: a bare command name {command!r}"
        args = [str(a) for a in server.get("args", [])]  # type: ignore[attr-defined]
        assert "mcp" in args and "--agent" in args, where
        agent = args[args.index("--agent") + 1]
        env = server.get("env", {})
        assert f"{agent.upper()}_KEY" in env, f"{where}: the agent's key variable is not passed"


def test_integrations_explain_the_absolute_path_and_the_env():
    text = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    section = text[text.index("## 3. MCP server"):text.index("## 4.")]
    assert "absolute" in section and ".venv/bin/walrus-mem" in section
    assert "refuses to start" in section


def test_readme_says_memories_expire_and_how_to_keep_them():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"memories expire", text, re.IGNORECASE)
    assert "`epochs = 5` by default" in text
    # a scheduled sync: a cron line or a systemd timer running `walrus-mem sync`
    cron = re.compile(r"^(\S+\s+){5}\S*walrus-mem\S*(\s+\S+)*\s+sync\b", re.MULTILINE)
    assert cron.search(text), "no cron line running walrus-mem sync"
    assert "OnCalendar=" in text
