"""walrus-mem doctor and the walrus_mem._cli.doctor checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from walrus_mem._cli.doctor import check_embedding_model, check_storage, run_checks
from walrus_mem.config import Settings, default_key_file
from walrus_mem.testing import HashEmbedder

from .helpers_cli import TEST_MASTER_HEX, assert_no_secret, invoke, invoke_json


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))


def by_name(checks):
    return {c["name"]: c for c in checks}


def test_healthy_setup_passes(monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    data = invoke_json(["doctor", "--no-model"])
    assert data["ok"] is True
    checks = by_name(data["checks"])
    assert checks["master key"]["status"] == "ok" and "env" in checks["master key"]["detail"]
    assert "embedded relayer" in checks["storage"]["detail"]
    text = invoke(["doctor", "--no-model"])
    assert "OK" in text.stdout and "FAIL" not in text.stdout
    assert_no_secret(text, TEST_MASTER_HEX)


def test_missing_key_fails_with_a_fix():
    res = invoke(["doctor", "--no-model"], expect=1)
    assert "FAIL" in res.stdout and "master key" in res.stdout
    assert "walrus-mem init" in res.stdout


def test_unset_placeholder_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("SET_ONE", "x")
    cfg = tmp_path / "c.toml"
    cfg.write_text('publisher_url = "http://${SET_ONE}"\nmaster_key = "${DOCTOR_UNSET_VAR}"\n')
    data = invoke_json(["--config", str(cfg), "doctor", "--no-model"], expect=1)
    # master_key is resolved only when needed: a warning here, a failed key check below
    check = by_name(data["checks"])["${VAR} placeholders"]
    assert check["status"] == "warn"
    assert "DOCTOR_UNSET_VAR" in check["detail"] and "SET_ONE" not in check["detail"]
    key = by_name(data["checks"])["master key"]
    assert key["status"] == "fail" and "DOCTOR_UNSET_VAR" in key["detail"]
    cfg.write_text('publisher_url = "http://${DOCTOR_UNSET_URL}"\n')
    data = invoke_json(["--config", str(cfg), "doctor", "--no-model"], expect=1)
    check = by_name(data["checks"])["${VAR} placeholders"]
    assert check["status"] == "fail" and "DOCTOR_UNSET_URL" in check["detail"]


def test_bad_toml_and_bad_setting(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("epochs = = 3\n")
    data = invoke_json(["--config", str(cfg), "doctor", "--no-model"], expect=1)
    assert by_name(data["checks"])["config file"]["status"] == "fail"
    cfg.write_text("epochs = 999\n")
    data = invoke_json(["--config", str(cfg), "doctor", "--no-model"], expect=1)
    assert "epochs" in by_name(data["checks"])["settings"]["detail"]


def test_insecure_key_file_says_chmod(clean_environ):
    invoke(["init", "--store", "file"])
    key_file = default_key_file()
    os.chmod(key_file, 0o644)
    data = invoke_json(["doctor", "--no-model"], expect=1)
    check = by_name(data["checks"])["key file"]
    assert check["status"] == "fail" and check["fix"] == f"chmod 600 {key_file}"


def test_unreachable_publisher_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("WALRUS_MEM_AGGREGATOR_URLS", "http://127.0.0.1:9")
    data = invoke_json(["doctor", "--no-model"], expect=1)
    failed = [c for c in data["checks"] if c["status"] == "fail"]
    assert {c["name"] for c in failed} == {"publisher", "aggregator"}
    assert all("127.0.0.1:9" in c["detail"] for c in failed)


@pytest.mark.parametrize("script, status", [
    ("import sys; sys.exit(1)", "fail"), ("print('a b')", "fail"), ("print('tok-123')", "ok")])
def test_token_command_is_run_once(tmp_path, monkeypatch, script, status):
    """A token command that cannot print a token fails every store: doctor said 'fine'."""
    import shlex
    import sys

    helper = tmp_path / "token.py"
    helper.write_text(script)
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("WALRUS_MEM_AGGREGATOR_URLS", "http://127.0.0.1:9")
    monkeypatch.setenv("WALRUS_MEM_PUBLISHER_TOKEN_COMMAND",
                       shlex.join([sys.executable, str(helper)]))
    data = invoke_json(["doctor", "--no-model"], expect=1)
    token = by_name(data["checks"])["publisher token"]
    assert token["status"] == status, token
    assert "tok-123" not in str(data)


def test_embedding_check_with_injected_embedder():
    settings = Settings.load()
    check = check_embedding_model(settings, make=lambda s: HashEmbedder(dim=32))
    assert check.status == "ok" and "dim 32" in check.detail

    class Broken(HashEmbedder):
        def embed(self, texts):
            return super().embed(texts)[:, :3]

    bad = check_embedding_model(settings, make=lambda s: Broken(dim=32))
    assert bad.status == "fail" and "shape" in bad.detail


def test_run_checks_stops_after_a_broken_config(tmp_path):
    checks = run_checks(tmp_path / "missing.toml", model=False)
    assert [c.name for c in checks] == ["config file"] and not checks[0].ok


def test_storage_embedded_is_ok():
    assert check_storage(Settings.load())[0].status == "ok"


def test_local_store_checks(monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    fresh = by_name(invoke_json(["doctor", "--no-model"])["checks"])
    assert "no catalog yet" in fresh["local store"]["detail"]

    invoke(["remember", "a fact for the doctor"])
    data = invoke_json(["doctor"])  # the model check uses the test embedder here
    ns = by_name(data["checks"])["namespace default"]
    assert ns["status"] == "warn" and "manifest" in ns["detail"] and data["ok"] is True
    assert by_name(data["checks"])["embedding model"]["status"] == "ok"
    invoke(["sync"])
    ns = by_name(invoke_json(["doctor", "--no-model"])["checks"])["namespace default"]
    assert ns["status"] == "ok" and "1 memories" in ns["detail"]

    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash-32")
    data = invoke_json(["doctor", "--no-model"], expect=1)
    ns = by_name(data["checks"])["namespace default"]
    assert ns["status"] == "fail" and ns["fix"] == "walrus-mem -n default reindex (or configure " \
        "test-hash-embedder-64)"
