"""`walrus-mem --agent NAME doctor` (issue 27 item 5): that agent's setup only; a
missing master key is a warning when no checked namespace derives from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers_cli import invoke_json

CODER_KEY = "c0" * 32
TWO_OWN_KEYS = ('[agents.coder]\nkey = "${CODER_KEY}"\n'
                '[agents.reviewer]\nkey = "${REVIEWER_KEY}"\n')


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_environ) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    cfg = tmp_path / "agents.toml"
    cfg.write_text(TWO_OWN_KEYS)
    return cfg


def _checks(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_agent_doctor_passes_a_correct_two_agent_setup(config, monkeypatch):
    monkeypatch.setenv("CODER_KEY", CODER_KEY)
    report = invoke_json(["--config", str(config), "--agent", "coder", "doctor", "--no-model"])
    checks = _checks(report)
    assert report["ok"], report
    assert checks["master key"]["status"] == "warn"
    assert checks["agent coder"]["status"] == "ok" and "coder" in checks["agent coder"]["detail"]
    assert "agent reviewer" not in checks  # another process's agent


def test_agent_doctor_fails_when_its_own_variable_is_unset(config):
    report = invoke_json(["--config", str(config), "--agent", "coder", "doctor", "--no-model"],
                         expect=1)
    check = _checks(report)["agent coder"]
    assert check["status"] == "fail" and "CODER_KEY" in check["detail"]


def test_agent_doctor_with_a_derived_agent_needs_the_master_key(config):
    config.write_text(TWO_OWN_KEYS + "[agents.writer]\n")
    report = invoke_json(["--config", str(config), "--agent", "writer", "doctor", "--no-model"],
                         expect=1)
    checks = _checks(report)
    assert checks["master key"]["status"] == "fail"
    assert checks["agent writer"]["status"] == "fail"


def test_plain_doctor_warns_only_when_every_agent_has_its_own_key(config, monkeypatch):
    monkeypatch.setenv("CODER_KEY", CODER_KEY)
    monkeypatch.setenv("REVIEWER_KEY", "d1" * 32)
    report = invoke_json(["--config", str(config), "doctor", "--no-model"])
    assert _checks(report)["master key"]["status"] == "warn"


def test_unknown_agent_is_one_failed_check_naming_the_known_ones(config):
    report = invoke_json(["--config", str(config), "--agent", "nobody", "doctor", "--no-model"],
                         expect=1)
    check = _checks(report)["agent nobody"]
    assert check["status"] == "fail" and "coder" in check["detail"]
