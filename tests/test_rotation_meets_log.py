"""Key rotation where it meets the namespace log (issue 23, items 2, 3, 4, 12 and 18a).

Every machine has its own data dir and state dir (its own HOME) and one master key,
over relayer_mock on loopback HTTP:

* pending entries (merged, not fetched: a 451 while pulling) outlive a rotation: they
  stay fetchable with their generation's key, take part in the rotation once fetched,
  and never win over a readable copy of the same version merely on digest;
* a rotation never begins during an unfinished pull, and a data dir left that way by
  an earlier version recovers with the advised commands (restore, repair);
* no manifest is published while a rotation's re-sealing is unfinished: sync finishes
  the rotation first;
* ``delete_old`` deletes every blob of the old generation this data dir knows;
* re-published quilts do not reuse the old generation's public quilt identifiers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import nacl.exceptions
import nacl.public
import pytest
from pydantic import SecretStr

from relayer_mock.server import RelayerServer
from tests.helpers_log import Interrupt, kill_after, live, machine
from tests.helpers_memory import MASTER_HEX
from tests.helpers_proxy import HookProxy
from walrus_mem import Memory
from walrus_mem._log import merging as log_merging
from walrus_mem._memory import rotation as rot
from walrus_mem._memory.grants import GRANT_MAGIC
from walrus_mem.envelope import envelope_fingerprint, open_envelope
from walrus_mem.errors import (
    EnvelopeError,
    RestoreIncomplete,
    RotationIncomplete,
)
from walrus_mem.keys import NamespaceKeys
from walrus_mem.testing import HashEmbedder

NS = "rm"
BLOCKED = b'{"error": {"code": 451, "status": "UNAVAILABLE_FOR_LEGAL_REASONS"}}'


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus", admin=False) as srv:  # as on real Walrus
        yield srv


def _machine(tmp: Path, name: str, url: str, **kw: object) -> Memory:
    return machine(tmp / name, url, state_dir=tmp / f"{name}-state", **kw)


def _restore_fresh(tmp: Path, name: str, url: str, head: str) -> dict[str, str]:
    with _machine(tmp, name, url) as fresh:
        report = fresh.restore(NS, head)
        assert report.complete and not report.missing and not report.unreadable, report
        return live(fresh, NS)


def _old_keys(mem: Memory, generation: int = 0) -> NamespaceKeys:
    return mem.derive_keys(NS, generation=generation)


# -- item 2: pending entries outlive a rotation ------------------------------------------


@pytest.mark.parametrize("how", ["keys-rotate", "follow-by-pull"])
def test_pending_entries_follow_a_rotation_on_both_machines(tmp_path: Path, server: RelayerServer,
                                                            how: str) -> None:
    """B's pull gets 451 for 8 of A's blobs (pending); A rotates, B rotates (the documented
    way to follow, or by pulling A's new head), they exchange heads. Each pending entry
    pointed at a generation-0 blob, won on digest about half the time against A's
    re-sealed copy of the same version, could never be opened with the current key, and
    was carried into every manifest."""
    with _machine(tmp_path, "a", server.url) as a:
        recs = [a.remember(f"fact {i} of A about the heron", namespace=NS) for i in range(12)]
        head_a0 = a.sync(NS).manifests[NS]
        blocked = {a.get(r.id, namespace=NS).blob_id for r in recs[:8]}
    assert len(blocked) == 8  # one blob per fact

    def hook(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if method == "GET" and any(f"/v1/blobs/{b}" in path for b in blocked):
            return 451, BLOCKED  # B's aggregator deny-lists them, for the whole test
        return None

    with HookProxy(server.url, hook) as proxy, \
            _machine(tmp_path, "a", server.url) as a, \
            _machine(tmp_path, "b", server.url, aggregator=proxy.url) as b:
        first = b.pull(head_a0, namespace=NS)
        assert first.complete and len(first.unreadable) == 8
        assert len(b._log.tables.pending(NS)) == 8
        own = b.remember("B's own fact about the heron", namespace=NS)
        assert NS in b.sync(NS).manifests
        assert a.rotate_key(NS).complete
        head_a1 = a.stats(NS).manifest_blob_id
        if how == "keys-rotate":
            assert b.rotate_key(NS).complete  # the documented way to follow a rotation
        else:
            b.pull(head_a1, namespace=NS)  # B follows the rotation it meets
        assert b.keys_for(NS).generation == 1
        head_b1 = b.stats(NS).manifest_blob_id
        assert head_a1 and head_b1
        for _ in range(2):  # exchange heads both ways, twice
            b.pull(head_a1, namespace=NS)
            a.pull(head_b1, namespace=NS)
            for mem in (a, b):
                report = mem.sync(NS)
                assert not [e for e in report.errors if "451" not in e], report.errors
            head_a1 = a.stats(NS).manifest_blob_id
            head_b1 = b.stats(NS).manifest_blob_id
            assert head_a1 and head_b1
        everything = {r.id for r in recs} | {own.id}
        assert set(live(a, NS)) == everything, "A lost memories"
        assert set(live(b, NS)) == everything, "B lost memories"
        # nothing unopenable is carried: what each writer's manifest lists opens, and
        # every copy held locally is sealed under the current generation
        for mem in (a, b):
            fpr = mem.keys_for(NS).fingerprint_bytes
            rows = mem._catalog.query("SELECT sealed FROM memories WHERE namespace = ?", (NS,))
            assert {envelope_fingerprint(bytes(r["sealed"])) for r in rows} == {fpr}
            assert not mem._log.tables.pending(NS)
    for name, head in (("fresh-a", head_a1), ("fresh-b", head_b1)):
        assert set(_restore_fresh(tmp_path, name, server.url, head)) == everything


def test_a_pending_entry_of_a_retired_generation_is_fetched_and_resealed(
        tmp_path: Path, server: RelayerServer) -> None:
    """A pending entry sealed under generation 0 is fetched with that generation's key
    once its blob is readable again (it stays derivable), and is re-sealed under the
    current generation like every other memory of the rotation."""
    with _machine(tmp_path, "a", server.url) as a:
        recs = [a.remember(f"fact {i} of A", namespace=NS) for i in range(4)]
        head_a0 = a.sync(NS).manifests[NS]
        victim = a.get(recs[0].id, namespace=NS).blob_id
    on = {"blocked": True}

    def hook(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if on["blocked"] and method == "GET" and f"/v1/blobs/{victim}" in path:
            return 451, BLOCKED
        return None

    with HookProxy(server.url, hook) as proxy, \
            _machine(tmp_path, "b", server.url, aggregator=proxy.url) as b:
        assert len(b.pull(head_a0, namespace=NS).unreadable) == 1
        assert b.rotate_key(NS).complete  # B alone rotates; A never does
        on["blocked"] = False
        report = b.sync(NS)  # retries the pending entry: generation 0's key opens it
        assert not report.errors, report.errors
        assert set(live(b, NS)) == {r.id for r in recs}
        assert not b._log.tables.pending(NS)
        row = b._catalog.query_one("SELECT sealed, blob_id FROM memories WHERE id = ?",
                                   (recs[0].id,))
        assert envelope_fingerprint(bytes(row["sealed"])) == b.keys_for(NS).fingerprint_bytes
        assert row["blob_id"] != victim  # re-published under the new key
        head = b.stats(NS).manifest_blob_id
    assert set(_restore_fresh(tmp_path, "fresh", server.url, head)) == {r.id for r in recs}


# -- item 3: rotating during an unfinished pull --------------------------------------------


def _half_pulled(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, set[str]]:
    """A publishes 12 facts; B's restore of its head is killed after 4: B keeps the marker."""
    with _machine(tmp_path, "a", url) as a:
        a.remember_many([f"fact {i} of A" for i in range(12)], namespace=NS)
        head = a.sync(NS).manifests[NS]
        ids = set(live(a, NS))
    monkeypatch.setattr(log_merging, "RESTORE_CHUNK", 4)
    with _machine(tmp_path, "b", url) as b:
        b.remember("B's own fact", namespace=NS)
        b.sync(NS)
        with pytest.raises(Interrupt):
            b.restore(NS, head, progress=kill_after(4), allow_unrelated=True)
        assert b._log.unfinished(NS) == "interrupted"
    return head, ids


def test_rotation_refuses_to_begin_during_an_unfinished_pull(
        tmp_path: Path, server: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    head, ids = _half_pulled(tmp_path, server.url, monkeypatch)
    with _machine(tmp_path, "b", server.url) as b:
        with pytest.raises(RestoreIncomplete, match="restore"):
            b.rotate_key(NS)
        assert b.keys_for(NS).generation == 0  # nothing switched
        assert rot.current_generation(b._catalog, NS) == 0
        assert b.restore(NS).complete  # the advice works
        report = b.rotate_key(NS)
        assert report.complete and report.generation == 1
        assert ids <= set(live(b, NS)) and len(live(b, NS)) == 13
        head_b = report.manifest_blob_id
    assert head_b is not None
    assert len(_restore_fresh(tmp_path, "fresh", server.url, head_b)) == 13


def test_a_data_dir_stuck_by_an_earlier_rotation_recovers(
        tmp_path: Path, server: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an earlier version left: a rotation begun during an unfinished pull (its
    manifest refused: RestoreIncomplete). `restore` raised WrongNamespace, every sync
    refused, `repair` said there was nothing to fix: the namespace never published again."""
    from walrus_mem._memory.repair_run import repair_data_dir

    head, ids = _half_pulled(tmp_path, server.url, monkeypatch)
    with _machine(tmp_path, "b", server.url) as b:
        with monkeypatch.context() as old:  # the earlier version had no such check
            old.setattr(rot, "_refuse_while_restoring", lambda memory, ns: None)
            stuck = b.rotate_key(NS)
        assert not stuck.complete and any("RestoreIncomplete" in e for e in stuck.errors)
        assert b.keys_for(NS).generation == 1
        settings = b.settings.model_copy(update={"master_key": SecretStr(MASTER_HEX)})
    # repair does not say "nothing to fix": it finishes the restore, then the rotation
    _, reports = repair_data_dir(settings, embedder=HashEmbedder(64))
    (report,) = [r for r in reports if r.namespace == NS]
    assert report.changed and not report.unrepaired, report
    assert any("restore" in f for f in report.finished) and any(
        "rotation" in f for f in report.finished), report.finished
    with _machine(tmp_path, "b", server.url) as b:
        assert b._log.unfinished(NS) is None
        assert rot.load_state(b._catalog, NS)["rotating"] is None
        assert ids <= set(live(b, NS)) and len(live(b, NS)) == 13
        sync = b.sync(NS)
        assert not sync.errors, sync.errors
        head_b = b.stats(NS).manifest_blob_id
    assert head_b is not None
    assert len(_restore_fresh(tmp_path, "fresh", server.url, head_b)) == 13


def test_restore_resumes_a_pull_interrupted_before_an_earlier_rotation(
        tmp_path: Path, server: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The advice sync and doctor give in that state (`restore`) works by itself too."""
    head, ids = _half_pulled(tmp_path, server.url, monkeypatch)
    with _machine(tmp_path, "b", server.url) as b:
        with monkeypatch.context() as old:
            old.setattr(rot, "_refuse_while_restoring", lambda memory, ns: None)
            assert not b.rotate_key(NS).complete
        sync = b.sync(NS)
        assert any("restore" in e for e in sync.errors) and not sync.manifests
        report = b.restore(NS)  # raised WrongNamespace
        assert report.complete and not report.failed
        sync = b.sync(NS)  # finishes the rotation, then publishes
        assert not sync.errors, sync.errors
        assert rot.load_state(b._catalog, NS)["rotating"] is None
        head_b = b.stats(NS).manifest_blob_id
        assert len(live(b, NS)) == 13
    assert head_b is not None
    assert len(_restore_fresh(tmp_path, "fresh", server.url, head_b)) == 13


# -- item 4: no manifest while a rotation's re-sealing is unfinished -----------------------


def _killed_rotation(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    with _machine(tmp_path, "a", url) as a:
        for start in range(0, 10, 5):
            a.remember_many([f"fact {i} of A" for i in range(start, start + 5)], namespace=NS)
        a.sync(NS)
        ids = set(live(a, NS))
    monkeypatch.setattr(rot, "RESEAL_CHUNK", 3)

    def die(done: int) -> None:
        raise Interrupt(f"killed after {done} re-sealed")

    with monkeypatch.context() as killed:
        killed.setattr(rot, "_progress_hook", die)
        with _machine(tmp_path, "a", url) as a, pytest.raises(Interrupt):
            a.rotate_key(NS)
    return ids


def _generations_listed(mem: Memory, head: str) -> set[int]:
    """The key generations of the blobs a head lists."""
    _, entries = mem._log.read(NS, head)
    out = set()
    for entry in entries:
        if entry.deleted:
            continue
        data = (mem.walrus.read_quilt_patch(entry.patch_id) if entry.patch_id
                else mem.walrus.read_blob(str(entry.blob_id)))
        fpr = envelope_fingerprint(data)
        out.update(g for g in range(4) if _old_keys(mem, g).fingerprint_bytes == fpr)
    return out


def test_sync_finishes_an_interrupted_rotation_before_publishing(
        tmp_path: Path, server: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """`keys rotate` killed after its first re-seal chunk, then `sync`: it published a
    generation-1 manifest listing 7 blobs sealed under generation 0; a fresh machine
    restored 3 of 10."""
    ids = _killed_rotation(tmp_path, server.url, monkeypatch)
    with _machine(tmp_path, "a", server.url) as a:
        assert rot.reseal_unfinished(a._catalog, NS)
        report = a.sync(NS)
        head = report.manifests[NS]
        assert set(_restore_fresh(tmp_path, "fresh", server.url, head)) == ids
        assert _generations_listed(a, head) == {1}
        assert not report.errors, report.errors
        assert rot.load_state(a._catalog, NS)["rotating"] is None  # finished, not bypassed


def test_no_manifest_path_publishes_during_an_unfinished_reseal(
        tmp_path: Path, server: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Manifests published outside sync (periodic, after forget) refuse with a typed error
    naming the command that resumes; doctor shows the state; sync refuses while another
    process holds the rotation."""
    from filelock import FileLock

    from walrus_mem._cli.doctor import _namespace_integrity
    from walrus_mem._recall.index import index_file_stem

    ids = _killed_rotation(tmp_path, server.url, monkeypatch)
    with _machine(tmp_path, "a", server.url, manifest_every=1) as a:
        before = a.stats(NS).manifest_blob_id
        with pytest.raises(RotationIncomplete, match="keys rotate"):
            a._publish_manifest(NS)
        a._flush(NS)  # the re-sealed chunk is published: a write now would be periodic
        late = a.remember("written while the rotation is unfinished", namespace=NS)
        assert late.status == "published"  # the write stands; only its manifest waits
        ids.add(late.id)
        forgotten = sorted(ids)[0]
        assert a.forget(forgotten, namespace=NS).manifest_blob_id is None
        assert a.stats(NS).manifest_blob_id == before
        checks = [c for c in _namespace_integrity(a, NS) if c.name == f"key rotation {NS}"]
        assert checks and checks[0].status == "fail" and "keys rotate" in checks[0].fix
        lock = FileLock(str(a.data_dir / "locks" / f"rotate-{index_file_stem(NS)}.lock"))
        with lock:  # another process is rotating right now
            busy = a.sync(NS)
        assert any("RotationIncomplete" in e for e in busy.errors) and not busy.manifests
        assert a.stats(NS).manifest_blob_id == before
        done = a.sync(NS)
        assert not done.errors and NS in done.manifests
        head = done.manifests[NS]
    assert set(_restore_fresh(tmp_path, "fresh", server.url, head)) == ids - {forgotten}


# -- item 12: delete_old deletes what the old key opens -----------------------------------


def _opens_with(data: bytes, keys: NamespaceKeys) -> bool:
    if data.startswith(GRANT_MAGIC):
        box = nacl.public.SealedBox(keys.signing_key.to_curve25519_private_key())
        try:
            box.decrypt(data[len(GRANT_MAGIC):])
        except nacl.exceptions.CryptoError:
            return False
        return True
    try:
        open_envelope(keys, data)
    except EnvelopeError:
        return False
    return True


def _everything_opened_by(srv: RelayerServer, mem: Memory, keys: NamespaceKeys) -> list[str]:
    """Every available blob and quilt patch on the relayer the given key opens."""
    with srv.client() as admin:
        blobs = admin.get("/_mock/blobs", params={"available": "true"}).json()["blobs"]
    found = []
    for blob in blobs:
        parts = ([mem.walrus.read_quilt_patch(p.patch_id)
                  for p in mem.walrus.list_quilt_patches(blob["blobId"])]
                 if blob["isQuilt"] else [mem.walrus.read_blob(blob["blobId"])])
        found += [blob["blobId"] for data in parts if _opens_with(data, keys)]
    return found


def test_delete_old_leaves_nothing_the_old_key_opens(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """It reported "complete, 2 deleted", yet the old key still opened the earlier version
    of an updated fact and the old manifests (memory ids, blob ids, timestamps)."""
    from walrus_mem._log import manifest as mf

    monkeypatch.setattr(mf, "INLINE_MAX", 4)  # so manifests have pages
    monkeypatch.setattr(mf, "CHANGED_INLINE_MAX", 2)
    with RelayerServer(tmp_path / "walrus") as srv, \
            _machine(tmp_path, "a", srv.url, mock_admin_token=srv.admin_token) as a, \
            _machine(tmp_path, "friend", srv.url, mock_admin_token=srv.admin_token) as friend:
        recs = a.remember_many([f"fact {i} of A" for i in range(6)], namespace=NS).records
        a.sync(NS)
        solo = a.remember("a fact stored alone", namespace=NS)
        a.update(recs[0].id, "fact 0 of A, corrected", namespace=NS)
        a.sync(NS)
        gift = friend.remember("a fact shared by a friend", namespace="friend")
        grant = friend.share([gift.id], to=a.keys_for(NS).verify_key.hex(), namespace="friend")
        a.accept(grant.reference, namespace=NS)
        a.sync(NS)
        old = _old_keys(a, 0)
        assert len(_everything_opened_by(srv, a, old)) > 8  # facts, versions, pages, grant
        report = a.rotate_key(NS, delete_old=True)
        assert report.complete and not report.kept_blobs, report.kept_blobs
        assert grant.blob_id in report.deleted_blobs
        assert _everything_opened_by(srv, a, old) == []
        texts = sorted(live(a, NS).values())
        assert "fact 0 of A, corrected" in texts and solo.text in texts
        head = report.manifest_blob_id
        assert head is not None
        assert sorted(_restore_fresh(tmp_path, "fresh", srv.url, head).values()) == texts


def test_delete_old_reports_what_the_backend_cannot_delete(tmp_path: Path,
                                                           server: RelayerServer) -> None:
    """Real Walrus (admin routes off) has no HTTP delete: every old blob is reported kept,
    with the reason, and the rotation still completes."""
    with _machine(tmp_path, "a", server.url) as a:
        a.remember_many([f"fact {i}" for i in range(3)], namespace=NS)
        a.sync(NS)
        report = a.rotate_key(NS, delete_old=True)
        assert report.complete and not report.deleted_blobs
        assert report.kept_blobs and all("no delete" in why or "HTTP API" in why
                                          for why in report.kept_blobs.values())
        assert set(report.old_blobs) <= set(report.kept_blobs)


# -- item 18a: quilt identifiers are not the memory ids ------------------------------------


def _identifiers(mem: Memory) -> set[str]:
    quilts = {str(r["blob_id"]) for r in mem._catalog.query(
        "SELECT blob_id FROM memories WHERE namespace = ? AND quilt_patch_id IS NOT NULL",
        (NS,))}
    return {p.identifier for q in quilts for p in mem.walrus.list_quilt_patches(q)}


def test_rotation_republishes_under_unlinkable_quilt_identifiers(
        tmp_path: Path, server: RelayerServer) -> None:
    with _machine(tmp_path, "a", server.url) as a:
        recs = a.remember_many([f"fact {i}" for i in range(8)], namespace=NS).records
        a.sync(NS)
        before = _identifiers(a)
        assert len(before) == 8
        assert not before & {r.id for r in recs}  # the public id is not the memory id
        assert a.rotate_key(NS).complete
        after = _identifiers(a)
        assert len(after) == 8 and not after & before  # nothing ties the generations
        assert not after & {r.id for r in recs}
        head = a.stats(NS).manifest_blob_id
        assert head is not None
    assert set(_restore_fresh(tmp_path, "fresh", server.url, head)) == {r.id for r in recs}


def test_quilt_identifier_is_a_keyed_hash_of_id_and_version() -> None:
    """Documented derivation (docs/keys.md): BLAKE2b-16(data=id ":" version, key=dedupe key,
    person="walrusmem.qident"), hex."""
    from walrus_mem.keys import MasterSeed

    keys = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), NS, 1)
    want = hashlib.blake2b(b"m-1:3", digest_size=16, key=keys.dedupe_key,
                           person=b"walrusmem.qident").hexdigest()
    assert keys.quilt_identifier("m-1", 3) == want
    assert keys.quilt_identifier("m-1", 4) != want
    assert NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), NS, 2).quilt_identifier(
        "m-1", 3) != want



def test_a_fact_stated_again_during_an_unfinished_rotation_does_not_stop_it(
        tmp_path: Path, server: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rotation killed after its first chunk; the user states again a fact not re-sealed
    yet (remember looks it up under the new key only, so it is stored as a new memory).
    Finishing the rotation re-sealed the old row into the same dedupe slot: a UNIQUE
    clash, and every later sync and rotation failed (found by the features stateful
    test). Now the old row becomes its twin and the rotation completes."""
    _killed_rotation(tmp_path, server.url, monkeypatch)
    with _machine(tmp_path, "a", server.url) as a:
        unsealed = [t for t in live(a, NS).values()
                    if t not in {"fact 0 of A", "fact 1 of A", "fact 2 of A"}]
        assert unsealed
        a.remember(unsealed[-1], namespace=NS)
        report = a.sync(NS)
        assert not report.errors, report.errors
        assert rot.load_state(a._catalog, NS)["rotating"] is None
        assert sorted(set(live(a, NS).values())) == sorted(f"fact {i} of A" for i in range(10))
