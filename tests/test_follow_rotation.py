"""Machines following a key rotation made on another machine (issue 23, items 6 and 11).

Every machine has its own data dir and state dir (its own HOME) and one master key,
over relayer_mock on loopback HTTP with the admin routes off, as on real Walrus:

* a fresh machine finds the generation by itself from an explicit head or from the
  heads file, and only from bytes that verify (digest, signature, root): a forged blob
  carrying a generation's fingerprint changes nothing;
* a machine holding the namespace under an older generation follows a rotation it
  meets (sync, pull, restore): it re-seals its own memories under the newer generation
  and merges, instead of skipping the newer head for good;
* a heads-file line of an older generation, or of another key, is skipped with advice
  that fits it (never "remove it" for a live head of this namespace).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import dir_snapshot, live, machine
from tests.helpers_memory import OTHER_MASTER_HEX
from walrus_mem import Memory
from walrus_mem._log import manifest as mf
from walrus_mem._log.heads import HeadRef, HeadsFile
from walrus_mem._memory.rotation import current_generation, rotation_in_progress
from walrus_mem.envelope import HEADER_SIZE, MAGIC, envelope_fingerprint
from walrus_mem.errors import WalrusMemError

NS = "notes"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin=False) as srv:
        yield srv


def _machine(tmp: Path, name: str, server: RelayerServer, **kw: object) -> Memory:
    return machine(tmp / name, server.url, state_dir=tmp / f"{name}-state", **kw)


def _fingerprints(mem: Memory, ns: str = NS) -> set[bytes]:
    """The key fingerprints of every live memory's sealed copy."""
    rows = mem._catalog.query("SELECT sealed FROM memories WHERE namespace = ?", (ns,))
    return {envelope_fingerprint(bytes(r["sealed"])) for r in rows}


def _head_fingerprint(mem: Memory, head: HeadRef) -> bytes:
    return envelope_fingerprint(mem.walrus.read_blob(head.blob_id))


def _forged(fingerprint: bytes) -> bytes:
    """An envelope header claiming ``fingerprint``, random 'ciphertext', no signature:
    what anyone can make without any key."""
    header = MAGIC + bytes([1, 1]) + fingerprint + os.urandom(HEADER_SIZE - 22)
    return header + os.urandom(256 + 16) + bytes(64)


def _rotated(tmp: Path, server: RelayerServer, facts: int, **kw: object) -> tuple[Memory, str]:
    """Machine a: ``facts`` memories, synced, rotated to generation 1, one more, synced."""
    a = _machine(tmp, "a", server, **kw)
    a.remember_many([f"fact {i} about the grey heron" for i in range(facts)], namespace=NS)
    a.sync(NS)
    report = a.rotate_key(NS)
    assert report.complete and report.generation == 1
    a.remember("after the rotation: the heron nests in March", namespace=NS)
    head = a.sync(NS).manifests[NS]
    return a, head


# -- item 11: nothing from an unverified blob changes local state -------------------------

def test_a_forged_blob_changes_nothing_then_the_real_head_restores(tmp_path: Path,
                                                                   server: RelayerServer) -> None:
    a, head = _rotated(tmp_path, server, 3)
    with a:
        new_fpr = a.keys_for(NS).fingerprint_bytes
        fake = _forged(new_fpr)
        fake_id = a.walrus.store_blob(fake).blob_id
        # a real, signed blob of generation 1, but a fact, not a manifest
        fact = bytes(a._catalog.query("SELECT sealed FROM memories WHERE namespace = ? "
                                      "LIMIT 1", (NS,))[0]["sealed"])
        fact_id = a.walrus.store_blob(fact).blob_id
    with _machine(tmp_path, "c", server) as c:
        c.remember("c's own fact elsewhere", namespace="other")
        before = dir_snapshot(tmp_path / "c")
        for bad in (fake_id, f"{fake_id}.2.{mf.sealed_digest(fake)}",
                    f"{fact_id}.2.{mf.sealed_digest(fact)}"):
            with pytest.raises(WalrusMemError):
                c.restore(NS, bad)
            assert dir_snapshot(tmp_path / "c") == before, bad
            assert current_generation(c._catalog, NS) == 0
        report = c.restore(NS, head)  # the real head still restores, generation and all
        assert report.complete and report.restored == 4
        assert current_generation(c._catalog, NS) == 1
        c.remember("written on c after the restore", namespace=NS)
        assert _fingerprints(c) == {new_fpr}  # sealed under the rotated key
        c_head = c.sync(NS).manifests[NS]
    with _machine(tmp_path, "d", server) as d:
        assert d.restore(NS, c_head).restored == 5


