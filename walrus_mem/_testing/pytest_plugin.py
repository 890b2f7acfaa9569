"""Fixtures for testing agents that use walrus_mem (docs/testing.md).

pytest loads this module in every project that installs walrus-mem (the
``pytest11`` entry point ``walrus_mem``). Loading it imports the ``walrus_mem``
package, whose ``__init__`` is lazy (the error classes only: about 20 ms, not the
engine's 1-2 s). The fixtures import the modules they use (the engine,
relayer_mock, the key helpers) when they run.

* ``walrus_home``: this test's ``WALRUS_MEM_HOME`` (a temp dir) with every other
  ``WALRUS_MEM_*`` variable removed: no config file, key, state or cache of the
  user's is read or written.
* ``walrus_embedder``: the fast deterministic :class:`~walrus_mem.testing.HashEmbedder`
  (override the fixture to use the real model).
* ``walrus_memory``: an open :class:`~walrus_mem.Memory` on a fresh master key,
  its data dir and embedded Walrus under ``tmp_path``.
* ``walrus_relayer``: relayer_mock served over HTTP on a free 127.0.0.1 port, with
  fault knobs (:meth:`WalrusRelayer.faults`) and the app's options through
  ``@pytest.mark.walrus_relayer(...)``; ``profile="testnet"`` (or ``"mainnet"``) answers
  as the public network does, its latencies scaled by ``time_scale`` (here 0.05 unless
  given, so a test stays fast).
* ``walrus_agents``: agents with their own Ed25519 keys, each with its own data
  dir, all on one Walrus; ``walrus_agents["alice"]`` and ``["bob"]`` exist,
  ``walrus_agents.add(name)`` makes more.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from relayer_mock.server import RelayerServer
    from walrus_mem import Memory
    from walrus_mem.config import Settings
    from walrus_mem.walrus import WalrusClient

__all__ = ["WalrusAgents", "WalrusRelayer"]

MARKER = "walrus_relayer"
#: A profile's store latency and 404-after-store window in a test: 1/20 of the network's
#: (a Testnet store's median 2.5 s becomes 125 ms). ``time_scale=1`` in the marker for real.
PROFILE_TIME_SCALE = 0.05


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(**options): options of the walrus_relayer fixture's relayer_mock "
        "app (epoch_duration, not_found_after_store, max_blob_size, ...; see "
        "relayer_mock.app.create_app), faults=FaultConfig(...), profile='testnet'")


def _isolated_settings(root: Path, **values: Any) -> Settings:
    """Settings that read no config file, keyring or user directory: all under ``root``."""
    from walrus_mem.config import Settings

    root.mkdir(parents=True, exist_ok=True)
    empty = root / "empty.toml"
    empty.touch()
    values.setdefault("data_dir", root / "data")
    return Settings.load(config_file=empty, state_dir=root / "state", use_keyring=False,
                         key_file=root / "keys" / "master.key", **values)


@pytest.fixture
def walrus_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's WALRUS_MEM_HOME; the user's own WALRUS_MEM_* settings are removed."""
    for name in list(os.environ):
        if name.startswith("WALRUS_MEM_"):
            monkeypatch.delenv(name)
    home = tmp_path / "walrus-mem-home"
    monkeypatch.setenv("WALRUS_MEM_HOME", str(home))
    return home


@pytest.fixture
def walrus_embedder() -> Any:
    """A fast, deterministic bag-of-words embedder (no model load, no semantic quality)."""
    from walrus_mem.testing import HashEmbedder

    return HashEmbedder(dim=64)


@pytest.fixture
def walrus_memory(walrus_home: Path, walrus_embedder: Any) -> Iterator[Memory]:
    """An open Memory on a fresh master key; data dir and embedded Walrus under tmp_path."""
    from walrus_mem import Memory
    from walrus_mem.keys import generate_master_seed

    settings = _isolated_settings(walrus_home / "memory")
    with Memory(settings, embedder=walrus_embedder, master_key=generate_master_seed()) as mem:
        yield mem


