"""Key rotation: re-seal, re-publish, new manifest, restore with the new key, resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_cli import invoke, invoke_json
from tests.helpers_memory import MASTER_HEX, MOCK_ADMIN_TOKEN, make_settings
from walrus_mem import Memory
from walrus_mem._memory import rotation as rot
from walrus_mem.envelope import envelope_fingerprint, open_envelope
from walrus_mem.errors import PublisherUnavailable, WrongNamespace
from walrus_mem.keys import MasterSeed, NamespaceKeys
from walrus_mem.testing import HashEmbedder

FACTS = [f"rotation fact {i} about the blue heron" for i in range(12)]


def _memory(data: Path, server: RelayerServer | None = None, **kw) -> Memory:
    extra = {} if server is None else {"publisher_url": server.url, "aggregator_urls": server.url}
    return Memory(make_settings(data, config_file=None, **extra, **kw),
                  embedder=HashEmbedder(64), master_key=MASTER_HEX)


@pytest.fixture
def server(tmp_path: Path):
    with RelayerServer(tmp_path / "walrus", admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def _blobs_of(mem: Memory, ns: str) -> list[bytes]:
    out = []
    for rec in mem.list(ns, limit=1000):
        data = (mem.walrus.read_quilt_patch(rec.quilt_patch_id) if rec.quilt_patch_id
                else mem.walrus.read_blob(rec.blob_id))
        out.append(data)
    return out


def test_rotate_then_restore_on_a_fresh_machine_over_http(tmp_path, server):
    old_keys = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), "notes")
    with _memory(tmp_path / "a", server) as mem:
        mem.remember_many(FACTS[:10], namespace="notes")
        solo = mem.remember(FACTS[10], namespace="notes")
        mem.sync("notes")
        before = {r.id: r.blob_id for r in mem.list("notes", limit=100)}
        report = mem.rotate_key("notes")
        assert report.complete and report.generation == 1 and report.old_generation == 0
        assert report.resealed == 11 and report.published == 11
        assert set(report.old_blobs) == set(before.values())
        assert report.manifest_blob_id == mem.stats("notes").manifest_blob_id
        after = {r.id: r.blob_id for r in mem.list("notes", limit=100)}
        assert after.keys() == before.keys()
        assert not set(after.values()) & set(before.values())  # all re-published
        new_fpr = mem.keys_for("notes").fingerprint_bytes
        assert new_fpr != old_keys.fingerprint_bytes
        for data in _blobs_of(mem, "notes"):
            assert envelope_fingerprint(data) == new_fpr
            with pytest.raises(WrongNamespace):  # the old key opens nothing published after
                open_envelope(old_keys, data)
        root = mem.walrus.read_blob(report.manifest_blob_id.split(".")[0])  # a head reference
        with pytest.raises(WrongNamespace):
            open_envelope(old_keys, root)
        # the old generation's blobs stay readable with the old key during the transition
        assert open_envelope(old_keys, mem.walrus.read_blob(solo.blob_id))["text"] == FACTS[10]
        # writes after the rotation use the new key; dedupe still works across it
        assert mem.remember(FACTS[0], namespace="notes").deduplicated
        late = mem.remember(FACTS[11], namespace="notes")
        assert envelope_fingerprint(mem.walrus.read_blob(late.blob_id)) == new_fpr
        mem.sync("notes")
        manifest = mem.stats("notes").manifest_blob_id
    # a fresh machine with the same master key finds generation 1 by itself
    with _memory(tmp_path / "fresh", server) as fresh:
        restored = fresh.restore("notes", manifest)
        assert restored.restored == 12 and not restored.failed
        assert fresh.keys_for("notes").generation == 1
        hits = fresh.recall("blue heron", namespace="notes", k=20, min_score=0)
        assert len(hits) == 12
        assert fresh.rotate_key("notes").generation == 2  # and it can rotate further


def test_independent_agent_rotation(tmp_path):
    agents = {"bot": {"key": "a1" * 32}}
    with Memory(make_settings(tmp_path / "d", config_file=None, agents=agents),
                embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        rec = mem.remember("agent fact before rotation", namespace="bot")
        old = mem.keys_for("bot")
        report = mem.rotate_key("bot")
        assert report.complete
        new = mem.keys_for("bot")
        assert new.independent and new.generation == 1 and new.verify_key != old.verify_key
        data = mem.walrus.read_blob(mem.get(rec.id, namespace="bot").blob_id)
        with pytest.raises(WrongNamespace):
            open_envelope(old, data)
        assert mem.get(rec.id, namespace="bot", verify=True).text == rec.text


def test_killed_rotation_resumes(tmp_path, monkeypatch):
    data = tmp_path / "d"
    with _memory(data) as mem:
        mem.remember_many(FACTS, namespace="notes")
        mem.sync("notes")
    monkeypatch.setattr(rot, "RESEAL_CHUNK", 5)
    calls = []

    def die(done: int) -> None:
        calls.append(done)
        raise KeyboardInterrupt("killed")  # like a kill between two committed chunks

    monkeypatch.setattr(rot, "_progress_hook", die)
    with _memory(data) as mem, pytest.raises(KeyboardInterrupt):
        mem.rotate_key("notes")
    assert calls == [5]
    monkeypatch.setattr(rot, "_progress_hook", lambda done: None)
    with _memory(data) as mem:  # a new process: the generation switch was recorded
        assert mem.keys_for("notes").generation == 1
        mem.remember("written between kill and resume", namespace="notes")
        report = mem.rotate_key("notes")
        assert report.complete and report.generation == 1
        assert report.resealed == 7  # the 5 of the first run are not done twice
        fpr = mem.keys_for("notes").fingerprint_bytes
        assert all(envelope_fingerprint(d) == fpr for d in _blobs_of(mem, "notes"))
        assert len(mem.list("notes", limit=100)) == 13


def test_rotation_with_the_publisher_down_stays_in_progress(tmp_path, monkeypatch):
    data = tmp_path / "d"
    with _memory(data) as mem:
        mem.remember_many(FACTS[:4], namespace="notes")
        mem.sync("notes")

        def down(*args, **kwargs):
            raise PublisherUnavailable("publisher down (test)")

        with monkeypatch.context() as patched:
            patched.setattr(mem.walrus, "store_quilt", down)
            patched.setattr(mem.walrus, "store_blob", down)
            first = mem.rotate_key("notes")
        assert not first.complete and first.resealed == 4 and first.errors
        mem._publisher.breaker_until = 0.0
        second = mem.rotate_key("notes")
        assert second.complete and second.resealed == 0 and second.published == 4
        assert second.generation == 1  # the same rotation finished, not a second one


def test_cli_rotate_and_delete_old(tmp_path, monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    for fact in FACTS[:3]:
        invoke(["-n", "notes", "remember", fact])
    old = {r["blob_id"] for r in invoke_json(["-n", "notes", "list"])["memories"]}
    out = invoke_json(["-n", "notes", "keys", "rotate", "--delete-old"])
    assert out["complete"] and out["generation"] == 1
    assert set(out["deleted_blobs"]) == old  # embedded relayer: deletable blobs
    texts = sorted(r["text"] for r in invoke_json(["-n", "notes", "list"])["memories"])
    assert texts == sorted(FACTS[:3])
    again = invoke(["-n", "notes", "keys", "rotate"])
    assert "generation 1 -> 2" in again.stdout


KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
from walrus_mem import Memory
from walrus_mem._memory import rotation
from walrus_mem.testing import HashEmbedder
from tests.helpers_memory import MASTER_HEX, make_settings

rotation.RESEAL_CHUNK = 4
rotation._progress_hook = lambda done: os.kill(os.getpid(), signal.SIGKILL)
url = {"publisher_url": sys.argv[2], "aggregator_urls": sys.argv[2]} if sys.argv[2:] else {}
mem = Memory(make_settings(Path(sys.argv[1]), config_file=None, **url),
             embedder=HashEmbedder(64), master_key=MASTER_HEX)
mem.rotate_key("notes")
"""


