"""Global options after the subcommand (issue 27 item 2): `recall "x" -n ops --json`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from walrus_mem._cli.global_options import hoist_global_options
from walrus_mem._cli.main import LAZY_COMMANDS, LAZY_SHORT_HELP, cli

from .helpers_cli import TEST_MASTER_HEX, envelope_of, invoke


@pytest.fixture(autouse=True)
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")


def hoist(*args: str) -> list[str]:
    with click.Context(cli) as ctx:
        return hoist_global_options(cli, ctx, list(args))


def test_options_after_the_subcommand_move_before_it():
    assert hoist("recall", "x", "-n", "ops", "--json") == [
        "--namespace", "ops", "--json", "recall", "x"]
    assert hoist("remember", "hello", "--namespace=ops", "-vv") == [
        "--namespace", "ops", "--verbose", "--verbose", "remember", "hello"]
    assert hoist("list", "-nops", "--data-dir", "/d", "--config", "c.toml", "-a", "coder") == [
        "--namespace", "ops", "--data-dir", "/d", "--config", "c.toml", "--agent", "coder", "list"]
    # the same value twice is fine; nothing after -- moves; before the command, unchanged
    assert hoist("-n", "ops", "recall", "x", "-n", "ops") == ["-n", "ops", "recall", "x"]
    assert hoist("remember", "--", "-n", "ops") == ["remember", "--", "-n", "ops"]
    assert hoist("--json", "-n", "ops", "list") == ["--json", "-n", "ops", "list"]


def test_a_subcommands_own_option_stays_its_own():
    # keys add has its own --agent; relayer its own --data-dir; mcp its own --agent
    assert hoist("keys", "add", "NAME", "--agent", "x") == ["keys", "add", "NAME", "--agent", "x"]
    assert hoist("relayer", "--data-dir", "/r", "--json") == [
        "--json", "relayer", "--data-dir", "/r"]
    # a value of the command's own option is never read as a global option
    assert hoist("remember", "x", "--category", "-n") == ["remember", "x", "--category", "-n"]


def test_an_option_between_a_group_and_its_subcommand_goes_where_it_is_read():
    # `keys --agent x export`: export has its own --agent, so the value goes to export
    assert hoist("keys", "--agent", "x", "export") == ["keys", "export", "--agent", "x"]
    assert hoist("keys", "-a", "x", "export", "--yes") == [
        "keys", "export", "--yes", "--agent", "x"]
    # a global option export does not define is hoisted to the front
    assert hoist("keys", "--json", "-n", "ops", "export") == [
        "--json", "--namespace", "ops", "keys", "export"]
    # the subgroup that runs itself (`keys --agent coder`) is hoisted as before
    assert hoist("keys", "--agent", "coder") == ["--agent", "coder", "keys"]


def test_keys_agent_before_export_is_not_a_usage_error():
    result = invoke(["keys", "--agent", "nosuch", "export", "--yes"], expect=1)
    assert "No such option" not in result.stderr


@pytest.mark.parametrize("args", [
    ["-n", "a", "recall", "x", "-n", "b"],
    ["recall", "x", "-n", "a", "--namespace", "b"],
    ["--data-dir", "/a", "list", "--data-dir", "/b"],
])
def test_conflicting_values_are_a_usage_error(args):
    result = invoke(args, expect=2)
    assert "given twice with different values" in result.stderr


def test_remember_and_recall_as_people_type_them():
    rec = envelope_of(invoke(["remember", "hello", "there", "--namespace", "ops",
                             "--json"]))["data"]
    assert rec["namespace"] == "ops"
    out = envelope_of(invoke(["recall", "hello", "-n", "ops", "--json", "--min-score",
                             "0"]))["data"]
    assert [hit["record"]["id"] for hit in out["hits"]] == [rec["id"]]
    # and in the default namespace there is nothing
    out = envelope_of(invoke(["recall", "hello", "--json", "--min-score", "0"]))["data"]
    assert out["hits"] == []


def test_help_names_the_global_options():
    assert "Global options" in invoke(["--help"]).stdout
    assert "go before or after the command" in invoke(["recall", "--help"]).stdout


def test_lazy_commands_short_help_matches_theirs():
    """--help lists mcp and relayer from LAZY_SHORT_HELP (their modules stay unimported)."""
    import importlib

    for name, (module, attr) in LAZY_COMMANDS.items():
        command = getattr(importlib.import_module(module), attr)
        assert command.get_short_help_str(200) == LAZY_SHORT_HELP[name]


def test_help_does_not_import_the_mcp_sdk():
    code = ("import sys\nfrom click.testing import CliRunner\n"
            "from walrus_mem._cli.main import cli\n"
            "r = CliRunner().invoke(cli, ['--help'])\nassert r.exit_code == 0, r.output\n"
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', "
            "'walrus_mem.mcp_server', 'relayer_mock.cli'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]"
