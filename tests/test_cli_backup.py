"""A backup that restores (issue 27 item 4): `keys export` output goes back through
`keys import` as printed; `keys export --with-heads FILE` records each namespace's
head, and `restore --heads FILE` on a new machine starts from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers_cli import TEST_MASTER_HEX, assert_no_secret, invoke, invoke_json
from walrus_mem._keys.keystore import parse_backup, to_mnemonic
from walrus_mem.config import default_key_file
from walrus_mem.errors import MalformedKey
from walrus_mem.keys import MasterSeed

SECRET = bytes.fromhex(TEST_MASTER_HEX)


@pytest.fixture
def new_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Switch the config dir (so the key file) to a fresh one: another machine."""

    def switch(name: str) -> list[str]:
        cfg = tmp_path / f"{name}-config"
        monkeypatch.setenv("XDG_CONFIG_HOME", str(cfg))
        monkeypatch.setattr("walrus_mem.config.default_config_path",
                            lambda: cfg / "walrus-mem" / "config.toml")
        return ["--data-dir", str(tmp_path / f"{name}-data")]

    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    return switch


@pytest.mark.parametrize("shape", ["both lines", "words", "hex", "json", "crlf"])
def test_parse_backup_takes_what_export_prints(shape):
    words, hexed = to_mnemonic(SECRET), SECRET.hex()
    text = {"both lines": f"{words}\n{hexed}\n", "words": words, "hex": hexed,
            "json": json.dumps({"key": "master", "mnemonic": words, "hex": hexed}),
            "crlf": f"{words}\r\n{hexed}\r\n"}[shape]
    assert parse_backup(text) == SECRET


def test_parse_backup_refuses_two_lines_that_disagree():
    with pytest.raises(MalformedKey) as info:
        parse_backup(f"{to_mnemonic(SECRET)}\n{'ab' * 32}\n")
    assert "do not match" in str(info.value) and "ab" * 32 not in str(info.value)


@pytest.mark.parametrize("json_mode", [False, True])
def test_export_pipes_into_import(new_machine, json_mode):
    first = new_machine("one")
    invoke([*first, "keys", "import", "--store", "file"], input=TEST_MASTER_HEX)
    flags = ["--json"] if json_mode else []
    exported = invoke([*flags, *first, "keys", "export", "--yes"]).stdout
    second = new_machine("two")
    res = invoke([*second, "keys", "import", "--store", "file"], input=exported)
    assert MasterSeed.from_hex(default_key_file().read_text()) == MasterSeed(SECRET)
    assert_no_secret(res, TEST_MASTER_HEX)


def test_backup_with_heads_restores_on_a_new_machine(tmp_path, new_machine):
    from relayer_mock.server import RelayerServer

    with RelayerServer(tmp_path / "walrus") as server:
        urls = ["--config", str(tmp_path / "shared.toml")]
        (tmp_path / "shared.toml").write_text(
            f'publisher_url = "{server.url}"\naggregator_urls = ["{server.url}"]\n')
        first = [*urls, *new_machine("one")]
        invoke([*first, "keys", "import", "--store", "file"], input=TEST_MASTER_HEX)
        invoke([*first, "remember", "default fact"])
        invoke([*first, "-n", "ops", "remember", "ops fact one"])
        invoke([*first, "-n", "ops", "remember", "ops fact two"])
        invoke([*first, "sync"])
        invoke([*first, "-n", "ops", "sync"])
        heads = tmp_path / "backup-heads.txt"
        out = invoke([*first, "keys", "export", "--yes", "--with-heads", str(heads)])
        lines = [ln.split() for ln in heads.read_text().splitlines() if not ln.startswith("#")]
        assert sorted(ns for ns, _ in lines) == ["default", "ops"]
        assert str(heads) in out.stderr
        assert TEST_MASTER_HEX not in heads.read_text()

        second = [*urls, *new_machine("two")]
        invoke([*second, "keys", "import", "--store", "file"], input=out.stdout)
        report = invoke_json([*second, "-n", "ops", "restore", "--heads", str(heads)])
        assert report["restored"] == 2
        texts = sorted(r["text"] for r in invoke_json([*second, "-n", "ops", "list"])["memories"])
        assert texts == ["ops fact one", "ops fact two"]
        invoke([*second, "restore", "--heads", str(heads)])
        assert [r["text"] for r in invoke_json([*second, "list"])["memories"]] == ["default fact"]


def test_restore_heads_names_a_missing_namespace_and_conflicts(tmp_path, new_machine):
    machine = new_machine("one")
    invoke([*machine, "keys", "import", "--store", "file"], input=TEST_MASTER_HEX)
    heads = tmp_path / "heads.txt"
    heads.write_text("# nothing\n")
    res = invoke([*machine, "-n", "ops", "restore", "--heads", str(heads)], expect=1)
    assert "ops" in res.stderr and str(heads) in res.stderr
    res = invoke([*machine, "restore", "--heads", str(heads), "x" * 43], expect=2)
    assert "--heads" in res.stderr


def test_embedded_404_on_a_new_machine_says_where_the_blobs_are(tmp_path, new_machine):
    first = new_machine("one")
    invoke([*first, "keys", "import", "--store", "file"], input=TEST_MASTER_HEX)
    invoke([*first, "remember", "a fact kept in the embedded relayer"])
    invoke([*first, "sync"])
    heads = tmp_path / "heads.txt"
    invoke([*first, "keys", "export", "--yes", "--with-heads", str(heads)])
    second = new_machine("two")
    invoke([*second, "keys", "import", "--store", "file"], input=TEST_MASTER_HEX)
    res = invoke([*second, "restore", "--heads", str(heads)], expect=1)
    assert "embedded relayer" in res.stderr and "walrus-mem relayer" in res.stderr
    assert "ensure that it was entered correctly" not in res.stderr.split("embedded")[-1]
