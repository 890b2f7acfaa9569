"""Issue 25 item 4: a *different* network (another deployment, another system object)
behind the configured endpoints, whose epochs did not go backwards. Nothing in the
daemon's HTTP answers names the network (docs/walrus.md#network-resets-and-network-changes),
so the evidence is what the network no longer serves: blobs this data dir stored,
certified and still inside their end epoch, answering 404 on every aggregator. Each test
runs against relayer_mock over loopback HTTP with its admin routes off (the client sees
only what real Walrus shows)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from relayer_mock._metrics import metrics_text
from relayer_mock._responses import MSG_BLOB_NOT_FOUND, dumps, error_envelope
from relayer_mock.server import RelayerServer
from tests.helpers_cli import invoke, invoke_json
from tests.helpers_log import LyingAggregator, live, machine
from tests.helpers_memory import MASTER_HEX, MOCK_ADMIN_TOKEN, make_settings
from tests.helpers_proxy import HookProxy
from walrus_mem import Memory
from walrus_mem._catalog.catalog import Catalog
from walrus_mem._cli.doctor_network import check_network
from walrus_mem._log.heads import HeadRef, SeenHead, SeenHeads
from walrus_mem._memory import network_reset
from walrus_mem._memory.network_reset import RESET_KEY
from walrus_mem._memory.repair_run import repair_data_dir
from walrus_mem._walrus.network_identity import IDENTITY_KEY, parse_contract_info
from walrus_mem.models import SyncReport
from walrus_mem.testing import HashEmbedder


@pytest.fixture(autouse=True)
def _quick_confirmation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loss seen only as 404s is confirmed over three rounds of reads 2 s and 3 s apart
    (network_reset.LOST_CONFIRM_PAUSES); here the rounds count, not the seconds (the
    cold aggregator below answers by read count): 5 s a test otherwise."""
    monkeypatch.setattr(network_reset, "LOST_CONFIRM_PAUSES", (0.05, 0.05))


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Moves every clock of this process on (the machines', and relayer_mock's in its
    thread) by the seconds given."""
    real, offset = time.time, [0.0]
    monkeypatch.setattr(time, "time", lambda: real() + offset[0])

    def move(seconds: float) -> None:
        offset[0] += seconds
    return move


def _seen_again_later(a: Memory, later: Callable[[float], None]) -> SyncReport:
    """A loss seen only as 404s (N16): the first sync records it, stores nothing again
    and publishes no manifest, and says so; a sync ``network_loss_confirm_after`` later
    sees it again and follows it. The second sync's report."""
    report = a.sync()
    assert report.renewed == 0 and not report.manifests, report
    assert any("NetworkResetPending" in e and "answered 404" in e for e in report.errors), \
        report.errors
    assert a.sync().renewed == 0  # not yet: ten minutes have not passed
    later(a.parts.settings.network_loss_confirm_after + 1)
    return a.sync()


def _locations(mem: Memory) -> dict[str, tuple[str | None, str | None, int | None]]:
    return {r.id: (r.blob_id, r.quilt_patch_id, r.end_epoch)
            for r in mem.list(limit=1000, include_expired=True)}


def _other_network(tmp_path: Path, port: int, epoch: int, **kw: Any) -> RelayerServer:
    """Another network at the same address: nothing of the old one, its epochs ahead."""
    return RelayerServer(tmp_path / "walrus-other", admin=False, fsync=False, port=port,
                         initial_epoch=epoch, **kw)


def _profile(name: str | None) -> dict[str, Any]:
    """relayer_mock's public-network profile (store latency, a cached-404 window, real
    quilt sizes, a null certifiedEpoch) at 1/100 of its times; None: the fast default."""
    return {} if name is None else {"profile": name, "time_scale": 0.01}


