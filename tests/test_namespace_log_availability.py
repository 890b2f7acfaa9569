"""One bad server answer or one bad entry never blocks a namespace for good, nor makes a
manifest drop memories (issue 10 red team, availability findings; docs/sync.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import MOCK_ADMIN_TOKEN, live, machine
from tests.helpers_proxy import HookProxy
from walrus_mem._walrus.expiry import record_seen


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


# -- heads file ------------------------------------------------------------------------


def test_a_transient_aggregator_error_does_not_blacklist_a_head(tmp_path: Path,
                                                                server) -> None:
    """A long-running process synced once during a 503: the head was cached as unusable
    for the process lifetime, and every later sync skipped A's writes."""
    heads = tmp_path / "shared" / "heads.txt"
    down = {"on": False}
    with HookProxy(server.url, lambda m, p, b: (503, b"busy")
                   if down["on"] and m == "GET" else None) as agg, \
            machine(tmp_path / "a", server.url, heads_file=heads) as a, \
            machine(tmp_path / "b", server.url, aggregator=agg.url, heads_file=heads,
                    read_deadline=1.0) as b:
        a.remember("first fact", namespace="tr")
        a.sync()
        b.sync("tr")
        new = a.remember("A's new fact", namespace="tr")
        a.sync()
        down["on"] = True
        during = b.sync("tr")
        assert any("AggregatorUnavailable" in s for s in during.skipped_heads)
        down["on"] = False
        after = b.sync("tr")
        assert after.skipped_heads == [] and "tr" in after.pulled
        assert new.id in live(b, "tr")


def test_a_damaged_heads_file_is_reported_never_raised(tmp_path: Path, server) -> None:
    """Non-UTF-8 bytes made every sync raise UnicodeDecodeError; a BOM or a truncated
    head made the line vanish without a word."""
    heads = tmp_path / "shared" / "heads.txt"
    with machine(tmp_path / "a", server.url, heads_file=heads) as a:
        a.remember("alpha", namespace="hg")
        head = a.sync().manifests["hg"]
    heads.write_bytes(bytes(range(256)) * 4 + f"\nhg {head[:-10]}\n".encode())
    with machine(tmp_path / "b", server.url, heads_file=heads) as b:
        report = b.sync("hg")
        assert report.errors == [] and "hg" not in report.pulled
        assert any("not valid UTF-8" in s for s in report.skipped_heads)
        assert any("digest" in s for s in report.skipped_heads)
        assert len(report.skipped_heads) <= 11  # a flood of bad lines is summed up
    heads.write_text(f"\ufeffhg {head}\r\n", encoding="utf-8")
    with machine(tmp_path / "c", server.url, heads_file=heads) as c:
        report = c.sync("hg")
        assert "hg" in report.pulled and report.skipped_heads == []
        assert sorted(live(c, "hg").values()) == ["alpha"]


# -- the epoch clock -------------------------------------------------------------------


def test_a_sighting_beyond_what_time_allows_is_implausible(tmp_path: Path) -> None:
    from walrus_mem._catalog.catalog import Catalog
    from walrus_mem._walrus.expiry import EpochClock

    catalog = Catalog(tmp_path / "c.sqlite3")
    try:
        unknown = EpochClock(catalog)
        assert unknown.implausible(10**6, at=0.0) is None  # nothing to compare with
        unknown.observe(5, at=0.0)
        assert unknown.implausible(9, at=1.0) is None  # skew tolerated
        assert unknown.implausible(18, at=10.0) is None  # 1 s epochs at the shortest
        assert "at most 18" in str(unknown.implausible(19, at=10.0))
        testnet = EpochClock(catalog, network_seconds=86_400.0)
        assert testnet.implausible(11, at=3 * 86_400.0) is None
        assert testnet.implausible(100_005, at=3 * 86_400.0) is not None
        testnet.seed({"epoch": 100_005, "seen_at": 3 * 86_400.0})  # another writer's claim
        assert testnet.reading().newest_seen == 5
    finally:
        catalog.close()


def test_another_writers_far_future_sighting_gives_way_to_the_first_own_one(
        tmp_path: Path) -> None:
    """A fresh machine has nothing to check a manifest's clock against: it may read from
    it, but a far-future claim must not outlive its own first store answer."""
    from walrus_mem._catalog.catalog import Catalog
    from walrus_mem._walrus.expiry import EpochClock

    catalog = Catalog(tmp_path / "c.sqlite3")
    try:
        clock = EpochClock(catalog, network_seconds=86_400.0)
        now = time.time()
        clock.seed({"epoch": 100_007, "seen_at": now - 10})
        assert clock.current() == 100_007  # all it knows, for now
        clock.observe(7, at=now)  # its own first store answer
        assert clock.current() == 7 and clock.reading().newest_seen == 7
        clock.seed({"epoch": 100_007, "seen_at": now})  # told again: now implausible
        assert clock.current() == 7
    finally:
        catalog.close()


