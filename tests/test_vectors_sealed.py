"""Issue 28 items 1 and 2: a fact's vector travels sealed with it, so restore and pull
insert it instead of re-embedding (when the model and its weights match); many facts
of one quilt come in one read of the quilt."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from relayer_mock.embedded import EmbeddedRelayer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem._log.bulk import envelope_prefix, find_sealed
from walrus_mem._log.lineage import content_digest
from walrus_mem._log.manifest import sealed_digest
from walrus_mem._recall.carried import (
    FIELD,
    VectorIdentity,
    carried_vector,
    identity,
    vector_field,
    weights_digest_of,
)
from walrus_mem.envelope import open_envelope, seal
from walrus_mem.keys import MasterSeed, NamespaceKeys
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

NS = "default"


class Counting(HashEmbedder):
    """HashEmbedder counting the texts it embeds."""

    def __init__(self, dim: int = 64, *, digest: str | None = "feature-hash-v1",
                 model_id: str = "test-hash-embedder") -> None:
        super().__init__(dim, model_id=model_id)
        self.weights_digest = digest  # type: ignore[assignment]
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().embed(texts)


@pytest.fixture
def walrus(tmp_path: Path) -> Iterator[EmbeddedRelayer]:
    relayer = EmbeddedRelayer(tmp_path / "walrus")
    yield relayer
    relayer.close()


def open_mem(path: Path, relayer: EmbeddedRelayer, embedder: object) -> Memory:
    base = relayer.base_url
    client = WalrusClient(base, [base], transport=relayer.transport, epochs=5)
    return Memory(make_settings(path), embedder=embedder, master_key=MASTER_HEX, walrus=client)


def written(tmp_path: Path, relayer: EmbeddedRelayer, embedder: object,
            texts: list[str]) -> tuple[Memory, str]:
    mem = open_mem(tmp_path / "writer", relayer, embedder)
    mem.remember_many(texts)
    assert not mem.sync().errors
    return mem, str(mem._parts.log.newest(NS)[0])


def texts(n: int, tag: str = "") -> list[str]:
    return [f"fact {tag}{i}: the {['red', 'blue', 'green'][i % 3]} notebook {i * 7}"
            for i in range(n)]


def catalog_vectors(mem: Memory) -> dict[str, bytes]:
    """Each memory's float16 vector as the catalog gives it (from the sealed copy when the
    row keeps none itself)."""
    ids = {int(r[0]): str(r[1]) for r in mem._parts.catalog.query(
        "SELECT key, id FROM memories WHERE namespace = ?", (NS,))}
    return {ids[k]: v.astype("<f2").tobytes()
            for k, v in mem._parts.catalog.vectors_by_keys(NS, list(ids)).items()}


def test_a_fact_carries_its_index_vector_sealed(tmp_path: Path, walrus) -> None:
    mem, _ = written(tmp_path, walrus, HashEmbedder(64), texts(3))
    keys = mem.keys_for(NS)
    vectors = catalog_vectors(mem)
    for mid, sealed in mem._parts.catalog.query(
            "SELECT id, sealed FROM memories WHERE namespace = ?", (NS,)):
        record = open_envelope(keys, bytes(sealed))
        vec = record[FIELD]
        assert vec["model"] == "test-hash-embedder-64" and vec["dim"] == 64
        assert vec["weights"] == "feature-hash-v1" and vec["dtype"] == "f16"
        raw = vec["data"]
        assert isinstance(raw, bytes)  # raw after the JSON (envelope version 2)
        assert bytes(sealed)[4] == 2 and len(bytes(sealed)) == 512 + 128 + 130  # not 1,150
        assert raw == vectors[str(mid)]  # exactly the float16 the index holds
        # nothing of it is in the clear: neither the raw float16 nor its base64
        assert raw[:16] not in bytes(sealed)
        assert base64.b64encode(raw)[:24] not in bytes(sealed)
    mem.close()


def test_restore_inserts_sealed_vectors_without_embedding(tmp_path: Path, walrus) -> None:
    writer, head = written(tmp_path, walrus, HashEmbedder(64), texts(40))
    reader_embedder = Counting(64)
    reader = open_mem(tmp_path / "reader", walrus, reader_embedder)
    report = reader.restore(NS, head)
    assert report.restored == 40 and report.reembedded == 0
    assert reader_embedder.texts == 0  # not one text embedded again
    assert catalog_vectors(reader) == {
        mid: v for mid, v in catalog_vectors(writer).items()}
    hits = reader.recall("blue notebook", k=3)
    assert hits and "blue" in hits[0].text
    writer.close()
    reader.close()


def test_pull_inserts_sealed_vectors_of_new_and_updated_memories(tmp_path: Path,
                                                                 walrus) -> None:
    writer, head = written(tmp_path, walrus, HashEmbedder(64), texts(5))
    reader_embedder = Counting(64)
    reader = open_mem(tmp_path / "reader", walrus, reader_embedder)
    reader.restore(NS, head)
    first = writer.list(limit=10)
    writer.update(first[0].id, text="the yellow notebook moved to the attic")
    writer.update(first[1].id, metadata={"room": "attic"})  # the same text: its vector again
    writer.remember_many(texts(3, "new "))
    assert not writer.sync().errors
    pulled = reader.pull(str(writer._parts.log.newest(NS)[0]), namespace=NS)
    assert (pulled.added, pulled.updated, pulled.reembedded) == (3, 2, 0)
    assert reader_embedder.texts == 0
    assert catalog_vectors(reader) == catalog_vectors(writer)
    writer.close()
    reader.close()


@pytest.mark.parametrize(("reader", "reason"), [
    (Counting(64, digest="other-weights"), "made by other weights"),
    (Counting(64, model_id="another-model"), "made by test-hash-embedder-64 (dim 64)"),
    (Counting(64, digest=None), "names no weights digest"),
])
def test_another_model_or_weights_re_embeds_and_says_why(tmp_path: Path, walrus,
                                                         reader: Counting, reason: str,
                                                         caplog: pytest.LogCaptureFixture,
                                                         ) -> None:
    writer, head = written(tmp_path, walrus, HashEmbedder(64), texts(12))
    mem = open_mem(tmp_path / "reader", walrus, reader)
    report = mem.restore(NS, head)
    assert report.restored == 12 and report.reembedded == 12 and reader.texts == 12
    (why, count), = report.reembedded_because.items()
    assert count == 12 and reason in why, why
    assert any("re-embedding fetched memories" in r.getMessage() for r in caplog.records)
    # re-embedded with the reader's own model: recall works
    assert mem.recall("green notebook", k=1)
    writer.close()
    mem.close()


def test_facts_sealed_with_the_base64_vector_still_restore_without_embedding(
        tmp_path: Path, walrus, monkeypatch: pytest.MonkeyPatch) -> None:
    """Facts sealed between issue 28 item 1 and the footprint round carry their vector
    as base64 inside the JSON (envelope version 1): a restore still inserts it."""
    import walrus_mem._memory.records as records

    def as_before(ident: VectorIdentity, vector: object) -> dict[str, object]:
        field = vector_field(ident, vector)  # type: ignore[arg-type]
        return {**field, "data": base64.b64encode(field["data"]).decode("ascii")}

    monkeypatch.setattr(records, "vector_field", as_before)
    writer, head = written(tmp_path, walrus, HashEmbedder(64), texts(20))
    monkeypatch.undo()
    for (sealed,) in writer._parts.catalog.query("SELECT sealed FROM memories"):
        assert bytes(sealed)[4] == 1 and isinstance(
            open_envelope(writer.keys_for(NS), bytes(sealed))[FIELD]["data"], str)
    reader_embedder = Counting(64)
    reader = open_mem(tmp_path / "reader", walrus, reader_embedder)
    report = reader.restore(NS, head)
    assert report.restored == 20 and report.reembedded == 0 and reader_embedder.texts == 0
    assert catalog_vectors(reader) == catalog_vectors(writer)
    writer.close()
    reader.close()


def test_blobs_sealed_before_vectors_travelled_still_restore(tmp_path: Path,
                                                             walrus) -> None:
    """Facts sealed as before issue 28 (no ``vec``: the writer's embedder names no
    weights, the record shape every older version sealed) restore by re-embedding."""
    writer, head = written(tmp_path, walrus, Counting(64, digest=None), texts(20))
    keys = writer.keys_for(NS)
    for (sealed,) in writer._parts.catalog.query("SELECT sealed FROM memories"):
        record = open_envelope(keys, bytes(sealed))
        assert FIELD not in record and set(record) == {
            "id", "kind", "format", "version", "text", "metadata", "category",
            "importance", "created_at", "updated_at", "expires_at"}
    reader_embedder = Counting(64)
    reader = open_mem(tmp_path / "reader", walrus, reader_embedder)
    report = reader.restore(NS, head)
    assert report.restored == 20 and report.reembedded == 20 and reader_embedder.texts == 20
    assert report.complete
    assert catalog_vectors(reader) == catalog_vectors(writer)  # the same model: same vectors
    writer.close()
    reader.close()


def test_a_fact_too_large_to_carry_its_vector_is_sealed_without(tmp_path: Path, walrus,
                                                               monkeypatch) -> None:
    from walrus_mem._memory.publisher import Publisher

    monkeypatch.setattr(Publisher, "max_plaintext", lambda self: 1600)
    mem = open_mem(tmp_path / "writer", walrus, HashEmbedder(384))  # its vec: ~1,160 bytes
    small, big = mem.remember("a short fact"), mem.remember("word " * 200)
    keys = mem.keys_for(NS)
    for record, carries in ((small, True), (big, False)):
        sealed = mem._parts.catalog.sealed_of(NS, record.id)
        assert sealed is not None
        assert (FIELD in open_envelope(keys, bytes(sealed[0]))) is carries
    mem.close()


def test_content_digest_leaves_the_vector_out() -> None:
    record = {"id": "m", "kind": "fact", "version": 1, "text": "t"}
    ident = VectorIdentity("m", "w", 4)
    vec = vector_field(ident, np.array([0.5, 0.5, 0.5, 0.5], np.float32))
    assert content_digest({**record, FIELD: vec}) == content_digest(record)


def test_a_malformed_carried_vector_is_never_used() -> None:
    ident = VectorIdentity("m", "w", 4)
    good = vector_field(ident, np.array([0.5, 0.5, 0.5, 0.5], np.float32))
    assert carried_vector({FIELD: good}, ident) == np.full(4, 0.5, "<f2").tobytes()
    bad = [
        {**good, "data": "not base64!"},
        {**good, "data": base64.b64encode(b"\0" * 8).decode()},  # zero vector
        {**good, "data": base64.b64encode(np.full(4, np.nan, "<f2").tobytes()).decode()},
        {**good, "data": base64.b64encode(b"\x01" * 6).decode()},  # wrong length
        {**good, "data": b"\x01" * 6},  # raw, wrong length
        {**good, "data": b"\0" * 8},  # raw zero vector
        {**good, "data": 12},
        {**good, "dim": 5}, {**good, "dtype": "f32"}, {**good, "weights": "v"},
        "a string",
    ]
    for vec in bad:
        assert carried_vector({FIELD: vec}, ident) is None
    assert carried_vector({}, ident) is None
    assert carried_vector({FIELD: good}, None) is None


def test_identity_needs_a_weights_digest() -> None:
    assert identity(HashEmbedder(8)) == VectorIdentity("test-hash-embedder-8",
                                                       "feature-hash-v1", 8)
    assert identity(Counting(8, digest=None)) is None


def test_weights_digest_names_the_files_and_is_cached(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"weights" * 100)
    (model / "1_Pooling" / "config.json").write_text("{}")
    (model / "README.md").write_text("not part of it")
    cache = tmp_path / "cache"
    first = weights_digest_of(model, cache)
    assert weights_digest_of(model, cache) == first and (cache / "weights-digests.json").exists()
    (model / "README.md").write_text("changed")
    assert weights_digest_of(model, None) == first
    (model / "model.safetensors").write_bytes(b"weights" * 101)
    assert weights_digest_of(model, cache) != first


# -- item 2: many facts per request ------------------------------------------------------


def _envelopes(n: int) -> tuple[NamespaceKeys, list[bytes]]:
    keys = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), NS)
    # version 1 and version 2 (a raw vector after the JSON) alternately
    return keys, [seal(keys, {"id": f"m{i}", "kind": "fact", "text": "x" * (i * 40),
                              **({"vec": {"data": bytes([i + 1]) * (64 + i)}} if i % 2 else {})})
                  for i in range(n)]


def test_find_sealed_finds_adjoining_and_framed_envelopes() -> None:
    keys, sealed = _envelopes(6)
    prefix = envelope_prefix(keys.fingerprint_bytes)
    wanted = {sealed_digest(s) for s in sealed[:5]}  # the sixth is not asked for
    adjoining = b"header" + b"".join(sealed)
    assert find_sealed(adjoining, prefix, wanted) == {sealed_digest(s): s for s in sealed[:5]}
    framed = b"".join(b"\x07" * (i + 3) + s + b"\0" * 11 for i, s in enumerate(sealed))
    assert find_sealed(framed, prefix, wanted) == {sealed_digest(s): s for s in sealed[:5]}


def test_find_sealed_takes_nothing_it_cannot_match_by_digest() -> None:
    keys, sealed = _envelopes(3)
    prefix = envelope_prefix(keys.fingerprint_bytes)
    wanted = {sealed_digest(s) for s in sealed}
    # interleaved (a layout where a patch's bytes are not contiguous), or altered
    interleaved = b"".join(bytes(x) for x in zip(*(s[:300] for s in sealed), strict=True))
    assert find_sealed(interleaved, prefix, wanted) == {}
    altered = bytearray(b"".join(sealed))
    altered[len(sealed[0]) // 2] ^= 1
    found = find_sealed(bytes(altered), prefix, wanted)
    assert sealed_digest(sealed[0]) not in found and len(found) == 2


def _reads(relayer: EmbeddedRelayer) -> dict[str, int]:
    with relayer.client() as admin:
        counters = admin.get("/_mock/stats").json()["counters"]
    return {route: int(counters.get(f"requests.{route}", 0))
            for route in ("get_blob", "get_by_quilt_patch_id")}


def test_restore_reads_a_quilt_once_for_its_facts(tmp_path: Path, walrus) -> None:
    writer, head = written(tmp_path, walrus, HashEmbedder(64), texts(100))
    before = _reads(walrus)
    reader = open_mem(tmp_path / "reader", walrus, HashEmbedder(64))
    report = reader.restore(NS, head)
    after = _reads(walrus)
    assert report.restored == 100 and report.complete
    assert after["get_by_quilt_patch_id"] - before["get_by_quilt_patch_id"] == 0
    assert after["get_blob"] - before["get_blob"] <= 3  # the manifest root, the fact quilt
    assert {m.text for m in reader.list(limit=200)} == set(texts(100))
    writer.close()
    reader.close()


def test_a_quilt_served_wrong_falls_back_to_one_read_per_fact(tmp_path: Path, walrus,
                                                              monkeypatch) -> None:
    writer, head = written(tmp_path, walrus, HashEmbedder(64), texts(40))
    reader = open_mem(tmp_path / "reader", walrus, HashEmbedder(64))
    real = WalrusClient.read_blob
    quilt = writer.list(limit=1)[0].blob_id

    def scrambled(self, blob_id, **kw):  # an aggregator serving another layout
        data = real(self, blob_id, **kw)
        return data[::-1] if blob_id == quilt else data

    monkeypatch.setattr(WalrusClient, "read_blob", scrambled)
    before = _reads(walrus)
    report = reader.restore(NS, head)
    assert report.restored == 40 and report.complete
    assert _reads(walrus)["get_by_quilt_patch_id"] - before["get_by_quilt_patch_id"] == 40
    writer.close()
    reader.close()


def test_nothing_of_the_vector_reaches_storage(tmp_path: Path, walrus) -> None:
    mem, _ = written(tmp_path, walrus, HashEmbedder(64), texts(2))
    vec = catalog_vectors(mem)
    with walrus.client() as admin:
        blobs = admin.get("/_mock/blobs").json()["blobs"]
        stored = b"".join(admin.get(f"/v1/blobs/{b['blobId']}").content for b in blobs)
    for raw in vec.values():
        assert raw[:12] not in stored and base64.b64encode(raw)[:16] not in stored
    mem.close()


def test_the_known_answer_fact_with_vector_decodes_to_its_vector() -> None:
    from tests.helpers_keys import vectors

    ident = VectorIdentity("sentence-transformers/all-MiniLM-L6-v2",
                           "7cdf38ecb8fe8399309ec2c49a7d9df8", 384)
    found = {}
    # base64 in the JSON (version 1, as sealed before the footprint round) and raw after
    # it (version 2): both decode to the same float16 bytes
    for name, size in (("fact-with-vector", 2174), ("fact-with-raw-vector", 1410)):
        (env,) = [e for e in vectors()["envelopes"] if e["name"] == name]
        keys = NamespaceKeys.derive(MasterSeed.from_hex(vectors()["master_seed_hex"]),
                                    env["keys"]["namespace"])
        record = open_envelope(keys, bytes.fromhex(env["envelope_hex"]))
        assert env["envelope_size"] == size
        raw = carried_vector(record, ident)
        assert raw is not None
        values = np.frombuffer(raw, "<f2").astype(np.float64)
        expected = np.cos(0.37 * np.arange(384) + 0.5)
        assert np.allclose(values, expected / np.linalg.norm(expected), atol=1e-3)
        found[name] = raw
    assert found["fact-with-vector"] == found["fact-with-raw-vector"]