def _stored_on_a_first_network(tmp_path: Path, count: int, **kw: Any) -> tuple[int, str]:
    """A machine (data dir ``a``, HOME ``sa``) stores ``count`` facts on a network at epoch
    40 and syncs; that network then stops. Its port and URL, for the next one."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        with machine(tmp_path / "a", srv.url, state_dir=tmp_path / "sa", **kw) as a:
            a.remember_many([f"fact {i}" for i in range(count)])
            a.sync()
        return srv.port, srv.url


def _fresh_count(tmp_path: Path, url: str, head: str) -> int:
    with machine(tmp_path / "fresh" / "data", url, state_dir=tmp_path / "fresh" / "home") as f:
        report = f.restore("default", head)
        assert report.complete and not report.missing, report
        return len(live(f))


@pytest.mark.parametrize("profile", [None, "testnet", "mainnet"])
def test_a_different_network_ahead_is_healed_by_one_sync(tmp_path: Path,
                                                         profile: str | None) -> None:
    """The endpoints now lead to another network whose epochs are ahead (90, the old one
    was at 40): no epoch went backwards, so the reset check took the head's 404 for a
    lagging aggregator ("not yet") for good, the clock refused the new network's epochs
    as implausible and no memory was stored again. Now the network is asked for the
    blobs that must still be live: all answer 404 on every aggregator, the network lost
    them; the clock follows the new network, one sync stores each lost memory once, the
    catalog records the change and a fresh restore of the new head gets everything.
    Once on the default mock and once on each public-network profile."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40, **_profile(profile)) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact on the first network {i}" for i in range(6)])
            a.remember("a single fact on the first network")
            a.sync()
    with _other_network(tmp_path, port, 90, **_profile(profile)) as srv:
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember("fact on the second network")
            report = a.sync()
            assert report.errors == [] and report.renewed == 7, report
            head = report.manifests["default"]
            network = srv.relayer.store.current_epoch()
            assert a.epoch_clock.current() == network
            assert all(r.end_epoch is not None and network < r.end_epoch <= network + 5
                       for r in a.list(limit=100))
            record = json.loads(a._catalog.get_meta(RESET_KEY) or "{}")
            assert record.get("kind") == "lost" and record.get("to") == network
            again = a.sync()  # once
            assert again.errors == [] and again.renewed == 0 and not again.manifests
        assert _fresh_count(tmp_path, url, head) == 8


def test_an_idle_machine_on_a_different_network_at_the_same_epochs(
        tmp_path: Path, later: Callable[[float], None]) -> None:
    """Another network whose epochs are where the old one's were (41 after 40): the
    machine stores nothing; its sync sees its head answer 404, the network's epoch is
    not below, and the memories' blobs answer 404 too: the network lost them, or one
    aggregator lies (N16). A sync ten minutes later that sees it again stores them
    again, once."""
    port, url = _stored_on_a_first_network(tmp_path, 4)
    with _other_network(tmp_path, port, 41):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            report = _seen_again_later(a, later)
            assert report.errors == [] and report.renewed == 4, report
            head = report.manifests["default"]
            assert a.sync().renewed == 0
        assert _fresh_count(tmp_path, url, head) == 4


def test_extend_on_a_different_network_replaces_the_lost_locations(tmp_path: Path) -> None:
    """`extend` after the switch: every location answers 404, so each memory is stored
    again and its location replaced, whatever its recorded end; the next sync stores
    nothing again, and its clock follows the new network (it stayed at 40 before: the
    new network's answers, 50 epochs ahead, were refused as implausible for good)."""
    port, url = _stored_on_a_first_network(tmp_path, 4, manifest_every=10_000)
    with _other_network(tmp_path, port, 90):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa",
                     manifest_every=10_000) as a:
            report = a.extend()
            assert not report.failed and len(report.extended) == 4
            new = _locations(a)
            assert all(httpx.get(f"{url}/v1/blobs/{loc[0]}").status_code == 200
                       for loc in new.values())
            report = a.sync()
            assert report.errors == [] and report.renewed == 0, report
            assert a.epoch_clock.current() == 90  # the clock follows the new network
            head = report.manifests.get("default") or a.stats().manifest_blob_id
        assert head is not None and _fresh_count(tmp_path, url, head) == 4


