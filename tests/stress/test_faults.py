"""Faults: 1,000 facts through relayer_mock over loopback HTTP with every fault kind on.

Topology (two uvicorn servers on 127.0.0.1 sharing one relayer data dir):

* ``honest``: the publisher and the *second* aggregator, with the documented mix
  ``--fault-rate 0.3`` over all eleven kinds (5xx, 504, 429 with ``Retry-After: 1``,
  latency, dropped connections, truncated / corrupted / lying reads,
  200-with-error, marked-invalid), seeded;
* ``liar``: the *first* aggregator, which serves another blob's bytes on every read.

Half the facts go through ``remember`` (one blob each), half through
``remember_many`` (quilts); some are submitted twice. After ``sync()``: nothing
lost, no memory in two blobs, every memory recallable and verifiable, and the
client's counters show retries and failovers away from the liar. Finally the
namespace is restored from its manifest into an empty data dir through the same
faulty servers.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from relayer_mock.faults import ALL_KINDS, FaultConfig, FaultDecision, FaultKind
from relayer_mock.server import RelayerServer
from tests.stress.helpers import (
    Stopwatch,
    census,
    check_consistency,
    make_facts,
    open_memory,
    relayer_blobs,
    write_figures,
)

pytestmark = pytest.mark.slow

N_FACTS = 1000
SEED = 20260107
NS = "faults"


class CountingServer:
    """A RelayerServer whose injected faults are counted per kind, in this process."""

    def __init__(self, data_dir: Path, faults: FaultConfig) -> None:
        self.server = RelayerServer(data_dir, faults=faults)
        self.faults: Counter[str] = Counter()
        injector = self.server.relayer.injector
        decide = injector.decide

        def counting(route_class: Any, route: str) -> FaultDecision:
            decision = decide(route_class, route)
            if decision.kind is not None:
                self.faults[decision.kind.value] += 1
            return decision

        injector.decide = counting

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CountingServer, ...]]:
    relayer_dir = tmp_path_factory.mktemp("fault-relayer")
    honest = CountingServer(relayer_dir, FaultConfig.mix(
        0.3, seed=SEED, retry_after=1, fault_latency_ms=(1, 20)))
    liar = CountingServer(relayer_dir, FaultConfig.only("lie", 1.0, seed=SEED + 1))
    honest.server.start()
    liar.server.start()
    try:
        yield honest, liar
    finally:
        liar.server.stop()
        honest.server.stop()


def _settings(honest: CountingServer, liar: CountingServer) -> dict[str, Any]:
    return {
        "publisher_url": honest.url,
        "mock_admin_token": honest.server.admin_token,  # forget deletes, as before the token
        "aggregator_urls": [liar.url, honest.url],  # the liar is asked first
        "publish_deadline": 30.0,
        "read_deadline": 30.0,
        "request_timeout": 5.0,
    }


def test_thousand_facts_through_every_fault(
    servers: tuple[CountingServer, CountingServer], tmp_path: Path
) -> None:
    honest, liar = servers
    clock = Stopwatch()
    rng = random.Random(SEED)
    facts = make_facts(N_FACTS, seed=SEED)
    single, batched = facts[: N_FACTS // 2], facts[N_FACTS // 2 :]
    admin = honest.server.client(timeout=30)
    returned: dict[str, str] = {}  # memory id -> text, as remember/remember_many returned them
    resubmitted = 0

    mem = open_memory(tmp_path / "client", **_settings(honest, liar))
    try:
        for text in single:
            rec = mem.remember(text, namespace=NS, metadata={"via": "remember"})
            assert not rec.deduplicated
            returned[rec.id] = rec.text
        position = 0
        while position < len(batched):
            size = rng.randint(2, 120)
            chunk = batched[position : position + size]
            position += len(chunk)
            items: list[Any] = [
                {"text": t, "metadata": {"via": "remember_many"}} if rng.random() < 0.5 else t
                for t in chunk
            ]
            again = rng.sample(facts[: position + N_FACTS // 2], k=3)  # already stored
            resubmitted += len(again)
            result = mem.remember_many([*items, *again], namespace=NS)
            assert result.failed == []
            assert result.stored + result.deduplicated == len(items) + len(again)
            for rec in result.records:  # a re-stated fact moves to a new id (restate.py)
                returned = {m: t for m, t in returned.items() if t != rec.text}
                returned[rec.id] = rec.text
        for text in rng.sample(single, k=20):  # plain duplicates through remember
            resubmitted += 1
            rec = mem.remember(text, namespace=NS)
            assert rec.deduplicated
            returned = {m: t for m, t in returned.items() if t != text}
            returned[rec.id] = text
        ingest_seconds = clock.seconds
        queued_before_sync = mem.stats(NS).queued

        sync_rounds = 0
        while True:
            sync_rounds += 1
            report = mem.sync()
            if report.still_queued == 0 and not report.errors:
                break
            assert sync_rounds < 5, f"sync keeps failing: {report.errors}"
        sync_seconds = clock.seconds - ingest_seconds

        # 0 lost: every id that was returned is in the catalog, published, in the index.
        assert len(returned) == N_FACTS
        assert set(returned.values()) == set(facts)
        rows = {r.id: r for r in mem.list(NS, limit=10 * N_FACTS)}
        assert set(rows) == set(returned)
        assert all(r.status == "published" and r.blob_id for r in rows.values())
        consistency = check_consistency(mem, NS)
        assert consistency.ok, consistency.problems

        # 0 duplicates: each memory's envelope is in exactly one blob on the relayer.
        blobs = relayer_blobs(honest.server.data_dir)
        found = census(blobs, [mem.keys_for(NS)])
        duplicates = found.duplicates()
        assert duplicates == {}
        assert found.unreadable == 0
        # besides the live memories, only re-stated ones' old ids (their quilts still hold
        # live memories, or the relayer keeps them), each forgotten here
        retired = {mid for mid, _ in found.locations} - set(returned)
        assert set(returned) <= {mid for mid, _ in found.locations}
        assert all(mem._catalog.is_tombstoned(NS, mid) for mid in retired)
        for mid, rec in rows.items():
            assert found.locations[(mid, rec.version)] == {rec.blob_id}
        listing = admin.get("/_mock/blobs").json()["blobs"]
        restored_same_bytes = sum(b["storeCount"] - 1 for b in listing)  # same id: not a duplicate

        # Every memory recallable by its own text, and verifiable against Walrus.
        not_recalled = [mid for mid, text in returned.items()
                        if mid not in [h.id for h in mem.recall(text, namespace=NS, k=5)]]
        assert not_recalled == []
        verify_clock = Stopwatch()
        # 8 threads: a Memory is thread-safe, and the Retry-After sleeps overlap.
        with ThreadPoolExecutor(max_workers=8) as pool:
            verified = dict(pool.map(
                lambda mid: (mid, mem.get(mid, namespace=NS, verify=True).text), returned))
        assert verified == returned
        verify_seconds = verify_clock.seconds

        stats = mem.walrus.stats.snapshot()
        assert stats["retries"] > 0
        # The liar is caught and benched (asked after the honest aggregator for a while,
        # docs/walrus.md#roles-and-failover), so not every read has to leave it any more.
        assert stats["failovers"] > 0
        assert stats["verification_failures"] > 0
        manifest_id = mem.stats(NS).manifest_blob_id
        assert manifest_id is not None
    finally:
        mem.close()

    # Restore from Walrus alone, through the same faults.
    restore_clock = Stopwatch()
    fresh = open_memory(tmp_path / "restored", **_settings(honest, liar))
    try:
        restored = fresh.restore(NS, manifest_blob_id=manifest_id)
        assert restored.failed == []
        assert restored.restored == N_FACTS
        assert {r.id: r.text for r in fresh.list(NS, limit=10 * N_FACTS)} == returned
        assert check_consistency(fresh, NS).ok
        restore_stats = fresh.walrus.stats.snapshot()
    finally:
        fresh.close()

    server_stats = admin.get("/_mock/stats").json()
    admin.close()
    injected = honest.faults + liar.faults
    for kind in ALL_KINDS:  # every kind really happened
        assert honest.faults[kind.value] > 0, f"no {kind.value} fault was injected"
    applied = {k: v for k, v in server_stats["faults"].items() if v}
    # Every fault decided is applied, except markedInvalid for a blob the store already
    # holds (a certified blob id is never marked invalid on chain): decided >= applied there.
    skipped = injected[FaultKind.MARKED_INVALID.value] - applied[FaultKind.MARKED_INVALID.value]
    assert skipped >= 0
    assert {**dict(injected), FaultKind.MARKED_INVALID.value: applied[
        FaultKind.MARKED_INVALID.value]} == applied

    write_figures("faults", {
        "facts": N_FACTS,
        "via_remember": len(single),
        "via_remember_many": len(batched),
        "resubmitted_duplicates": resubmitted,
        "fault_rate": 0.3,
        "seed": SEED,
        "faults_injected_total": sum(injected.values()),
        "faults_by_kind_honest": dict(sorted(honest.faults.items())),
        "faults_by_kind_liar": dict(sorted(liar.faults.items())),
        "server_requests": server_stats["requests"],
        "queued_before_sync": queued_before_sync,
        "sync_rounds": sync_rounds,
        "client_requests": stats["requests"],
        "client_retries": stats["retries"],
        "client_retry_reasons": stats["retry_reasons"],
        "client_failovers": stats["failovers"],
        "client_verification_failures": stats["verification_failures"],
        "client_faults_seen": stats["faults"],
        "restore_requests": restore_stats["requests"],
        "restore_retries": restore_stats["retries"],
        "restore_failovers": restore_stats["failovers"],
        "restored": N_FACTS,
        "lost": N_FACTS - len(rows),
        "duplicate_blobs": len(duplicates),
        "blobs_on_relayer": found.blobs,
        "quilts_on_relayer": found.quilts,
        "manifest_blobs": found.manifests,
        "repeat_stores_same_blob": restored_same_bytes,
        "not_recalled": len(not_recalled),
        "verified": len(returned),
        "seconds_ingest": ingest_seconds,
        "seconds_sync": sync_seconds,
        "seconds_verify": verify_seconds,
        "seconds_restore": restore_clock.seconds,
        "seconds_total": clock.seconds,
    })