class WalrusRelayer:
    """relayer_mock over HTTP for one test: :attr:`url` is publisher and aggregator."""

    def __init__(self, server: RelayerServer, home: Path, embedder: Any,
                 profile: str | None = None) -> None:
        self.server = server
        self.url: str = server.url
        #: the public-network profile it answers as ("testnet", "mainnet"), or None
        self.profile = profile
        self._home = home
        self._embedder = embedder
        self._memories: list[Memory] = []

    def faults(self, rate: float = 0.0, **options: Any) -> None:
        """Set the fault mix from now on: ``faults(0.3, seed=1)`` draws a fault for 30 %
        of requests; ``faults(probabilities={"503": 1.0})`` fails every request with 503;
        ``faults(probabilities={"lie": 0.5}, scope="reads")`` makes a hostile aggregator
        (other options: relayer_mock.faults.FaultConfig). ``faults()`` turns them off."""
        from relayer_mock.faults import FaultConfig

        self.server.relayer.injector.configure(FaultConfig(rate=rate, **options))

    @property
    def fault_log(self) -> list[dict[str, Any]]:
        """The faults injected so far (kind, route), newest last."""
        return self.server.relayer.injector.log()  # type: ignore[no-any-return]

    def memory(self, name: str = "memory", *, master_key: Any = None,
               **settings: Any) -> Memory:
        """A Memory using this relayer, its data dir under tmp_path (closed after the test):
        ``name`` tells data dirs apart, ``master_key`` (default: a fresh one) lets two of
        them play two machines of one user, ``settings`` are Settings fields."""
        from walrus_mem import Memory
        from walrus_mem.keys import generate_master_seed

        values = {"publisher_url": self.url, "aggregator_urls": [self.url], **settings}
        mem = Memory(_isolated_settings(self._home / name, **values), embedder=self._embedder,
                     master_key=master_key if master_key is not None
                     else generate_master_seed())
        self._memories.append(mem)
        return mem

    def close(self) -> None:
        for mem in reversed(self._memories):
            mem.close()


@pytest.fixture
def walrus_relayer(request: pytest.FixtureRequest, walrus_home: Path,
                   walrus_embedder: Any) -> Iterator[WalrusRelayer]:
    """relayer_mock on a free 127.0.0.1 port; ``@pytest.mark.walrus_relayer(...)`` passes
    options to its app (``faults=FaultConfig(...)``, ``epoch_duration=...``)."""
    from relayer_mock.server import RelayerServer

    marker = request.node.get_closest_marker(MARKER)
    options = dict(marker.kwargs) if marker is not None else {}
    options.setdefault("fsync", False)
    if options.get("profile") is not None:
        options.setdefault("time_scale", PROFILE_TIME_SCALE)
    with RelayerServer(walrus_home / "relayer", port=0, **options) as server:
        handle = WalrusRelayer(server, walrus_home, walrus_embedder, options.get("profile"))
        try:
            yield handle
        finally:
            handle.close()


class WalrusAgents:
    """Agents by name, each a Memory with its own independent key and data dir, all on
    one Walrus: what one agent stores, another's key cannot open."""

    def __init__(self, home: Path, embedder: Any, walrus: WalrusClient) -> None:
        self._home = home
        self._embedder = embedder
        self.walrus = walrus
        self._agents: dict[str, Memory] = {}

    def add(self, name: str) -> Memory:
        """A new agent ``name`` working in namespace ``name`` with its own Ed25519 key."""
        import nacl.signing
        from pydantic import SecretStr

        from walrus_mem import Memory
        from walrus_mem.config import AgentConfig
        from walrus_mem.keys import generate_master_seed

        if name in self._agents:
            raise ValueError(f"agent {name!r} exists already")
        key = bytes(nacl.signing.SigningKey.generate()).hex()
        agents = {name: AgentConfig.model_validate({"key": SecretStr(key)})}
        settings = _isolated_settings(self._home / name, default_namespace=name, agents=agents)
        mem = Memory(settings, embedder=self._embedder, master_key=generate_master_seed(),
                     walrus=self.walrus)
        self._agents[name] = mem
        return mem

    def __getitem__(self, name: str) -> Memory:
        return self._agents[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._agents)

    def __len__(self) -> int:
        return len(self._agents)

    def close(self) -> None:
        for mem in reversed(self._agents.values()):
            mem.close()


@pytest.fixture
def walrus_agents(walrus_home: Path, walrus_embedder: Any) -> Iterator[WalrusAgents]:
    """Agents ``alice`` and ``bob`` (``.add(name)`` for more) on one embedded Walrus."""
    from relayer_mock.embedded import EmbeddedRelayer
    from walrus_mem.walrus import WalrusClient

    relayer = EmbeddedRelayer(walrus_home / "walrus", fsync=False)
    base = str(relayer.base_url)
    client = WalrusClient(base, [base], transport=relayer.transport, epochs=5)
    agents = WalrusAgents(walrus_home / "agents", walrus_embedder, client)
    try:
        agents.add("alice")
        agents.add("bob")
        yield agents
    finally:
        agents.close()
        client.close()
        relayer.close()
