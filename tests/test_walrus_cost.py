"""Issue 25 item 1: each store's cost in storage units, from the store answer, kept in the
catalog; ``Memory.stats()`` / ``walrus-mem stats`` show it per namespace, per 1,000 facts
and for renewals; batch writes pay at most 1.1x the minimum on the testnet profile
(relayer_mock ``--profile testnet`` over HTTP: real quilt sizes, 10 MiB cap).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_cli import TEST_MASTER_HEX, invoke
from tests.helpers_memory import MASTER_HEX, make_settings
from tests.helpers_walrus import NEWLY_CREATED
from walrus_mem._walrus.blobio import PART_OVERHEAD, cheapest_batches, store_batches
from walrus_mem._walrus.cost import cost_of, encoded_length, minimum_units, units_of
from walrus_mem._walrus.quilt_size import encoded_quilt_size
from walrus_mem._walrus.responses import store_outcome
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

MiB = 1024 * 1024


@pytest.fixture
def testnet(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus", fsync=False, profile="testnet",
                       time_scale=0.01) as server:
        yield server


@pytest.fixture(params=["testnet", "mainnet"])
def network(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RelayerServer]:
    """relayer_mock answering as each public network (its times at 1/100)."""
    with RelayerServer(tmp_path / "walrus", fsync=False, profile=request.param,
                       time_scale=0.01) as server:
        yield server


def _memory(data_dir: Path, server: RelayerServer, **values: object) -> Memory:
    settings = {"publisher_url": server.url, "aggregator_urls": [server.url],
                "publish_deadline": 60.0, "epochs": 5, **values}
    return Memory(make_settings(data_dir, **settings), embedder=HashEmbedder(),
                  master_key=MASTER_HEX)


def test_units_of_a_store_answer_follow_the_walrus_cost_model() -> None:
    # the docs' example: 17 bytes, 1 epoch ahead, encodedLength 66,034,000 = 63 units
    answer = store_outcome(200, {}, json.dumps(NEWLY_CREATED).encode())
    assert not hasattr(answer, "error")
    cost = cost_of(answer, kind="blob", files=1, sent_bytes=17)  # type: ignore[arg-type]
    assert cost.encoded_length == encoded_length(17) == 66_034_000
    assert (cost.units, cost.epochs) == (63, 1)
    assert units_of(encoded_length(445_556)) == 63 and units_of(encoded_length(445_557)) > 63


def test_a_full_quilt_of_small_facts_is_not_the_cheapest_split() -> None:
    sizes = [1150 + PART_OVERHEAD] * 1000
    greedy, cheap = store_batches(sizes, 10 * MiB), cheapest_batches(sizes, 10 * MiB)

    def units(spans: list[range]) -> int:
        return sum(units_of(encoded_length(encoded_quilt_size(
            [(f"{i:032x}", 1150) for i in span]))) for span in spans)

    assert [len(s) for s in greedy] == [666, 334] and [len(s) for s in cheap] == [500, 500]
    assert units(cheap) < units(greedy)
    assert units(cheap) <= 1.1 * minimum_units([1150] * 1000, 1)


def test_batch_writes_pay_at_most_1_1x_the_minimum_on_the_testnet_profile(
        tmp_path: Path, testnet: RelayerServer) -> None:
    facts = [f"fact {i}: the meeting room {i % 97} holds {i % 13} chairs" for i in range(800)]
    with _memory(tmp_path / "m", testnet, verify_publish="none") as memory:
        memory.remember_many(facts)
        stats = memory.stats()
        sealed = [len(bytes(r["sealed"])) for r in memory._parts.catalog.query(
            "SELECT sealed FROM memories")]
    assert stats.published == stats.facts_stored == 800
    floor = minimum_units(sealed, 5)
    assert stats.fact_units <= 1.1 * floor, (stats.fact_units, floor)
    assert stats.storage_units >= stats.fact_units > 0
    assert stats.units_per_1000_facts == pytest.approx(
        (stats.fact_units + stats.log_units) * 1000 / 800, abs=0.1)
    # renewing what the live memories are in: the recorded units of those blobs, per epoch
    assert stats.renewal_units_per_epoch * 5 == stats.renewal_estimate_units == stats.fact_units


def test_stats_split_units_by_purpose_and_the_cli_shows_them(
        tmp_path: Path, network: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end on each profile: store, manifest, recall, renewal, stats, CLI."""
    data = tmp_path / "m"
    with _memory(data, network) as memory:
        memory.remember("Ana lives in Lisbon")  # one blob: 63 units x 5 epochs
        memory.sync()  # the namespace's manifest: log units
        first = memory.stats()
        record = memory.list()[0]
        assert memory.recall("where does Ana live", min_score=0)[0].id == record.id
        memory.extend([record.id], epochs=7)  # a renewal: 63 x 7
        after = memory.stats()
    assert first.fact_units == 63 * 5 and first.facts_stored == 1
    assert first.log_units > 0 and first.renewal_units == 0
    assert after.renewal_units == 63 * 7
    assert after.storage_units == after.fact_units + after.log_units + after.renewal_units
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_DATA_DIR", str(data))
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    shown = json.loads(invoke(["--json", "stats"]).stdout)
    shown = shown.get("data", shown)
    assert shown["renewal_units"] == 63 * 7 and shown["fact_units"] == 63 * 5
    assert "units_per_1000_facts" in invoke(["stats"]).stdout


def test_single_writes_wait_for_sync_and_pay_a_pooled_quilt(
        tmp_path: Path, testnet: RelayerServer) -> None:
    """publish_writes = "sync": 120 single remember calls cost one quilt at sync, not
    120 blobs of 63 units each."""
    with _memory(tmp_path / "m", testnet, publish_writes="sync",
                 verify_publish="none") as memory:
        for i in range(120):
            memory.remember(f"note {i}: the parcel for flat {i} is at the front desk")
        assert memory.stats().queued == 120 and memory.stats().fact_units == 0
        memory.sync()
        stats = memory.stats()
        sealed = [len(bytes(r[0])) for r in memory._parts.catalog.query(
            "SELECT sealed FROM memories")]
    assert stats.published == 120 and stats.queued == 0
    assert stats.fact_units <= 1.1 * minimum_units(sealed, 5), stats.fact_units


def test_sync_pools_a_backlog_of_small_batches(tmp_path: Path, testnet: RelayerServer) -> None:
    """Several remember_many calls queued for sync (an import's chunks, say) are pooled
    by the next sync: one cheap split, not one quilt per call."""
    with _memory(tmp_path / "m", testnet, publish_writes="sync",
                 verify_publish="none") as memory:
        for call in range(6):
            memory.remember_many([f"call {call} fact {i}: shelf {i % 9} holds {call} boxes"
                                  for i in range(40)])
        assert len(memory._parts.catalog.outbox_batches("default")) == 6
        memory.sync()
        stats = memory.stats()
        stores = memory._parts.catalog.query(
            "SELECT files, units FROM store_costs WHERE purpose = 'facts'")
    assert stats.published == 240
    assert [(r[0], r[1]) for r in stores] == [(240, stats.fact_units)]  # one quilt
    assert stats.fact_units <= 65 * 5  # the floor (63) plus the quilt's index