def test_a_forged_heads_file_line_changes_nothing(tmp_path: Path,
                                                  server: RelayerServer) -> None:
    shared = tmp_path / "shared" / "heads.txt"
    a, head = _rotated(tmp_path, server, 2, heads_file=shared)
    with a:
        fake = _forged(a.keys_for(NS).fingerprint_bytes)
        fake_ref = HeadRef(9, a.walrus.store_blob(fake).blob_id, mf.sealed_digest(fake))
    with _machine(tmp_path, "c", server, heads_file=shared) as c:
        shared.write_text(f"{NS} {fake_ref}\n")  # only the forged line
        before = dir_snapshot(tmp_path / "c")
        report = c.restore(NS)
        assert report.restored == 0
        assert dir_snapshot(tmp_path / "c") == before
        assert current_generation(c._catalog, NS) == 0
        shared.write_text(f"{NS} {fake_ref}\n{NS} {head}\n")
        report = c.restore(NS)  # the real line beside it: adopted, the forged one skipped
        assert report.complete and report.restored == 3
        assert current_generation(c._catalog, NS) == 1


# -- item 6: heads-file machines follow a rotation ------------------------------------------

def test_a_fresh_machine_follows_a_rotation_through_the_heads_file(
        tmp_path: Path, server: RelayerServer) -> None:
    shared = tmp_path / "shared" / "heads.txt"
    a, _ = _rotated(tmp_path, server, 5, heads_file=shared)
    with a, _machine(tmp_path, "c", server, heads_file=shared) as c:
        report = c.restore(NS)  # no argument: the heads file names a's generation-1 head
        assert report.complete and report.restored == 6 and report.key_generation == 1
        assert current_generation(c._catalog, NS) == 1
        assert live(c, NS) == live(a, NS)
        c.remember("written on c", namespace=NS)
        assert not c.sync(NS).skipped_heads
        sync = a.sync(NS)
        assert not sync.skipped_heads
        assert live(a, NS) == live(c, NS) and len(live(a, NS)) == 7
        a_fpr = a.keys_for(NS).fingerprint_bytes
        assert _fingerprints(c) == _fingerprints(a) == {a_fpr}
    with _machine(tmp_path, "d", server, heads_file=shared) as d:
        assert d.restore(NS).restored == 7