@pytest.mark.parametrize("over_http", [False, True], ids=["embedded", "http"])
def test_sigkill_during_rotation_then_resume(tmp_path, over_http, request):
    import os
    import signal
    import subprocess
    import sys

    srv = request.getfixturevalue("server") if over_http else None
    data = tmp_path / "d"
    with _memory(data, srv) as mem:
        mem.remember_many(FACTS, namespace="notes")
        mem.sync("notes")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(data),
                           *([srv.url] if srv else [])], env=env, cwd=root,
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    with _memory(data, srv) as mem:
        report = mem.rotate_key("notes")
        assert report.complete and report.generation == 1 and report.resealed == 8
        fpr = mem.keys_for("notes").fingerprint_bytes
        assert all(envelope_fingerprint(d) == fpr for d in _blobs_of(mem, "notes"))
        assert sorted(r.text for r in mem.list("notes", limit=100)) == sorted(FACTS)
        head = report.manifest_blob_id
    if srv is not None:  # a fresh machine restores the resumed rotation's manifest
        with _memory(tmp_path / "fresh", srv) as fresh:
            assert fresh.restore("notes", head).restored == len(FACTS)
            assert fresh.keys_for("notes").generation == 1


def test_generation_derivation_matches_the_documented_formula():
    import hashlib

    import nacl.signing

    m = bytes.fromhex(MASTER_HEX)
    n = b"notes#3"
    keys = NamespaceKeys.derive(MasterSeed(m), "notes", 3)
    seed = hashlib.blake2b(n, digest_size=32, key=m, person=b"walrusmem.sign").digest()
    assert keys.verify_key == bytes(nacl.signing.SigningKey(seed).verify_key)
    assert keys.sealing_key == hashlib.blake2b(n, digest_size=32, key=m,
                                               person=b"walrusmem.seal").digest()
    s = bytes(range(100, 132))
    agent = NamespaceKeys.from_agent_key(s, "notes", 2)
    iseed = hashlib.blake2b(b"notes#2", digest_size=32, key=s, person=b"walrusmem.isign").digest()
    assert agent.verify_key == bytes(nacl.signing.SigningKey(iseed).verify_key)
    assert NamespaceKeys.derive(MasterSeed(m), "notes", 0) == NamespaceKeys.derive(
        MasterSeed(m), "notes")
    assert NamespaceKeys.from_agent_key(s, "notes").verify_key == bytes(
        nacl.signing.SigningKey(s).verify_key)