def test_one_lagging_blob_is_not_a_different_network(tmp_path: Path) -> None:
    """Only the head answers 404 (a lagging aggregator); the memories' blobs are served:
    nothing is stored again and no change is recorded."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv, LyingAggregator(srv.url) as agg:
        with machine(tmp_path / "a", srv.url, aggregator=agg.url, state_dir=tmp_path / "sa",
                     read_deadline=1.0) as a:  # the head's 404 is waited out (just stored)
            a.remember_many([f"a fact {i}" for i in range(3)])
            head = a.sync().manifests["default"]
            agg.hide[head.split(".")[0]] = 0
            report = a.sync()
            assert report.errors == [] and report.renewed == 0 and not report.manifests
            assert a._catalog.get_meta(RESET_KEY) is None


def test_a_cold_aggregator_is_not_a_different_network(tmp_path: Path) -> None:
    """An aggregator answering 404 to the first two reads of every blob it has not served
    yet (a cold cache; the stateful test's "lag" found this): the head's 404 and one
    round of 404s for the memories' blobs are not a lost network. The loss is confirmed
    over three rounds of reads, the third is served: nothing is stored again."""
    reads: Counter[str] = Counter()

    def cold(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if method == "GET" and path.startswith("/v1/blobs/"):
            key = path.split("?")[0]
            reads[key] += 1
            if reads[key] <= 2:
                return 404, dumps(error_envelope("NOT_FOUND", "BLOB_NOT_FOUND",
                                                 MSG_BLOB_NOT_FOUND))
        return None

    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        with machine(tmp_path / "a", srv.url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"a fact {i}" for i in range(4)])
            a.sync()
        with HookProxy(srv.url, hook=cold) as proxy, \
                machine(tmp_path / "a", srv.url, aggregator=proxy.url,
                        state_dir=tmp_path / "sa", read_deadline=1.0) as a:
            report = a.sync()
            assert report.errors == [] and report.renewed == 0, report
            assert a._catalog.get_meta(RESET_KEY) is None


# -- the system object: configured, or named by the publisher's metrics -----------------


def _doctor_network(tmp_path: Path, url: str, metrics: str) -> dict[str, dict[str, str]]:
    """`walrus-mem --json doctor` on machine a's data dir: its checks by name."""
    env = {"WALRUS_MEM_PUBLISHER_URL": url, "WALRUS_MEM_AGGREGATOR_URLS": url,
           "WALRUS_MEM_MASTER_KEY": MASTER_HEX, "WALRUS_MEM_USE_KEYRING": "false",
           "WALRUS_MEM_STATE_DIR": str(tmp_path / "sa"),
           "WALRUS_MEM_EMBEDDING_MODEL": "test-hash",
           "WALRUS_MEM_NETWORK_METRICS_URL": metrics}
    data = invoke_json(["--data-dir", str(tmp_path / "a"), "doctor", "--no-model"],
                       env=env, expect=None)
    return {c["name"]: c for c in data["checks"]}


def test_a_changed_system_object_is_followed_and_named_by_doctor(tmp_path: Path) -> None:
    """The publisher's metrics endpoint (walrus_contract_info, the one place a daemon names
    its system object) names another system object than the one recorded: another
    network. Sync follows it (the clock, the lost memories stored again once), and
    `walrus-mem doctor` (text and --json) names the change and both system objects;
    before, doctor said nothing of any reset or change of network."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False, initial_epoch=40,
                       metrics_port=0) as srv:
        port, url, metrics_port, metrics = srv.port, srv.url, srv.metrics.port, srv.metrics_url
        first = srv.metrics.ids["system_object"]
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa",
                     network_metrics_url=metrics) as a:
            a.remember_many([f"fact {i}" for i in range(4)])
            a.sync()
            assert first in a._catalog.get_meta(IDENTITY_KEY)
    with RelayerServer(tmp_path / "walrus-other", admin=False, fsync=False, port=port,
                       initial_epoch=41, metrics_port=metrics_port) as srv:
        second = srv.metrics.ids["system_object"]
        assert second != first
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa",
                     network_metrics_url=metrics) as a:
            report = a.sync()
            assert report.errors == [] and report.renewed == 4, report
            record = json.loads(a._catalog.get_meta(RESET_KEY) or "{}")
            assert record["kind"] == "lost" and record["system_object"] == [first, second]
            assert a.sync().renewed == 0
        checks = _doctor_network(tmp_path, url, metrics)
        network = checks["network"]
        assert network["status"] == "ok", network
        assert "another network" in network["detail"] and second in network["detail"]
        assert first in network["detail"]
        text = invoke(["--data-dir", str(tmp_path / "a"), "doctor", "--no-model"],
                      env={"WALRUS_MEM_PUBLISHER_URL": url, "WALRUS_MEM_AGGREGATOR_URLS": url,
                           "WALRUS_MEM_MASTER_KEY": MASTER_HEX,
                           "WALRUS_MEM_USE_KEYRING": "false",
                           "WALRUS_MEM_STATE_DIR": str(tmp_path / "sa"),
                           "WALRUS_MEM_EMBEDDING_MODEL": "test-hash",
                           "WALRUS_MEM_NETWORK_METRICS_URL": metrics}, expect=None)
        assert "another network" in text.stdout and second in text.stdout


def test_metrics_naming_another_system_object_than_configured_fail_doctor(
        tmp_path: Path) -> None:
    """walrus_system_object says which network the endpoints must lead to; the publisher's
    metrics naming another one is a mismatch doctor fails on, and nothing is followed."""
    expected = "0x" + "ab" * 32
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False, initial_epoch=40,
                       metrics_port=0) as srv:
        with machine(tmp_path / "a", srv.url, state_dir=tmp_path / "sa",
                     network_metrics_url=srv.metrics_url, walrus_system_object=expected) as a:
            a.remember("a fact")
            a.sync()
            checks = {c.name: c for c in check_network(a)}
            bad = checks["network identity"]
            assert bad.status == "fail" and expected in bad.detail
            assert srv.metrics.ids["system_object"] in bad.detail
            assert a._catalog.get_meta(RESET_KEY) is None


def test_walrus_contract_info_is_parsed_as_the_daemon_prints_it() -> None:
    """The gauge as the daemon's registry prints it (labels sorted by name), with other
    metrics around it; a malformed object id is no identity."""
    system, staking = "0x" + "6c" * 32, "0x" + "be" * 32
    text = ("# TYPE walrus_other counter\nwalrus_other 3\n" + metrics_text(
        {"system_object": system, "staking_object": staking}, "0x" + "01" * 32))
    assert parse_contract_info(text) == {"system_object": system, "staking_object": staking}
    assert parse_contract_info('walrus_contract_info{system_object="0x12"} 1\n') is None


def test_doctor_names_a_suspected_reset_and_epochs_ahead(tmp_path: Path) -> None:
    """Store answers whose epoch went back, or ran ahead of what the clock allows, are held
    apart until a sync checks them: doctor says so (before, it said nothing)."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False) as srv, \
            machine(tmp_path / "a", srv.url, state_dir=tmp_path / "sa",
                    epoch_seconds=3600.0) as a:
        a._catalog.note_epoch(40)
        assert [(c.name, c.status) for c in check_network(a)] == [("network", "ok")]
        assert "no wipe, epoch reset or change of network seen" in check_network(a)[0].detail
        a._catalog.note_epoch(1)  # back: a wipe or reset suspected
        a._catalog.note_epoch(500)  # ahead of what a 1 h epoch allows
        checks = {c.name: c for c in check_network(a)}
        assert checks["network reset"].status == "warn"
        assert "below epoch 40" in checks["network reset"].detail
        assert checks["network change"].status == "warn"
        assert "[500]" in checks["network change"].detail
        assert "walrus-mem sync" in checks["network change"].fix


