"""Sharing by grant: A shares 3 of 10 memories with B; B recalls exactly those; C cannot."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_cli import invoke, invoke_json
from tests.helpers_memory import MASTER_HEX, OTHER_MASTER_HEX, make_settings
from walrus_mem import GrantError, Memory
from walrus_mem._memory.grants import GRANT_MAGIC, parse_reference
from walrus_mem.errors import AccessDenied, MalformedKey, VerificationFailed
from walrus_mem.testing import HashEmbedder

B_AGENT_KEY = "b2" * 32
C_AGENT_KEY = "c3" * 32
FACTS = [f"project falcon detail number {i} is confidential" for i in range(10)]


def _memory(data: Path, server: RelayerServer | None, master: str, **agents: str) -> Memory:
    extra = {} if server is None else {"publisher_url": server.url, "aggregator_urls": server.url}
    settings = make_settings(data, config_file=None,
                             agents={name: {"key": key} for name, key in agents.items()}, **extra)
    return Memory(settings, embedder=HashEmbedder(64), master_key=master)


@pytest.fixture
def server(tmp_path: Path):
    with RelayerServer(tmp_path / "walrus") as srv:
        yield srv


def test_share_three_of_ten_over_http(tmp_path, server):
    with _memory(tmp_path / "a", server, MASTER_HEX) as a:
        records = a.remember_many(FACTS, namespace="alice").records
        chosen = [records[i] for i in (1, 4, 7)]
        with _memory(tmp_path / "b", server, OTHER_MASTER_HEX, bob=B_AGENT_KEY) as b:
            bob_public = b.keys_for("bob").verify_key.hex()
            grant = a.share([r.id for r in chosen], to=bob_public, namespace="alice")
            assert grant.count == 3 and grant.recipient_fingerprint == b.keys_for("bob").fingerprint
            # the blob on Walrus holds no plaintext and names nobody
            raw = a.walrus.read_blob(grant.blob_id)
            assert raw.startswith(GRANT_MAGIC)
            assert b"falcon" not in raw and bytes.fromhex(bob_public) not in raw
            assert a.keys_for("alice").verify_key not in raw

            result = b.accept(grant.reference, namespace="bob")
            assert result.stored == 3
            got = sorted(r.text for r in b.list("bob"))
            assert got == sorted(r.text for r in chosen)
            hits = b.recall("project falcon detail", namespace="bob", k=10, min_score=0)
            assert {h.text for h in hits} == {r.text for r in chosen}
            assert all(r.metadata["shared_from"] == a.keys_for("alice").fingerprint
                       for r in b.list("bob"))
            again = b.accept(grant.reference, namespace="bob")  # idempotent
            assert again.replayed and len(b.list("bob")) == 3

        # a third agent (and the sender's own other namespace) cannot open it
        with _memory(tmp_path / "c", server, OTHER_MASTER_HEX, carol=C_AGENT_KEY) as c:
            with pytest.raises(GrantError, match="only its recipient"):
                c.accept(grant.reference, namespace="carol")
            assert c.list("carol") == []
        with pytest.raises(GrantError):
            a.accept(grant.reference, namespace="alice-notes")


def test_share_and_accept_on_the_embedded_relayer_via_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)
    ids = [invoke_json(["-n", "alice", "remember", f"note {i} about otters"])["id"]
           for i in range(4)]
    bob_key = invoke_json(["-n", "bob", "remember", "bob exists"])  # creates bob's namespace
    assert bob_key["namespace"] == "bob"
    rows = invoke_json(["keys", "export-public"])["namespaces"]
    public = {row["namespace"]: row["verify_key"] for row in rows}
    ref = invoke(["-n", "alice", "share", ids[0], ids[2], "--to", public["bob"]]).stdout.strip()
    assert parse_reference(ref)
    out = invoke_json(["-n", "bob", "accept", ref])
    assert out["stored"] == 2
    again = invoke(["-n", "bob", "accept", ref]).stdout  # said "2 stored" again
    assert "already accepted" in again and "nothing stored" in again and "2 stored" not in again
    texts = {r["text"] for r in invoke_json(["-n", "bob", "list"])["memories"]}
    assert texts == {"bob exists", "note 0 about otters", "note 2 about otters"}
    bad = invoke(["-n", "carol", "accept", ref], expect=1)
    assert "GrantError" in bad.stderr and "otters" not in bad.stdout + bad.stderr


def test_share_needs_the_namespace_key_and_a_valid_recipient(tmp_path):
    with _memory(tmp_path / "a", None, MASTER_HEX) as a:
        rec = a.remember("shared secret", namespace="alice")
        public = a.keys_for("bob").verify_key.hex()
        for bad in ("00" * 31, "zz" * 32, "", "not base64 at all!"):
            with pytest.raises(MalformedKey):
                a.share([rec.id], to=bad, namespace="alice")
    with _memory(tmp_path / "a", None, OTHER_MASTER_HEX) as other, \
            pytest.raises(AccessDenied):
        other.share([rec.id], to=public, namespace="alice")


def test_tampered_or_malformed_references_are_refused(tmp_path):
    settings = make_settings(tmp_path / "a", config_file=None, read_deadline=1.0)
    with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as a:
        rec = a.remember("fact to share", namespace="alice")
        grant = a.share([rec.id], to=a.keys_for("bob").verify_key.hex(), namespace="alice")
        prefix, blob_id, digest = grant.reference.split(":")
        for bad in ("wmgrant1:x", "nope:" + blob_id + ":" + digest, f"{prefix}:{blob_id}:zz"):
            with pytest.raises(GrantError, match="not a grant reference"):
                a.accept(bad, namespace="bob")
        wrong_digest = f"{prefix}:{blob_id}:{'0' * 64}"
        with pytest.raises(VerificationFailed):
            a.accept(wrong_digest, namespace="bob")
        assert a.accept(grant.reference, namespace="bob").stored == 1


def test_grant_sealed_before_the_recipient_rotated_still_opens(tmp_path, monkeypatch):
    with _memory(tmp_path / "a", None, MASTER_HEX) as a:
        rec = a.remember("shared before the rotation", namespace="alice")
        before = a.share([rec.id], to=a.keys_for("bob").verify_key.hex(), namespace="alice")
        assert a.rotate_key("bob").complete
        after = a.share([rec.id], to=a.keys_for("bob").verify_key.hex(), namespace="alice")
        assert a.accept(before.reference, namespace="bob").stored == 1  # old generation
        assert a.accept(after.reference, namespace="bob").records[0].deduplicated
    # the CLI lists the rotated namespace's current public key (what others share to)
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    rows = invoke_json(["--data-dir", str(tmp_path / "a"), "keys"])["namespaces"]
    bob = next(r for r in rows if r["namespace"] == "bob")
    assert bob["generation"] == 1 and "warning" not in bob
