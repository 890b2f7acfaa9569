"""CLI errors use CLI words (issue 27 item 2): common bad inputs to every command end
in one error line (exit 1) or click's usage text (exit 2), never a traceback, and never
name a Python parameter of the library (``manifest_blob_id``) where the user typed an
option or an argument."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from walrus_mem._cli.envelope import cli_words
from walrus_mem.memory import Memory

from .helpers_cli import TEST_MASTER_HEX, envelope_of, invoke
from .test_cli_envelope import CASES


def _library_parameters() -> set[str]:
    """Every snake_case parameter name of Memory's public methods."""
    names: set[str] = set()
    for attr, fn in inspect.getmembers(Memory, callable):
        if attr.startswith("_"):
            continue
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        names |= {p for p in params if "_" in p.strip("_")}
    return names


LIBRARY_PARAMETERS = _library_parameters()
#: Snake-case words that are also what a user types or reads: config settings, the
#: namespace name `default`, file names.
ALLOWED = {"data_dir", "default_namespace", "publisher_url", "aggregator_urls", "heads_file",
           "embedding_model", "mock_admin_token", "use_keyring", "key_file", "master_key",
           "max_recall_results"}
BAD_ID = "not-an-id"
UNKNOWN_ID = "0" * 32

#: Bad inputs per command (argv after the command's words); every command has some.
BAD_INPUTS: dict[str, list[list[str]]] = {
    "init": [["--store", "floppy"], ["--config", "/nonexistent/dir/c.toml", "--store", "x"]],
    "demo": [["extra"]],
    "remember": [["   "], ["x", "-i", "2"], ["x", "--meta", "novalue"],
                 ["x", "--metadata-json", "[1]"], ["x", "--expires-at", "someday"]],
    "recall": [["x", "--filter", "{bad"], ["x", "--filter", '{"a": {"zz": 1}}'],
               ["x", "-k", "0"], ["x", "--min-score", "-1"]],
    "get": [[BAD_ID], [UNKNOWN_ID], []],
    "list": [["--limit", "0"], ["--filter", '{"created_at": {"gte": "tomorrow-ish"}}']],
    "update": [[BAD_ID, "text"], [UNKNOWN_ID, "text"], ["{fact}", "   "]],
    "forget": [[BAD_ID], [UNKNOWN_ID]],
    "forget-all": [[]],
    "consolidate": [["--similarity", "2"], ["--min-age", "-1"]],
    "history": [[BAD_ID], [UNKNOWN_ID]],
    "stats": [["extra"]],
    "analyze": [[], ["x", "--no-such-flag"]],
    "compact": [["extra"]],
    "reindex": [["extra"]],
    "import": [["/nonexistent/facts.jsonl"], ["{tmp}/bad.jsonl"], ["{tmp}/empty.txt"]],
    "export": [["-o", "/nonexistent/dir/out.jsonl"], ["--filter", "{bad"]],
    "restore": [["not-a-head"], ["--manifest", "not-a-head"], ["a.1.ff", "--manifest", "b.1.ff"],
                ["--heads", "/nonexistent/heads.txt"], ["{unknown_head}"]],
    "pull": [["not-a-head"], ["{unknown_head}"]],
    "sync": [["extra"]],
    "expiring": [["--within", "-1"]],
    "extend": [[], [BAD_ID], [UNKNOWN_ID], ["--all", "--epochs", "99"]],
    "share": [["{fact}", "--to", "nothex"], [UNKNOWN_ID, "--to", "00" * 32], ["{fact}"]],
    "accept": [["garbage"], ["wmgrant1:abc:def"]],
    "doctor": [["--no-such-flag"]],
    "repair": [["--manifest", "not-a-head"]],
    "keys": [["no-such-subcommand"]],
    "keys export": [["--yes", "--agent", "nosuch"]],
    "keys export-public": [["extra"]],
    "keys import": [["--store", "floppy"]],
    "keys rotate": [["extra"]],
    "keys new-agent": [["bad name!"], []],
}
#: Global options that are wrong for any command.
GLOBAL_BAD = [["--agent", "nosuch"], ["-n", "Bad Namespace!"]]