def test_doctor_names_a_followed_wipe(tmp_path: Path) -> None:
    """After a wipe (epochs back from 40 to 1) is followed, doctor's network check says
    what happened and that every lost memory was stored again."""
    port, url = _stored_on_a_first_network(tmp_path, 3)
    with _other_network(tmp_path, port, 1), \
            machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
        assert a.sync().renewed == 3
        check = {c.name: c for c in check_network(a)}["network"]
        assert check.status == "ok"
        assert "wipe or an epoch reset" in check.detail and "40 -> 1" in check.detail
        assert "every lost memory stored again" in check.detail


def test_endpoints_switched_to_another_network_while_the_old_one_still_runs(
        tmp_path: Path, later: Callable[[float], None]) -> None:
    """The configuration now names another network's publisher and aggregator (the old
    one still runs elsewhere): the memories' blobs are not on the new one, at epochs
    where the old one's were. A sync that sees it again ten minutes later (N16) stores
    them there once; a fresh machine on the new network restores everything."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as old, \
            RelayerServer(tmp_path / "walrus-new", admin=False, fsync=False,
                          initial_epoch=41) as new:  # 42 could read as epochs ahead
        with machine(tmp_path / "a", old.url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact {i}" for i in range(5)])
            a.sync()
        with machine(tmp_path / "a", new.url, state_dir=tmp_path / "sa") as a:
            report = _seen_again_later(a, later)
            assert report.errors == [] and report.renewed == 5, report
            head = report.manifests["default"]
            assert a.sync().renewed == 0
        assert _fresh_count(tmp_path, new.url, head) == 5


def test_a_fact_stored_on_the_new_network_does_not_hide_the_lost_ones(
        tmp_path: Path, later: Callable[[float], None]) -> None:
    """Another network at the same epochs; a fact is stored on it before the next sync.
    Its blob is served, and it is the newest: the check must ask what was stored before
    the head that answered 404 (the ledger's store times), else one served blob reads
    as "a lagging aggregator" and the lost memories are never stored again."""
    port, url = _stored_on_a_first_network(tmp_path, 4)
    with _other_network(tmp_path, port, 41):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember("a fact stored on the new network")
            report = _seen_again_later(a, later)
            assert report.errors == [] and report.renewed == 4, report
            head = report.manifests["default"]
            assert a.sync().renewed == 0
        assert _fresh_count(tmp_path, url, head) == 5


@pytest.mark.parametrize("synced_twice", [False, True])
def test_heads_published_on_the_new_network_do_not_hide_the_lost_ones(
        tmp_path: Path, synced_twice: bool) -> None:
    """Another network at the same epochs; writes publish manifests on it before the next
    sync (stateful findings N4, N5): the newest merged head is then served, by the new
    network. The head last found served (the mark: set by a sync's check, or before the
    first manifest that has a parent) answers 404, and that shows the loss: one sync
    stores the lost memories again, and a fresh restore of its head gets every one.
    Followed at its first sighting (``network_loss_confirm_after=0``): by default the
    forget's manifest waits for a second one (N16) and is never published on the new
    network before the loss is followed."""
    port, url = _stored_on_a_first_network(tmp_path, 4)
    if synced_twice:  # the mark then comes from a sync's check, not from a publish
        with RelayerServer(tmp_path / "walrus", admin=False, fsync=False, port=port), \
                machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember("one more on the first network")
            a.sync()
            assert a.sync().errors == []
    with _other_network(tmp_path, port, 41):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa",
                     network_loss_confirm_after=0) as a:
            first = sorted(live(a))
            a.remember("stored on the new network")
            a.forget(first[0])  # a forget publishes a manifest: on the new network
            newest = a.parts.log.merged("default")[0].blob_id  # the new network serves it
            assert httpx.get(f"{url}/v1/blobs/{newest}", timeout=10).status_code == 200
            report = a.sync()
            assert report.errors == [], report
            assert a.sync().renewed == 0
            head = str(a.parts.log.merged("default")[0])
            total = len(live(a))
            assert total == len(first)  # one forgotten, one added
        assert _fresh_count(tmp_path, url, head) == total


def test_facts_stored_before_any_manifest_are_stored_again(
        tmp_path: Path, later: Callable[[float], None]) -> None:
    """A new data dir stores facts and publishes no manifest; the endpoints then lead to
    another network at the same epochs. Its first manifest has no parent and no head was
    ever marked: the blobs it stored itself are read before that manifest lists them, and
    their loss is followed (else the manifest lists lost locations and nothing notices)."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact {i}" for i in range(3)], publish=True)
            assert a.parts.log.merged("default") == []  # no manifest yet
    with _other_network(tmp_path, port, 41):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            report = _seen_again_later(a, later)  # the manifest's settle stores them first
            assert report.errors == [], report
            assert json.loads(a.parts.catalog.get_meta(RESET_KEY) or "{}")["lost_blobs"] == 1
            head = report.manifests["default"]
            assert a.sync().renewed == 0
        assert _fresh_count(tmp_path, url, head) == 3


