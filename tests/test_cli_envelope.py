"""One --json envelope for every command (issue 27 item 2; docs/cli.md "--json").

Every command of ``walrus-mem --help`` (the servers ``mcp`` and ``relayer`` aside)
has a case below: run with --json it prints exactly one envelope
``{"ok", "command", "data", "warnings", "error"}`` whose ``data`` is an object, and a
usage error prints an error envelope with exit 2. A command added without a case
fails :func:`test_every_command_has_an_envelope_case`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from walrus_mem._cli.envelope import SERVER_COMMANDS
from walrus_mem._cli.main import cli
from walrus_mem.keys import MasterSeed, NamespaceKeys

from .helpers_cli import TEST_MASTER_HEX, envelope_of, invoke


def all_commands() -> list[str]:
    """Every command a user can type (``keys export`` for a group's), servers aside."""
    ctx = click.Context(cli)
    names = []
    for name in cli.list_commands(ctx):
        if name in SERVER_COMMANDS:
            continue
        command = cli.get_command(ctx, name)
        assert command is not None
        if command.hidden:
            continue
        names.append(name)
        if isinstance(command, click.Group):
            names += [f"{name} {sub}" for sub, c in command.commands.items() if not c.hidden]
    return names


#: argv after ``--json`` for each command, ``{name}`` filled from the shared setup.
CASES: dict[str, list[str]] = {
    "init": ["init", "--store", "file", "--config", "{tmp}/init/config.toml"],
    "demo": ["demo"],
    "remember": ["-n", "scratch", "remember", "a fact for the envelope"],
    "recall": ["recall", "peanuts", "--min-score", "0"],
    "get": ["get", "{fact}"],
    "list": ["list"],
    "update": ["-n", "scratch", "update", "{scratch_1}", "an updated fact"],
    "forget": ["-n", "scratch", "forget", "{scratch_2}"],
    "forget-all": ["-n", "wipe", "forget-all", "--yes"],
    "consolidate": ["consolidate", "--dry-run", "--min-age", "0"],
    "history": ["history", "{fact}"],
    "stats": ["stats"],
    "analyze": ["-n", "scratch", "analyze", "I prefer green tea in the morning."],
    "compact": ["-n", "scratch", "compact"],
    "reindex": ["-n", "scratch", "reindex"],
    "import": ["-n", "scratch", "import", "{tmp}/facts.txt"],
    "export": ["export"],
    "restore": ["restore"],  # the newest head this data dir knows
    "pull": ["pull", "{head}"],
    "sync": ["sync"],
    "expiring": ["expiring", "--within", "53"],
    "extend": ["-n", "scratch", "extend", "--all"],
    "share": ["share", "{fact}", "--to", "{bob_key}"],
    "accept": ["-n", "bob", "accept", "{grant}"],
    "doctor": ["doctor", "--no-model"],
    "repair": ["repair"],
    "keys": ["keys"],
    "keys export": ["keys", "export", "--yes"],
    "keys export-public": ["keys", "export-public"],
    "keys import": ["keys", "import", "--store", "file"],
    "keys rotate": ["-n", "rot", "keys", "rotate"],
    "keys new-agent": ["keys", "new-agent", "carol"],
}
STDIN = {"keys import": TEST_MASTER_HEX}


def test_every_command_has_an_envelope_case() -> None:
    assert sorted(CASES) == sorted(all_commands())


def _env(base: Path) -> dict[str, str]:
    return {"WALRUS_MEM_DATA_DIR": str(base / "data"),
            "WALRUS_MEM_STATE_DIR": str(base / "state"),
            "WALRUS_MEM_MASTER_KEY": TEST_MASTER_HEX,
            "WALRUS_MEM_EMBEDDING_MODEL": "test-hash"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One data dir with a few memories, a published head and a grant for every case."""
    base = tmp_path_factory.mktemp("envelope")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in _env(base).items():
            mp.setenv(name, value)
        run = lambda *args: envelope_of(invoke(["--json", *args]))["data"]  # noqa: E731
        fact = run("remember", "I'm allergic to peanuts")["id"]
        scratch = [run("-n", "scratch", "remember", f"scratch fact {i}")["id"] for i in (1, 2)]
        run("-n", "wipe", "remember", "a fact to wipe")
        run("-n", "rot", "remember", "a fact to rotate")
        head = run("sync")["manifests"]["default"]
        bob_key = NamespaceKeys.derive(MasterSeed.from_hex(TEST_MASTER_HEX), "bob").verify_key.hex()
        grant = run("share", fact, "--to", bob_key)["reference"]
        (base / "facts.txt").write_text("imported one\nimported two\n", encoding="utf-8")
    yield {"tmp": str(base), "fact": fact, "scratch_1": scratch[0], "scratch_2": scratch[1],
           "head": head, "bob_key": bob_key, "grant": grant}


@pytest.fixture
def in_shared(shared: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in _env(Path(shared["tmp"])).items():
        monkeypatch.setenv(name, value)
    return shared


@pytest.mark.parametrize("command", sorted(CASES))
def test_json_prints_one_envelope(command: str, in_shared: dict[str, str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if command == "demo":  # the real demo takes a minute; one passing step is enough here
        import walrus_mem._cli.demo as demo

        monkeypatch.setattr(demo, "_STEPS", [("one", lambda n, s: n.check(True, "fine"))])
    args = [a.format(**in_shared) for a in CASES[command]]
    result = invoke(["--json", *args], input=STDIN.get(command))
    doc = envelope_of(result)
    assert doc["ok"] is True and doc["command"] == command
    assert isinstance(doc["data"], dict) and doc["data"], doc
    assert all(isinstance(w, str) for w in doc["warnings"])


@pytest.mark.parametrize("command", sorted(CASES))
def test_a_usage_error_is_an_error_envelope(command: str) -> None:
    result = invoke(["--json", *command.split(), "--no-such-option"], expect=2)
    doc = envelope_of(result)
    assert doc["command"] == command and doc["data"] is None
    assert doc["error"]["type"] == "UsageError" and "--no-such-option" in doc["error"]["message"]
    assert f"walrus-mem {command} --help" in doc["error"]["hint"]
    assert "No such option" in result.stderr  # people still get click's usage text


def test_a_library_error_is_an_error_envelope_with_the_stderr_line(
        in_shared: dict[str, str]) -> None:
    result = invoke(["--json", "get", "0" * 32], expect=1)
    doc = envelope_of(result)
    assert doc["command"] == "get" and doc["error"]["type"] == "MemoryNotFound"
    assert doc["error"]["hint"] and "walrus-mem list" in doc["error"]["hint"]
    assert result.stderr.startswith("walrus-mem: error: ") and "[MemoryNotFound]" in result.stderr


def test_a_failing_report_keeps_its_data(in_shared: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": ""}\n', encoding="utf-8")
    doc = envelope_of(invoke(["--json", "-n", "scratch", "import", str(bad)], expect=1))
    assert doc["ok"] is False and doc["error"]["type"] == "Incomplete"
    assert doc["data"]["items"] == 2 and len(doc["data"]["failed"]) == 1


def test_export_json_is_the_envelope_and_plain_export_stays_jsonl(
        in_shared: dict[str, str], tmp_path: Path) -> None:
    doc = envelope_of(invoke(["--json", "export"]))
    assert doc["data"]["count"] == len(doc["data"]["records"]) > 0
    assert any("PLAINTEXT" in w for w in doc["warnings"])
    plain = invoke(["export"]).stdout.splitlines()
    assert [json.loads(line) for line in plain] == doc["data"]["records"]
    out = tmp_path / "x.jsonl"
    to_file = envelope_of(invoke(["--json", "export", "-o", str(out)]))["data"]
    assert to_file["output"] == str(out) and "records" not in to_file
    assert len(out.read_text().splitlines()) == to_file["count"]


@pytest.mark.parametrize("server", sorted(SERVER_COMMANDS))
def test_a_server_prints_no_envelope(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server's stdout is its own (MCP speaks JSON-RPC there): no envelope after it."""
    ctx = click.Context(cli)
    command = cli.get_command(ctx, server)
    assert command is not None
    monkeypatch.setattr(command, "callback", lambda *a, **k: None)
    monkeypatch.setattr(command, "params", [])
    assert invoke(["--json", server]).stdout == ""


def test_an_unknown_command_is_an_error_envelope_too() -> None:
    doc = envelope_of(invoke(["--json", "nosuch"], expect=2))
    assert doc["command"] == "" and doc["error"]["type"] == "UsageError"
    assert doc["error"]["hint"] == "`walrus-mem --help` lists the commands"
    doc = envelope_of(invoke(["--json", "keys", "nosuch"], expect=2))
    assert doc["command"] == "keys" and "nosuch" in doc["error"]["message"]
