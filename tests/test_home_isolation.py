"""One root for all state (issue 27 item 6): WALRUS_MEM_HOME moves config, keys, data,
state and caches; the CLI and the demo never write to the real home directory.

The runs below use an empty HOME made read-only. Tests may run as root, whom a
read-only directory does not stop, so each also checks that HOME is still empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from walrus_mem._local.user_dirs import HOME_ENV, home_dir

# bound before tests/conftest.py's isolated_config_home patches the module's name
from walrus_mem.config import default_config_path as real_default_config_path

TIMEOUT = 300


def test_walrus_mem_home_moves_every_default(tmp_path, monkeypatch):
    from relayer_mock.cli import default_data_dir as relayer_dir
    from walrus_mem._log.heads_mirror import default_state_dir
    from walrus_mem._recall.minilm import model_cache_dir
    from walrus_mem.config import Settings, default_key_file

    monkeypatch.setattr("walrus_mem.config.default_config_path", real_default_config_path)
    for name in ("WALRUS_MEM_DATA_DIR", "WALRUS_MEM_STATE_DIR", "WALRUS_MEM_MODEL_CACHE"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "wm"
    monkeypatch.setenv(HOME_ENV, str(home))
    assert real_default_config_path() == home / "config.toml"
    assert default_key_file() == home / "keys" / "master.key"
    assert Path(Settings.load(config_file=None).data_dir) == home / "data"
    assert default_state_dir() == home / "state"
    assert model_cache_dir() == home / "cache" / "models"
    assert relayer_dir() == home / "data" / "relayer"
    monkeypatch.setenv(HOME_ENV, "~/wm")  # expanded like every configured path
    monkeypatch.setenv("HOME", str(tmp_path))
    assert home_dir("state") == home / "state"
    monkeypatch.delenv(HOME_ENV)
    assert home_dir("data") is None and real_default_config_path() != home / "config.toml"


def _fresh_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WALRUS_MEM_", "XDG_", "RELAYER_MOCK_"))}
    env.update(HOME=str(home), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def _read_only_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o500)
    return home


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "walrus_mem", *args], env=env, cwd=cwd,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result


def test_a_cli_session_writes_only_under_walrus_mem_home(tmp_path):
    home = _read_only_home(tmp_path)
    root = tmp_path / "wm"
    env = _fresh_env(home, WALRUS_MEM_HOME=str(root))
    try:
        _run(["init", "--store", "file"], env, tmp_path)
        _run(["remember", "I'm allergic to peanuts", "-n", "ops"], env, tmp_path)
        hits = json.loads(_run(["recall", "food allergies", "-n", "ops", "--json"],
                               env, tmp_path).stdout)["data"]["hits"]
        assert [h["record"]["text"] for h in hits] == ["I'm allergic to peanuts"]
        _run(["sync"], env, tmp_path)
    finally:
        home.chmod(0o700)
    assert list(home.iterdir()) == []
    assert (root / "config.toml").is_file() and (root / "keys" / "master.key").is_file()
    assert (root / "data" / "catalog.sqlite3").is_file()
    assert (root / "state" / "seen-heads.sqlite3").is_file()


def test_the_onnxruntime_path_writes_nothing_in_home(tmp_path):
    """onnxruntime keeps telemetry files in ~/.cache/Microsoft unless told not to."""
    pytest.importorskip("onnxruntime")
    home = _read_only_home(tmp_path)
    code = ("from walrus_mem._recall.minilm_onnx import OnnxMiniLM\n"
            "print(OnnxMiniLM().encode(['hello']).shape)")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=_fresh_env(home, WALRUS_MEM_HOME=str(tmp_path / "wm")),
                             cwd=tmp_path, timeout=TIMEOUT)
    finally:
        home.chmod(0o700)
    assert out.returncode == 0 and "(1, 384)" in out.stdout, out.stderr
    assert list(home.iterdir()) == []
    assert any((tmp_path / "wm" / "cache" / "models").glob("*.onnx"))


@pytest.mark.model
def test_the_demo_writes_nothing_in_home(tmp_path):
    """`walrus-mem demo` with no WALRUS_MEM_HOME at all: still nothing in HOME."""
    home = _read_only_home(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    try:
        out = _run(["demo"], _fresh_env(home, TMPDIR=str(scratch)), tmp_path).stdout
    finally:
        home.chmod(0o700)
    assert "claims held" in out
    assert list(home.iterdir()) == []
    assert list(scratch.iterdir()) == []  # its temp dir is removed too