def _poisoning_publisher(upstream: str, armed: dict[str, bool]) -> HookProxy:
    """A publisher that answers one store with a far-future registeredEpoch (start and
    end shifted to match, so the blob itself looks fine)."""
    import json

    def hook(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if not (armed["on"] and method == "PUT" and path.startswith("/v1/blobs")):
            return None
        armed["on"] = False
        answer = proxy.forward(method, path, body).json()
        blob = answer["newlyCreated"]["blobObject"]
        blob["registeredEpoch"] += 100_000
        blob["storage"]["startEpoch"] += 100_000
        blob["storage"]["endEpoch"] += 100_000
        return 200, json.dumps(answer).encode()

    proxy = HookProxy(upstream, hook)
    return proxy


def _listed(mem, ns: str, head: str) -> int:
    return len([e for e in mem._log.read(ns, head)[1] if not e.deleted])


def test_one_far_future_store_answer_does_not_expire_every_memory(tmp_path: Path,
                                                                  server) -> None:
    """The red team's f6: A's next manifest listed 1 of 21 memories, and an honest machine
    pulling it took the poisoned clock and listed 0 of its own."""
    armed = {"on": False}
    with _poisoning_publisher(server.url, armed) as publisher:
        with machine(tmp_path / "a", server.url) as a:
            a.remember_many([f"durable fact {i}" for i in range(20)], namespace="ep")
            first = a.sync().manifests["ep"]
        with machine(tmp_path / "b", server.url) as b:
            b.restore("ep", first)
        with machine(tmp_path / "a", publisher.url, aggregator=server.url) as a:
            armed["on"] = True
            lied_to = a.remember("one more fact", namespace="ep")
            head = a.sync("ep").manifests["ep"]
            assert not armed["on"]  # the lie was told
            assert _listed(a, "ep", head) == 21
            # its storage epochs count from the clock, so it is renewed in time
            now_epoch = a.current_epoch()
            assert now_epoch is not None
            assert int(a.get(lied_to.id, namespace="ep").end_epoch or 0) < now_epoch + 100
        with machine(tmp_path / "c", server.url) as c:
            assert c.restore("ep", head).restored == 21
        with machine(tmp_path / "b", server.url) as b:
            b.pull(head, namespace="ep")
            b.remember("B writes something", namespace="ep")
            assert _listed(b, "ep", b.sync("ep").manifests["ep"]) == 22


def test_a_wrong_clock_alone_never_drops_a_memory_from_a_manifest(tmp_path: Path,
                                                                  server) -> None:
    """Whatever moved the clock (a machine poisoned before the plausibility check, a lie
    told on its very first store): a manifest drops a memory only once a read 404s, and a
    fresh machine seeded with that clock still reads what is served."""
    with machine(tmp_path / "a", server.url) as a:
        a.remember_many([f"fact {i}" for i in range(5)], namespace="wc")
        a.sync()
        current = a.current_epoch()
        assert current is not None
        with a._catalog.write() as conn:  # the clock is wrong (written past any check)
            record_seen(conn, current + 100_000, time.time())
            conn.execute("UPDATE meta SET value = ? WHERE key = 'current_epoch'",
                         (str(current + 100_000),))
        assert a.current_epoch() == current + 100_000
        a.remember("fact 5", namespace="wc")
        head = a.sync("wc").manifests["wc"]
        assert _listed(a, "wc", head) == 6
    with machine(tmp_path / "fresh", server.url) as fresh:
        report = fresh.restore("wc", head)  # seeds the far-future clock from the root
        assert report.restored == 6 and report.expired == []
        assert len(live(fresh, "wc")) == 6


# -- another writer's bad entry --------------------------------------------------------


@pytest.mark.parametrize("fault", ["deny-listed", "wrong-bytes"])
def test_another_writers_unreadable_entry_never_stops_this_machine_publishing(
        tmp_path: Path, server, fault: str) -> None:
    """One entry of A's manifest whose blob is deny-listed (451) or serves other bytes
    (a publisher swapped patch ids): every puller was marked 'restore incomplete' and
    published no manifest again. Now the entry is reported and the merge completes."""
    heads = tmp_path / "shared" / "heads.txt"
    with machine(tmp_path / "a", server.url, heads_file=heads) as a:
        recs = [a.remember(f"fact {i} of A", namespace="ub") for i in range(4)]
        a.sync()
        victim = recs[1]
        blob = a.get(victim.id, namespace="ub").blob_id
        other = a.get(recs[2].id, namespace="ub").blob_id
    assert blob != other  # one blob per fact

    blocked = {"on": True}

    def hook(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if not blocked["on"] or method != "GET" or f"/v1/blobs/{blob}" not in path:
            return None
        if fault == "deny-listed":
            return 451, b'{"error": {"code": 451, "status": "UNAVAILABLE_FOR_LEGAL_REASONS"}}'
        return 200, proxy.forward("GET", path.replace(blob, other)).content

    with HookProxy(server.url, hook) as proxy, \
            machine(tmp_path / "b", server.url, aggregator=proxy.url, heads_file=heads) as b:
        b.remember("B's own fact", namespace="ub")
        first = b.sync("ub")
        assert first.errors == [] and "ub" in first.manifests
        report = first.pulled["ub"]
        assert report.complete and [m for m, _ in report.unreadable] == [victim.id]
        assert b._log.tables.restoring("ub") is None
        b.remember("B's second fact", namespace="ub")
        second = b.sync("ub")
        assert second.errors == [] and "ub" in second.manifests
        assert len(live(b, "ub")) == 5
        # carried forward meanwhile: a restore of B's head still names A's entry
        _, entries = b._log.read("ub", second.manifests["ub"])
        assert victim.id in {e.memory_id for e in entries if not e.deleted}
        blocked["on"] = False  # the location serves good bytes again: the next sync reads it
        b.sync("ub")
        assert len(live(b, "ub")) == 6 and victim.id in live(b, "ub")


# -- a batch the publisher refuses for good --------------------------------------------


def test_a_batch_refused_for_good_is_split_then_poisoned_and_manifests_go_on(
        tmp_path: Path, server) -> None:
    """One fact over the publisher's size cap (413) stayed in the outbox forever, and sync
    published no manifest while the outbox was non-empty: every later fact of the
    namespace was published as a blob but never listed."""
    from walrus_mem._cli.doctor import _namespace_integrity

    heads = tmp_path / "shared" / "heads.txt"
    capped = HookProxy(server.url, lambda m, p, b: (413, b"payload too large")
                       if m == "PUT" and len(b) > 40_000 else None)
    big = "a long pasted document " + "lorem ipsum " * 4000
    with capped, machine(tmp_path / "a", capped.url, aggregator=server.url,
                         heads_file=heads) as a:
        a.remember("small fact 1", namespace="po")
        a.sync()
        mixed = a.remember_many(["small fact 2", big, "small fact 3"], namespace="po")
        # the 413 halved the quilt (issue 25): the small members went at once, the fact
        # over the cap alone stays queued
        assert mixed.queued == 1 and mixed.records[1].status == "queued"
        later = [a.remember(f"later fact {i}", namespace="po") for i in range(3)]
        first = a.sync("po")
        assert first.published == 0
        assert any("refused for good" in e for e in first.errors)
        reports = [a.sync("po") for _ in range(2)]
        assert any("poisoned after" in e for r in reports for e in r.errors)
        assert any("po" in r.manifests for r in [first, *reports])
        checks = _namespace_integrity(a, "po")
        assert any(c.status == "fail" and "poisoned" in c.detail for c in checks)
        big_id = mixed.records[1].id
        assert a.get(big_id, namespace="po").status == "queued"
    with machine(tmp_path / "b", server.url, heads_file=heads) as b:
        b.restore("po")
        held = live(b, "po")
        assert {r.id for r in later} <= set(held) and big_id not in held
        assert sorted(held.values())[:3] == ["later fact 0", "later fact 1", "later fact 2"]
        assert {"small fact 2", "small fact 3"} <= set(held.values())


# -- a machine back after a long history -----------------------------------------------


def test_a_machine_away_for_longer_than_the_ancestry_window_merges(
        tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch) -> None:
    """descends() raised LogError past MAX_WALK manifests: a laptop away while a busy
    namespace published 10,000 manifests could never sync again (scaled down to 5)."""
    import walrus_mem._log.namespace_log as nslog

    monkeypatch.setattr(nslog, "MAX_WALK", 5)
    monkeypatch.setattr(nslog, "MAX_FETCH", 5, raising=False)
    heads = tmp_path / "shared" / "heads.txt"
    with machine(tmp_path / "a", server.url, heads_file=heads) as a:
        a.remember("fact 0", namespace="lh")
        a.sync()
        with machine(tmp_path / "laptop", server.url, heads_file=heads) as laptop:
            laptop.sync("lh")
        for i in range(12):
            a.remember(f"busy fact {i}", namespace="lh")
            a.sync("lh")
        with machine(tmp_path / "laptop", server.url, heads_file=heads) as laptop:
            away = laptop.remember("written while away", namespace="lh")
            back = laptop.sync("lh")
            assert back.errors == [] and "lh" in back.manifests
            merged = a.sync("lh")
            assert merged.errors == [] and away.id in live(a, "lh")
            a.remember("A keeps working", namespace="lh")
            assert "lh" in a.sync("lh").manifests
            again = laptop.sync("lh")
            assert again.errors == []
            assert live(laptop, "lh") == live(a, "lh") and len(live(a, "lh")) == 15
            assert laptop.sync("lh").pulled == {} and a.sync("lh").pulled == {}