def test_a_catalog_lost_to_garbage_after_a_change_of_network_publishes_again(
        tmp_path: Path, later: Callable[[float], None]) -> None:
    """N14 of .ci/stateful_findings.md: a data dir publishes its first manifest; the
    endpoints then lead to another network at the same epochs, and its catalog is lost
    to garbage before it syncs again. Its repair finds the one head it remembers answering
    404 with nothing of the catalog left to read beside it, and a head alone cannot tell
    a lost network from a lagging aggregator: every manifest was refused (StaleDataDir)
    until another machine named that head gone. The copy of the served mark kept in
    heads.sqlite3 names the blobs that had to be live; their 404s show the loss."""
    port, url = _stored_on_a_first_network(tmp_path, 3)
    seen = SeenHeads(tmp_path / "a" / "heads.sqlite3")
    try:
        first, kept = str(seen.newest("default")[0].ref), seen.kept_mark("default")
    finally:
        seen.close()
    assert kept is not None and kept["head"] == first and kept["witnesses"], kept
    catalog = tmp_path / "a" / "catalog.sqlite3"
    catalog.write_bytes(b"not a database, the disk lost it " * 300)
    for suffix in ("-wal", "-shm"):
        Path(str(catalog) + suffix).unlink(missing_ok=True)
    settings = make_settings(tmp_path / "a", publisher_url=url, aggregator_urls=url,
                             state_dir=tmp_path / "sa", read_deadline=3.0,
                             publish_deadline=5.0, mock_admin_token=MOCK_ADMIN_TOKEN)
    with _other_network(tmp_path, port, 40):
        rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
        assert rebuild is not None and rebuild.moved_to is not None
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember("a fact written after the repair")
            report = _seen_again_later(a, later)
            assert report.errors == [], report
            head = report.manifests["default"]
            assert HeadRef.parse(head).seq > HeadRef.parse(first).seq
            assert a.parts.log.seen.is_gone("default", HeadRef.parse(first).blob_id)
        # the three facts were only in the lost catalog and on the lost network
        assert _fresh_count(tmp_path, url, head) == 1