def test_a_second_machine_follows_a_rotation(tmp_path, server):
    with _memory(tmp_path / "a", server) as a:
        a.remember_many(FACTS[:5], namespace="notes")
        a.sync("notes")
        head0 = a.stats("notes").manifest_blob_id
        with _memory(tmp_path / "b", server) as b:
            assert b.restore("notes", head0).restored == 5
            assert a.rotate_key("notes").complete
            a.remember(FACTS[5], namespace="notes")
            a.sync("notes")
            head1 = a.stats("notes").manifest_blob_id
            # sealed under a generation b does not use yet: b follows the rotation (re-seals
            # its copies under generation 1), then merges (tests/test_follow_rotation.py)
            assert b.pull(head1, namespace="notes").key_generation == 1
            assert rot.current_generation(b._catalog, "notes") == 1
            assert sorted(r.text for r in b.list("notes", limit=100)) == sorted(FACTS[:6])
        with _memory(tmp_path / "c", server) as c:  # `keys rotate` first still works too
            assert c.restore("notes", head0).restored == 5
            assert c.rotate_key("notes").generation == 1  # the same generation as a's
            c.pull(head1, namespace="notes")
            assert sorted(r.text for r in c.list("notes", limit=100)) == sorted(FACTS[:6])


def test_a_poisoned_batch_does_not_block_rotation(tmp_path, server):
    """A memory the publisher refuses for good (outbox_poison.py) kept every rotation
    'in progress' forever: the rotation waited for an outbox that never empties."""
    from tests.helpers_log import live, machine
    from tests.helpers_proxy import HookProxy

    capped = HookProxy(server.url, lambda m, p, b: (413, b"payload too large")
                       if m == "PUT" and len(b) > 40_000 else None)
    big = "a long pasted document " + "lorem ipsum " * 4000
    with capped, machine(tmp_path / "a", capped.url, aggregator=server.url) as a:
        small = a.remember_many(FACTS[:4], namespace="notes")
        a.sync("notes")
        stuck = a.remember(big, namespace="notes")
        for _ in range(3):
            a.sync("notes")  # refused for good three times: poisoned
        first = a.rotate_key("notes")
        assert first.complete and first.resealed == 5 and first.published == 4
        assert any("poisoned" in e and stuck.id in e for e in first.errors), first.errors
        assert first.manifest_blob_id == a.stats("notes").manifest_blob_id
        assert a.get(stuck.id, namespace="notes").status == "queued"  # kept, under the new key
        fpr = a.keys_for("notes").fingerprint_bytes
        queued = a._catalog.query_one("SELECT sealed FROM memories WHERE id = ?", (stuck.id,))
        assert envelope_fingerprint(bytes(queued["sealed"])) == fpr
        assert a.rotate_key("notes").generation == 2  # the next rotation is a new one
        head = a.stats("notes").manifest_blob_id
    with _memory(tmp_path / "fresh", server) as fresh:  # what was published is restorable
        assert fresh.restore("notes", head).restored == 4
        assert set(live(fresh, "notes")) == {r.id for r in small.records}