def test_a_machine_with_data_follows_a_rotation_at_sync(tmp_path: Path,
                                                        server: RelayerServer,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    shared = tmp_path / "shared" / "heads.txt"
    with _machine(tmp_path, "a", server, heads_file=shared) as a, \
            _machine(tmp_path, "b", server, heads_file=shared) as b:
        a.remember_many([f"a's fact {i} about otters" for i in range(3)], namespace=NS)
        a.sync(NS)
        b.sync(NS)  # b starts from a's head
        b.remember_many([f"b's fact {i} about badgers" for i in range(2)], namespace=NS)
        b.sync(NS)
        a.sync(NS)
        assert len(live(a, NS)) == len(live(b, NS)) == 5
        assert a.rotate_key(NS).complete
        a.remember("a, after rotating: otters hold hands asleep", namespace=NS)
        a.sync(NS)
        b.remember("b, before seeing the rotation: badgers dig setts", namespace=NS)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            report = b.sync(NS)
        assert "remove it from the file" not in caplog.text
        assert not report.errors and not report.skipped_heads, report
        assert current_generation(b._catalog, NS) == 1  # followed
        assert report.pulled[NS].key_generation == 1 and report.pulled[NS].added == 1
        assert NS in report.manifests  # the rotation's manifest, merging a's head
        a_fpr = a.keys_for(NS).fingerprint_bytes
        assert b.keys_for(NS).fingerprint_bytes == a_fpr
        assert _fingerprints(b) == {a_fpr}  # b's own memories re-sealed too
        assert len(live(b, NS)) == 7
        a.sync(NS)
        assert live(a, NS) == live(b, NS)
        for _, line in HeadsFile(shared).read(NS):  # every line of the new generation
            assert _head_fingerprint(a, line) == a_fpr
    with _machine(tmp_path, "d", server, heads_file=shared) as d:
        assert d.restore(NS).restored == 7


def test_pull_of_an_explicit_newer_generation_head_follows(tmp_path: Path,
                                                           server: RelayerServer) -> None:
    a = _machine(tmp_path, "a", server)
    with a, _machine(tmp_path, "b", server) as b:
        a.remember_many([f"a's fact {i} about owls" for i in range(4)], namespace=NS)
        b.restore(NS, a.sync(NS).manifests[NS])
        b.remember("b's own fact about owls' pellets", namespace=NS)
        assert a.rotate_key(NS).complete
        a.remember("a's fact after rotating", namespace=NS)
        head = a.sync(NS).manifests[NS]
        report = b.pull(head, namespace=NS)
        assert report.complete and report.key_generation == 1
        assert current_generation(b._catalog, NS) == 1
        assert len(live(b, NS)) == 6
        assert _fingerprints(b) == {a.keys_for(NS).fingerprint_bytes}
        a.pull(b.sync(NS).manifests[NS], namespace=NS)
        assert live(a, NS) == live(b, NS)


def test_an_older_generation_line_is_explained_and_its_writer_follows(
        tmp_path: Path, server: RelayerServer, caplog: pytest.LogCaptureFixture) -> None:
    shared = tmp_path / "shared" / "heads.txt"
    a, _ = _rotated(tmp_path, server, 2, heads_file=shared)
    with _machine(tmp_path, "b", server) as b:  # b: no heads file yet, generation 0
        b.remember("b wrote this under generation 0", namespace=NS)
        old_head = b.sync(NS).manifests[NS]
    with shared.open("a") as fh:
        fh.write(f"{NS} {old_head}\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        report = a.sync(NS)
    (line,) = [s for s in report.skipped_heads if old_head in s]
    assert "generation 0" in line and "remove it" not in line
    assert "remove it from the file" not in caplog.text
    assert current_generation(a._catalog, NS) == 1
    # b, now reading the heads file, follows the rotation and replaces its old line
    with a, _machine(tmp_path, "b", server, heads_file=shared) as b2:
        assert not b2.sync(NS).errors
        assert current_generation(b2._catalog, NS) == 1
        assert old_head not in shared.read_text()
        assert not a.sync(NS).skipped_heads
        assert live(a, NS) == live(b2, NS) and len(live(a, NS)) == 4


def test_a_line_of_another_key_is_skipped_with_advice(tmp_path: Path, server: RelayerServer,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    shared = tmp_path / "shared" / "heads.txt"
    a, _ = _rotated(tmp_path, server, 2, heads_file=shared)
    with a, _machine(tmp_path, "e", server, key=OTHER_MASTER_HEX, heads_file=shared) as e:
        e.remember("someone else's namespace of the same name", namespace=NS)
        e_head = e.sync(NS).manifests[NS]
        before = live(a, NS)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            report = a.sync(NS)
        (line,) = [s for s in report.skipped_heads if e_head in s]
        assert "another key" in line
        assert current_generation(a._catalog, NS) == 1
        assert live(a, NS) == before
        assert e_head in shared.read_text()  # e's line stays: it is e's live head


def test_two_rotations_are_followed_in_one_step(tmp_path: Path, server: RelayerServer) -> None:
    """b (generation 0, with data) and a fresh c both go straight to generation 2."""
    shared = tmp_path / "shared" / "heads.txt"
    with _machine(tmp_path, "a", server, heads_file=shared) as a, \
            _machine(tmp_path, "b", server, heads_file=shared) as b:
        a.remember_many([f"a's fact {i} about moles" for i in range(3)], namespace=NS)
        a.sync(NS)
        b.sync(NS)
        b.remember("b's fact about voles", namespace=NS)
        assert a.rotate_key(NS).complete and a.rotate_key(NS).generation == 2
        report = b.sync(NS)
        assert not report.errors and report.pulled[NS].key_generation == 2
        assert current_generation(b._catalog, NS) == 2
        assert _fingerprints(b) == {a.keys_for(NS).fingerprint_bytes}
        a.sync(NS)
        assert live(a, NS) == live(b, NS) and len(live(a, NS)) == 4
    with _machine(tmp_path, "c", server, heads_file=shared) as c:
        report = c.restore(NS)
        assert report.restored == 4 and report.key_generation == 2


def test_a_machine_gone_for_good_is_brought_over_by_a_fresh_data_dir(
        tmp_path: Path, server: RelayerServer) -> None:
    """What docs/keys.md advises for the last head of a machine that never follows:
    restore it into a fresh data dir, then sync there with the heads file."""
    shared = tmp_path / "shared" / "heads.txt"
    a, _ = _rotated(tmp_path, server, 2, heads_file=shared)
    with _machine(tmp_path, "b", server) as b:  # generation 0, then gone
        b.remember("only b knew this: the key is under the third stone", namespace=NS)
        old_head = b.sync(NS).manifests[NS]
    with shared.open("a") as fh:
        fh.write(f"{NS} {old_head}\n")
    with a, _machine(tmp_path, "x", server, heads_file=shared) as x:
        report = x.restore(NS, old_head)
        assert report.restored == 1 and current_generation(x._catalog, NS) == 0
        sync = x.sync(NS)
        assert not sync.errors and sync.pulled[NS].key_generation == 1
        assert old_head not in shared.read_text()  # superseded by x's new head
        a.sync(NS)
        assert live(a, NS) == live(x, NS) and len(live(a, NS)) == 4
        assert _fingerprints(x) == {a.keys_for(NS).fingerprint_bytes}


def test_the_cli_says_which_generation_it_took(tmp_path: Path, server: RelayerServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers_cli import invoke
    from tests.helpers_memory import MASTER_HEX

    shared = tmp_path / "shared" / "heads.txt"
    a, _ = _rotated(tmp_path, server, 2, heads_file=shared)
    a.close()
    for name, value in {"MASTER_KEY": MASTER_HEX, "EMBEDDING_MODEL": "test-hash",
                        "PUBLISHER_URL": server.url, "AGGREGATOR_URLS": server.url,
                        "HEADS_FILE": str(shared), "DATA_DIR": str(tmp_path / "cli-data"),
                        "STATE_DIR": str(tmp_path / "cli-state")}.items():
        monkeypatch.setenv(f"WALRUS_MEM_{name}", value)
    out = invoke(["-n", NS, "restore"]).stdout
    assert "3 restored" in out and "now uses key generation 1" in out


def test_an_older_generation_head_given_explicitly_is_refused_with_the_reason(
        tmp_path: Path, server: RelayerServer) -> None:
    with _machine(tmp_path, "b", server) as b:
        b.remember("b's fact, generation 0", namespace=NS)
        old_head = b.sync(NS).manifests[NS]
    a, _ = _rotated(tmp_path, server, 1)
    with a:
        before = dir_snapshot(tmp_path / "a")
        with pytest.raises(WalrusMemError, match="rotated away from"):
            a.pull(old_head, namespace=NS)
        assert dir_snapshot(tmp_path / "a") == before
        assert current_generation(a._catalog, NS) == 1


def test_a_backup_from_before_the_rotation_follows_it_on_the_same_home(
        tmp_path: Path, server: RelayerServer) -> None:
    """The per-user mirror hands the restored backup its own newer heads, sealed under
    the generation it rotated to after the backup: its next sync follows, loses nothing."""
    import shutil

    with _machine(tmp_path, "a", server) as a:
        a.remember_many([f"before the backup {i}" for i in range(3)], namespace=NS)
        a.sync(NS)
    shutil.copytree(tmp_path / "a", tmp_path / "backup")
    with _machine(tmp_path, "a", server) as a:
        assert a.rotate_key(NS).complete
        a.remember("after the rotation, lost with the catalog", namespace=NS)
        a.sync(NS)
        expected = live(a, NS)
    shutil.rmtree(tmp_path / "a")
    shutil.copytree(tmp_path / "backup", tmp_path / "a")
    with _machine(tmp_path, "a", server) as a:  # same state dir: the mirror knows gen 1
        assert current_generation(a._catalog, NS) == 0
        report = a.sync(NS)
        assert not report.errors, report.errors
        assert current_generation(a._catalog, NS) == 1
        assert live(a, NS) == expected
        assert _fingerprints(a) == {a.keys_for(NS).fingerprint_bytes}


def test_a_follow_with_the_publisher_down_merges_and_the_next_sync_finishes_it(
        tmp_path: Path, server: RelayerServer) -> None:
    from tests.helpers_proxy import HookProxy

    down = {"on": False}
    proxy = HookProxy(server.url, lambda m, p, b: (503, b"down")
                      if m == "PUT" and down["on"] else None)
    shared = tmp_path / "shared" / "heads.txt"
    with proxy, _machine(tmp_path, "a", server, heads_file=shared) as a, \
            machine(tmp_path / "b", proxy.url, aggregator=server.url,
                    state_dir=tmp_path / "b-state", heads_file=shared,
                    publish_deadline=1.0) as b:
        a.remember_many([f"a's fact {i} about newts" for i in range(3)], namespace=NS)
        a.sync(NS)
        b.sync(NS)
        b.remember("b's fact about toads", namespace=NS)
        b.sync(NS)
        assert a.rotate_key(NS).complete
        a.remember("a's fact after rotating", namespace=NS)
        a.sync(NS)
        down["on"] = True
        report = b.pull(namespace=NS)  # follows; its publishing fails
        assert report.key_generation == 1
        assert current_generation(b._catalog, NS) == 1
        assert len(live(b, NS)) == 5  # the newer head merged all the same
        assert rotation_in_progress(b._catalog, NS)
        down["on"] = False
        sync = b.sync(NS)
        assert not sync.errors, sync.errors
        assert not rotation_in_progress(b._catalog, NS)
        assert not b._catalog.query("SELECT 1 FROM memories WHERE status = 'queued'")
        assert _fingerprints(b) == {a.keys_for(NS).fingerprint_bytes}
        a.sync(NS)
        assert live(a, NS) == live(b, NS)
    with _machine(tmp_path, "d", server, heads_file=shared) as d:
        assert d.restore(NS).restored == 5