@pytest.mark.parametrize("marked", [True, False])
def test_no_manifest_while_the_marked_head_answers_404_and_its_blobs_cannot_be_read(
        tmp_path: Path, later: Callable[[float], None], marked: bool) -> None:
    """N15 of .ci/stateful_findings.md: after a change of network at the same epochs, the
    marked head answers 404 and the aggregator blocks the facts' blobs (451), so nothing
    tells a lost network from a lagging aggregator. A manifest published then listed
    the lost locations, and no later sync could mend that head (a fresh restore of it
    missed them for good). It now waits (NetworkResetPending) until the blobs answer.
    ``marked`` False: a data dir with no head marked (from before marks, or after a
    ``compact``), whose manifest reads its parent instead; that parent answering 404
    while its blobs cannot be read holds the manifest back the same way."""
    port, url = _stored_on_a_first_network(tmp_path, 3)
    if not marked:
        catalog = Catalog(tmp_path / "a" / "catalog.sqlite3")
        try:
            catalog.set_meta("served_mark:default", "")
        finally:
            catalog.close()
    blocked = dumps(error_envelope("UNAVAILABLE_FOR_LEGAL_REASONS", "FORBIDDEN_BLOB",
                                   "the blob is blocked by this aggregator"))

    facts: set[str] = set()  # the first network's facts: their blob and patch ids

    def block_the_facts(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if method == "GET" and any(f in path for f in facts):
            return 451, blocked
        return None

    with _other_network(tmp_path, port, 40):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            first = a.stats().manifest_blob_id
            facts.update(i for r in a.list() for i in (r.blob_id, r.quilt_patch_id) if i)
            a.remember_many(["a fact written after the change"], publish=True)
        with HookProxy(url, hook=block_the_facts) as proxy, \
                machine(tmp_path / "a", url, aggregator=proxy.url,
                        state_dir=tmp_path / "sa") as a:
            report = a.sync()
            assert any("NetworkResetPending" in e for e in report.errors), report
            assert a.stats().manifest_blob_id == first  # nothing published
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            report = _seen_again_later(a, later)  # the blobs answer now: a loss
            assert report.errors == [], report
            head = report.manifests["default"]
        assert _fresh_count(tmp_path, url, head) == 4


def test_a_forget_drops_its_deleted_blob_from_the_kept_mark(mem: Memory) -> None:
    """A blob a forget deleted answers 404 for good: the copy of the served mark no
    longer counts on it, or a repair would read that 404 beside a lagging head as a
    lost network."""
    with mem as a:
        kept_fact = a.remember("a fact that stays")
        gone_fact = a.remember("a fact to forget")
        a.sync()
        kept = a.parts.log.seen.kept_mark("default")
        assert kept is not None
        witnesses = {blob for blob, _ in kept["witnesses"]}
        assert {kept_fact.blob_id, gone_fact.blob_id} <= witnesses, kept
        report = a.forget(gone_fact.id)
        assert report.deleted_blobs == [gone_fact.blob_id]
        kept = a.parts.log.seen.kept_mark("default")
        assert kept is not None
        witnesses = {blob for blob, _ in kept["witnesses"]}
        assert gone_fact.blob_id not in witnesses and kept_fact.blob_id in witnesses


def test_python_m_relayer_mock_serves_the_metrics_gauge(tmp_path: Path) -> None:
    """`python -m relayer_mock --metrics-port N`: GET /metrics names the same system
    object as a RelayerServer on that data dir (one identity per data dir)."""
    import socket

    from relayer_mock.server import RelayerProcess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with RelayerProcess(tmp_path / "walrus", extra_args=["--metrics-port", str(port)]):
        answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert answer.status_code == 200
        named = parse_contract_info(answer.text)
    with RelayerServer(tmp_path / "walrus", fsync=False, metrics_port=0) as srv:
        assert named == srv.metrics.ids


def test_a_change_of_network_ends_only_the_heads_seen_by_the_lost_one(tmp_path: Path) -> None:
    """Another network lacks every head seen by the one that answered 404, whatever epoch
    they were stored in; a head first seen after it may be the new network's own (another
    machine followed the change first and published it): it keeps its end."""
    store = SeenHeads(tmp_path / "heads.sqlite3")
    try:
        old = HeadRef(1, "old", "ab" * 32)
        store.add("ns", SeenHead(old, "w", (), ("old",), end_epoch=45, stored_epoch=40))
        seen_by = store.end_bound("ns", "old")[1]
        assert seen_by is not None
        time.sleep(0.01)
        new = HeadRef(2, "new", "cd" * 32)
        store.add("ns", SeenHead(new, "v", (old,), ("new",), end_epoch=46, stored_epoch=41))
        store.end_seen_by(41, seen_by)
        assert store.end_bound("ns", "old")[0] == 41 and store.end_bound("ns", "new")[0] == 46
    finally:
        store.close()


def _lying_aggregator_setup(tmp_path: Path, srv: RelayerServer) -> tuple[str, set[str]]:
    """A machine stores 4 facts and syncs: its head, and every id the facts' blobs are
    read by (the ones one lying aggregator answers 404 for)."""
    with machine(tmp_path / "a", srv.url, state_dir=tmp_path / "sa") as a:
        a.remember_many([f"fact {i}" for i in range(4)])
        head = a.sync().manifests["default"]
        ids = {i for r in a.list() for i in (r.blob_id, r.quilt_patch_id) if i}
    return head, {HeadRef.parse(head).blob_id, *ids}


def _answering_404(upstream: str, ids: set[str]) -> HookProxy:
    """An aggregator in front of ``upstream`` answering 404 for every read of ``ids``."""
    def lie(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if method == "GET" and any(i in path for i in ids):
            return 404, dumps(error_envelope("NOT_FOUND", "BLOB_NOT_FOUND", MSG_BLOB_NOT_FOUND))
        return None
    return HookProxy(upstream, hook=lie)


def test_one_aggregator_answering_404_for_the_head_and_every_fact_is_not_paid_for(
        tmp_path: Path, later: Callable[[float], None]) -> None:
    """N16 of .ci/stateful_findings.md: the only aggregator answers 404 for the newest head
    and every fact's blob in each of the three rounds, while it serves the epoch probe.
    That reads exactly as a lost network at the same epochs, and the sync stored every
    memory again (paid twice). Now nothing is stored again: the sync says a loss is
    pending and holds the manifest; once the aggregator serves again, the next sync drops
    the sighting and publishes, having stored nothing twice."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        head, ids = _lying_aggregator_setup(tmp_path, srv)
        with _answering_404(srv.url, ids) as proxy, \
                machine(tmp_path / "a", srv.url, aggregator=proxy.url,
                        state_dir=tmp_path / "sa") as a:
            a.remember("written while the aggregator lies")  # its manifest waits too
            report = a.sync()
            assert report.renewed == 0 and not report.manifests, report
            assert any("NetworkResetPending" in e and "answered 404" in e
                       for e in report.errors), report.errors
            assert a.stats().manifest_blob_id == head
            assert a.parts.catalog.get_meta(RESET_KEY) is None
            checks = {c.name: c for c in check_network(a)}
            assert checks["network loss"].status == "warn", checks
            assert "answered 404 on every aggregator" in checks["network loss"].detail
        with machine(tmp_path / "a", srv.url, state_dir=tmp_path / "sa") as a:
            later(60)  # well inside the ten minutes: the honest aggregator decides
            report = a.sync()
            assert report.errors == [] and report.renewed == 0, report
            assert report.manifests and a.parts.catalog.get_meta(RESET_KEY) is None
            assert not a.parts.catalog.get_meta("loss_pending:default")
            assert "network loss" not in {c.name for c in check_network(a)}
            new_head = report.manifests["default"]
        assert _fresh_count(tmp_path, srv.url, new_head) == 5



def test_a_rotation_ten_minutes_after_a_loss_was_seen_follows_it_without_a_sync(
        tmp_path: Path, later: Callable[[float], None]) -> None:
    """N19: a loss seen only as 404s holds the manifests of the namespace, and only a sync
    read its head again: a key rotation resumed ten minutes on was held again and stayed
    unfinished until the user synced. The rotation also stored its re-sealed memories on
    the new network, and those, served beside the lost head, dropped the sighting as if
    the network were the same. The check before any manifest now reads a sighting old
    enough again, with the blobs seen then: the rotation finishes, the change is
    followed, and nothing is stored twice."""
    port, url = _stored_on_a_first_network(tmp_path, 4)
    with _other_network(tmp_path, port, 41):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            report = a.sync()  # seen once: recorded, nothing stored again
            assert any("answered 404" in e for e in report.errors), report.errors
            assert report.renewed == 0 and not report.manifests
            later(a.parts.settings.network_loss_confirm_after + 1)
            rotated = a.rotate_key()
            assert rotated.complete and not rotated.errors, rotated
            assert rotated.published == 4 and rotated.manifest_blob_id is not None
            assert not a.parts.catalog.get_meta("loss_pending:default")
            assert json.loads(a.parts.catalog.get_meta(RESET_KEY) or "{}")["kind"] == "lost"
            again = a.sync()
            assert again.errors == [] and again.renewed == 0, again
        assert _fresh_count(tmp_path, url, rotated.manifest_blob_id) == 4
