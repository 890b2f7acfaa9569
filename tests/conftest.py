"""Shared fixtures. Autouse ones keep every test off the user's real state:
a temp data dir, a clean WALRUS_MEM_* environment, and an in-memory keyring."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend

from walrus_mem.testing import HashEmbedder


class MemoryKeyring(KeyringBackend):
    """In-memory keyring backend (the real one is unusable on headless CI)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.store.pop((service, username), None)


def pytest_configure(config: pytest.Config) -> None:
    """Keep session- and module-scoped fixtures off the real per-user state dir
    (walrus_mem.heads_mirror) too: each test then gets its own (clean_environ)."""
    state = Path(tempfile.mkdtemp(prefix="walrus-mem-test-state-"))
    config.add_cleanup(lambda: shutil.rmtree(state, ignore_errors=True))
    os.environ["WALRUS_MEM_STATE_DIR"] = str(state / "walrus-mem")
    os.environ["XDG_STATE_HOME"] = str(state)
    # Derived model files (ONNX graph, prototype vectors): one cache for the session,
    # never the user's (clean_environ puts it back after stripping WALRUS_MEM_*).
    os.environ["WALRUS_MEM_MODEL_CACHE"] = _MODEL_CACHE[0] = str(state / "model-cache")


_MODEL_CACHE = [""]


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Strip WALRUS_MEM_* and proxy vars; point the data dir and the per-user state dir
    (seen-heads mirror) at temp dirs of this test, so tests never see each other's."""
    for name in list(os.environ):
        if name.startswith("WALRUS_MEM_") or name.lower() in {
            "http_proxy", "https_proxy", "all_proxy", "no_proxy"
        }:
            monkeypatch.delenv(name, raising=False)
    data_dir = tmp_path / "walrus-data"
    monkeypatch.setenv("WALRUS_MEM_DATA_DIR", str(data_dir))
    monkeypatch.setenv("WALRUS_MEM_STATE_DIR", str(tmp_path / "walrus-state"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    if _MODEL_CACHE[0]:
        monkeypatch.setenv("WALRUS_MEM_MODEL_CACHE", _MODEL_CACHE[0])
    yield data_dir


@pytest.fixture(autouse=True)
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def fake_embedder() -> HashEmbedder:
    return HashEmbedder(dim=64)


@pytest.fixture
def master_hex() -> str:
    """A fixed, test-only master key (the keys/ test vector seed)."""
    return "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"


@pytest.fixture(scope="session")
def real_embedder():
    """The real all-MiniLM-L6-v2 embedder, loaded once per session (mark users `model`)."""
    from walrus_mem.embeddings import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up"])
    return embedder


# Memory-engine fixtures (mem_dir, mem_settings, mem): defined in tests/helpers_memory.py.
from tests.helpers_memory import mem, mem_dir, mem_settings  # noqa: E402, F401


@pytest.fixture(autouse=True)
def isolated_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings (so Memory()) and the CLI read <user config dir>/walrus-mem/config.toml
    when nothing names another file: keep the developer's out. XDG_CONFIG_HOME covers
    subprocesses (on Linux); patching default_config_path covers every platform
    in-process (platformdirs ignores XDG on macOS and Windows)."""
    config_home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))

    def temp_default_config_path() -> Path:
        return config_home / "walrus-mem" / "config.toml"

    # cli imports the name, so both bindings are patched.
    for target in ("walrus_mem.config.default_config_path", "walrus_mem.cli.default_config_path"):
        monkeypatch.setattr(target, temp_default_config_path)


# Hypothesis: the same examples on every run and no per-example deadline, so a
# property test cannot fail by chance on a slow shared machine (the default
# 200 ms deadline and fresh random examples each run could). This is what
# Hypothesis already does under CI=true (its "ci" profile); here it holds for
# local runs too. HYPOTHESIS_PROFILE=explore draws new random examples.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "deterministic", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