def test_every_command_has_bad_inputs() -> None:
    assert sorted(BAD_INPUTS) == sorted(CASES)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("words")
    env = {"WALRUS_MEM_DATA_DIR": str(base / "data"), "WALRUS_MEM_STATE_DIR": str(base / "st"),
           "WALRUS_MEM_MASTER_KEY": TEST_MASTER_HEX, "WALRUS_MEM_EMBEDDING_MODEL": "test-hash"}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        fact = envelope_of(invoke(["--json", "remember", "a fact"]))["data"]["id"]
    (base / "bad.jsonl").write_text("{not json\n", encoding="utf-8")
    (base / "empty.txt").write_text("\n", encoding="utf-8")
    unknown_head = "A" * 43 + ".1." + "ab" * 32
    yield {"tmp": str(base), "fact": fact, "unknown_head": unknown_head, **env}


def _leaks(text: str) -> list[str]:
    words = set(re.findall(r"(?<![\w.-])[a-z]+(?:_[a-z0-9]+)+(?![\w-])", text))
    return sorted((words & LIBRARY_PARAMETERS) - ALLOWED)


def _fill(arg: str, shared: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: shared.get(m.group(1), m.group(0)), arg)


def _check(args: list[str], stdin: str | None = None) -> None:
    result = invoke(args, expect=None, input=stdin)
    shown = result.stdout + result.stderr
    assert result.exit_code in (1, 2), (args, result.exit_code, shown)
    assert "Traceback" not in shown, (args, shown)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        (args, result.exception)
    assert not _leaks(shown), (args, _leaks(shown), shown)


@pytest.mark.parametrize("command", sorted(BAD_INPUTS))
def test_bad_inputs_fail_in_cli_words(command: str, shared: dict[str, str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WALRUS_MEM_DATA_DIR", "WALRUS_MEM_STATE_DIR", "WALRUS_MEM_MASTER_KEY",
                 "WALRUS_MEM_EMBEDDING_MODEL"):
        monkeypatch.setenv(name, shared[name])
    stdin = "not a key backup\n" if command == "keys import" else None
    for bad in BAD_INPUTS[command]:
        _check([*command.split(), *(_fill(a, shared) for a in bad)], stdin)
    if command in ("keys new-agent", "init", "demo", "keys import", "keys",
                   "keys export-public"):
        return  # they do not work in one namespace
    case = CASES[command]
    words = case[case.index(command.split()[-1]) + 1:]
    for bad in GLOBAL_BAD:
        _check([*bad, *command.split(), *(_fill(a, shared) for a in words)])


def test_library_parameter_names_become_options() -> None:
    assert cli_words("pass manifest_blob_id, the head") == "pass HEAD (or --manifest), the head"
    assert cli_words("pass allow_stale=True to accept it") == "pass --allow-stale to accept it"
    assert cli_words("allow_unrelated=True (`--allow-unrelated`) to merge") == \
        "--allow-unrelated to merge"
    assert cli_words("forget_all needs confirm=True; pass --yes to confirm") == \
        "forget-all needs --yes; pass --yes to confirm"
    assert cli_words("min_score must be a number") == "--min-score must be a number"
    assert cli_words("my_manifest_blob_id stays") == "my_manifest_blob_id stays"
    assert "manifest_blob_id" in LIBRARY_PARAMETERS  # the sweep knows what to look for


def test_a_restore_with_no_known_head_asks_for_head_not_the_parameter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    result = invoke(["--data-dir", str(tmp_path / "fresh"), "-n", "nothing", "restore"],
                    expect=1)
    assert "manifest_blob_id" not in result.stderr, result.stderr
    assert "walrus-mem: error:" in result.stderr
