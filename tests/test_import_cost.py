"""Issue 25: ``walrus-mem import`` pools its writes and publishes them in the cheapest
quilts at the end (testnet profile of relayer_mock: real quilt sizes and costs), and an
interrupted import leaves its facts in the outbox for the next sync."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_cli import TEST_MASTER_HEX, invoke
from tests.helpers_memory import make_settings
from walrus_mem._walrus.cost import minimum_units
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder


@pytest.fixture
def testnet(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus", fsync=False, profile="testnet",
                       time_scale=0.01) as server:
        yield server


def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: RelayerServer) -> Path:
    data = tmp_path / "data"
    for name, value in {
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "WALRUS_MEM_MASTER_KEY": TEST_MASTER_HEX,
        "WALRUS_MEM_EMBEDDING_MODEL": "test-hash", "WALRUS_MEM_DATA_DIR": str(data),
        "WALRUS_MEM_USE_KEYRING": "false", "WALRUS_MEM_PUBLISHER_URL": server.url,
        "WALRUS_MEM_AGGREGATOR_URLS": server.url, "WALRUS_MEM_EPOCHS": "5",
        "WALRUS_MEM_VERIFY_PUBLISH": "none", "WALRUS_MEM_PUBLISH_DEADLINE": "60",
    }.items():
        monkeypatch.setenv(name, value)
    return data


def _chat(path: Path, n: int) -> Path:
    who = ["Caroline", "Melanie"]
    path.write_text("".join(
        f"{who[i % 2]}: turn {i}, about the pottery class and the hike we planned "
        f"for the weekend with the kids, number {i % 37}\n" for i in range(n)))
    return path


def _units(data: Path) -> tuple[int, int, list[int]]:
    with Memory(make_settings(data), embedder=HashEmbedder(),
                master_key=TEST_MASTER_HEX) as memory:
        stats = memory.stats()
        sealed = [len(bytes(r[0])) for r in memory._parts.catalog.query(
            "SELECT sealed FROM memories")]
    return stats.fact_units, stats.queued, sealed


def test_import_pays_at_most_1_1x_the_minimum_units(
        tmp_path: Path, testnet: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _env(monkeypatch, tmp_path, testnet)
    out = json.loads(invoke(["--json", "import", str(_chat(tmp_path / "chat.txt", 1400))]).stdout)
    out = out.get("data", out)
    assert out["stored"] == 1400 and out["queued"] == 0
    units, queued, sealed = _units(data)
    assert queued == 0 and len(sealed) == 1400
    floor = minimum_units(sealed, 5)
    assert units <= 1.1 * floor, (units, floor)
    with Memory(make_settings(data), embedder=HashEmbedder(),
                master_key=TEST_MASTER_HEX) as memory:  # its periodic manifest went out too
        assert memory.stats().log_units > 0


def test_an_interrupted_import_leaves_its_facts_queued_for_the_next_sync(
        tmp_path: Path, testnet: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks wait in the catalog outbox, not in memory: Ctrl-C after two of three
    chunks keeps those facts (queued, readable), and `walrus-mem sync` publishes them."""
    data = _env(monkeypatch, tmp_path, testnet)
    real = Memory.remember_many
    calls: list[int] = []

    def interrupted(self: Memory, items: list[str], **kwargs: object) -> object:
        calls.append(len(items))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, items, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Memory, "remember_many", interrupted)
    chat = _chat(tmp_path / "chat.txt", 300)
    invoke(["import", "--batch-size", "100", str(chat)], expect=130)
    monkeypatch.setattr(Memory, "remember_many", real)
    units, queued, sealed = _units(data)
    assert (units, queued, len(sealed)) == (0, 200, 200)  # nothing paid yet, all kept
    invoke(["sync"])
    units, queued, sealed = _units(data)
    assert queued == 0 and len(sealed) == 200 and units > 0
