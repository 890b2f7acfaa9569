"""walrus-mem init / keys, global error handling and exit codes."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import keyring
import nacl.signing
import pytest
from keyring.backends import fail

from walrus_mem.config import default_key_file
from walrus_mem.keys import MasterSeed, NamespaceKeys

from .helpers_cli import TEST_MASTER_HEX, assert_no_secret, invoke, invoke_json


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the CLI's default config path inside the test's temp dir."""
    home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "walrus-mem" / "config.toml"


def test_init_stores_in_keyring_and_prints_only_fingerprints(memory_keyring, config_home):
    result = invoke(["init"])
    stored = memory_keyring.store[("walrus-mem", "master-seed")]
    seed = MasterSeed.from_hex(stored)
    assert "OS keyring" in result.stdout
    assert seed.fingerprint in result.stdout
    assert_no_secret(result, stored)
    assert config_home.is_file()


def test_init_falls_back_to_key_file_without_keyring(clean_environ, config_home):
    keyring.set_keyring(fail.Keyring())
    result = invoke(["init"])
    key_file = default_key_file()
    assert key_file.is_file()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert str(key_file) in result.stdout
    assert "keyring" in result.stdout  # says why: no usable keyring backend
    assert_no_secret(result, key_file.read_text().strip())


def test_init_json_and_refusal_without_force(memory_keyring):
    first = invoke_json(["init"])
    assert first["key_store"] == "keyring"
    assert set(first["fingerprints"]) >= {"master", "default"}
    old = memory_keyring.store[("walrus-mem", "master-seed")]

    again = invoke(["init"], expect=1)
    assert again.stdout == ""
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "KeyExists" in lines[0] and "keys export" in lines[0]
    assert "Traceback" not in again.stderr
    assert memory_keyring.store[("walrus-mem", "master-seed")] == old
    assert_no_secret(again, old)

    old_fpr = MasterSeed.from_hex(old).fingerprint
    forced = invoke_json(["init", "--replace-key", old_fpr])
    new = memory_keyring.store[("walrus-mem", "master-seed")]
    assert new != old
    assert forced["fingerprints"]["master"] == MasterSeed.from_hex(new).fingerprint


def test_init_refuses_existing_key_file(clean_environ):
    invoke(["init", "--store", "file"])
    key_file = default_key_file()
    before = key_file.read_text()
    res = invoke(["init", "--store", "file"], expect=1)
    assert "KeyExists" in res.stderr
    assert key_file.read_text() == before
    old_fpr = MasterSeed.from_hex(before).fingerprint
    invoke(["init", "--store", "file", "--replace-key", old_fpr])
    assert key_file.read_text() != before


def test_init_keyring_only_fails_cleanly_when_no_backend():
    keyring.set_keyring(fail.Keyring())
    res = invoke(["init", "--store", "keyring"], expect=1)
    assert "KeyringUnavailable" in res.stderr and "WALRUS_MEM_MASTER_KEY" in res.stderr


def test_starter_config_parses_and_records_data_dir(tmp_path, memory_keyring):
    cfg = tmp_path / "cfg" / "walrus.toml"
    data = tmp_path / "elsewhere"
    invoke(["--config", str(cfg), "--data-dir", str(data), "init"])
    from walrus_mem.config import Settings

    settings = Settings(config_file=cfg)
    assert settings.default_namespace == "default"
    text = cfg.read_text()
    assert str(data) in text
    assert memory_keyring.store[("walrus-mem", "master-seed")] not in text


def test_keys_lists_agents_with_fingerprints(tmp_path, monkeypatch):
    agent_seed = bytes(nacl.signing.SigningKey.generate())
    monkeypatch.setenv("RESEARCHER_KEY", agent_seed.hex())
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    cfg = tmp_path / "agents.toml"
    cfg.write_text(
        '[agents.researcher]\nkey = "${RESEARCHER_KEY}"\n'
        '[agents.writer]\nnamespace = "writing"\n'
    )
    data = invoke_json(["--config", str(cfg), "keys"])
    assert data["master_key_source"] == "env"
    rows = {row["namespace"]: row for row in data["namespaces"]}
    master = MasterSeed.from_hex(TEST_MASTER_HEX)
    assert rows["default"]["fingerprint"] == NamespaceKeys.derive(master, "default").fingerprint
    assert rows["writing"]["mode"] == "derived"
    assert rows["writing"]["agent"] == "writer"
    assert rows["researcher"]["mode"] == "independent"
    indep = NamespaceKeys.from_agent_key(agent_seed, "researcher")
    assert rows["researcher"]["fingerprint"] == indep.fingerprint
    assert rows["researcher"]["verify_key"] == indep.verify_key.hex()

    table = invoke(["--config", str(cfg), "keys"])
    assert "researcher" in table.stdout and indep.fingerprint in table.stdout
    assert_no_secret(table, agent_seed.hex(), TEST_MASTER_HEX)
    exported = invoke(["--config", str(cfg), "keys", "export-public"])
    assert json.loads(exported.stdout)["namespaces"]
    assert_no_secret(exported, agent_seed.hex(), TEST_MASTER_HEX)


def test_keys_with_agent_lists_that_agent_and_refuses_an_unknown_one(tmp_path, monkeypatch):
    """`--agent NAME keys` shows NAME's row only; a mistyped agent used to list every
    namespace with exit 0."""
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    cfg = tmp_path / "agents.toml"
    cfg.write_text('[agents.writer]\nnamespace = "writing"\n[agents.coder]\n')
    data = invoke_json(["--config", str(cfg), "--agent", "writer", "keys"])
    assert [(r["agent"], r["namespace"]) for r in data["namespaces"]] == [("writer", "writing")]
    typo = invoke(["--config", str(cfg), "keys", "--agent", "writre"], expect=1)
    assert "unknown agent 'writre'" in typo.stderr and "writing" not in typo.stdout


def test_unset_placeholder_is_one_line_naming_the_variable(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('publisher_url = "${NOT_SET_ANYWHERE_42}"\n')
    res = invoke(["--config", str(cfg), "keys"], expect=1)
    assert res.stderr.count("\n") == 1
    assert "NOT_SET_ANYWHERE_42" in res.stderr and "PlaceholderError" in res.stderr


def test_invalid_setting_is_a_config_error_without_the_value(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRETISH", "hunter2-value")
    cfg = tmp_path / "c.toml"
    cfg.write_text('epochs = 999\nsend_object_to = "${SECRETISH}"\nbogus = "${SECRETISH}"\n')
    res = invoke(["--config", str(cfg), "keys"], expect=1)
    assert "ConfigError" in res.stderr and "epochs" in res.stderr
    assert "hunter2" not in res.stderr


def test_verbose_shows_the_traceback(tmp_path):
    cfg = tmp_path / "missing.toml"
    quiet = invoke(["--config", str(cfg), "keys"], expect=1)
    assert "Traceback" not in quiet.stderr
    loud = invoke(["-v", "--config", str(cfg), "keys"], expect=1)
    assert "Traceback" in loud.stderr


def test_usage_errors_exit_2():
    assert "No such command" in invoke(["no-such-command"], expect=2).stderr
    invoke(["init", "--store", "cloud"], expect=2)


def test_version_and_help():
    assert "walrus-mem" in invoke(["--version"]).stdout
    out = invoke(["--help"]).stdout
    for command in ("init", "keys", "demo", "relayer"):
        assert command in out


def test_init_warns_when_another_key_source_wins(monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    data = invoke_json(["init"])
    assert data["shadowed_by"] == "env"
    res = invoke(["init", "--replace-key", data["fingerprints"]["master"]])
    assert "precedence" in res.stderr and "env" in res.stderr
    assert_no_secret(res, TEST_MASTER_HEX)
