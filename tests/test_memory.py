"""Memory: remember / recall / get / list against the embedded relayer, and bad input."""

from __future__ import annotations

import math
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers_memory import (
    MASTER_HEX,
    OTHER_MASTER_HEX,
    FixedEmbedder,
    blob_ids,
    make_settings,
    mock_admin,
    store_count,
)
from walrus_mem.config import AgentConfig, Settings
from walrus_mem.envelope import open_envelope
from walrus_mem.errors import (
    CatalogCorrupt,
    InvalidInput,
    InvalidNamespace,
    KeyMaterialError,
    MemoryNotFound,
    ModelMismatch,
    PayloadTooLarge,
)
from walrus_mem.keys import MasterSeed, NamespaceKeys
from walrus_mem.memory import Memory
from walrus_mem.models import MemoryRecord, RecallResult
from walrus_mem.testing import HashEmbedder


def test_remember_publishes_a_sealed_blob(mem: Memory) -> None:
    rec = mem.remember("I'm allergic to peanuts", namespace="researcher",
                       metadata={"source": "chat"}, category="identity", importance=0.9)
    assert isinstance(rec, MemoryRecord)
    assert rec.status == "published" and rec.blob_id and rec.end_epoch
    assert rec.quilt_patch_id is None and rec.version == 1 and not rec.deduplicated
    assert len(rec.id) == 32 and rec.namespace == "researcher"
    raw = mem.walrus.read_blob(rec.blob_id)
    assert b"peanuts" not in raw and b"researcher" not in raw  # ciphertext only
    keys = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), "researcher")
    opened = open_envelope(keys, raw, expected_id=rec.id, expected_kind="fact")
    assert opened["text"] == "I'm allergic to peanuts"
    assert opened["metadata"] == {"source": "chat"} and opened["category"] == "identity"
    assert "namespace" not in opened


def test_ids_are_random_not_derived_from_text(mem: Memory) -> None:
    a = mem.remember("same text", namespace="a")
    b = mem.remember("same text", namespace="b")
    assert a.id != b.id


def test_text_is_normalised_and_deduplicated(mem: Memory) -> None:
    admin = mock_admin(mem)
    first = mem.remember("  I like\tgreen   tea \n")
    assert first.text == "I like green tea"
    stores = store_count(admin)
    again = mem.remember("I like green tea")
    # A re-statement is a write (walrus_mem/_memory/restate.py): the same memory, sealed under a
    # new id and published; the old id is forgotten, so a forget of it made elsewhere
    # cannot take the re-stated fact away.
    assert again.deduplicated and again.id != first.id and again.text == first.text
    assert store_count(admin) == stores + 1
    assert [r.id for r in mem.list()] == [again.id]
    assert mem.remember("I like green tea", namespace="other").deduplicated is False
    assert mem.remember("I like GREEN tea").id != first.id  # case is meaningful


def test_default_importance_follows_category(mem: Memory) -> None:
    assert mem.remember("x is my name", category="identity").importance == 0.95
    assert mem.remember("always use tabs", category="rule").importance == 0.90
    assert mem.remember("random note").importance == 0.5
    assert mem.remember("explicit", category="identity", importance=0.1).importance == 0.1


def test_recall_finds_by_meaning_and_reports_components(mem: Memory) -> None:
    mem.remember_many(["peanut allergy is severe", "the cat sleeps on the sofa",
                       "rust borrow checker rules", "tea with milk every morning"])
    hits = mem.recall("peanut allergy", k=2, min_score=0)
    assert isinstance(hits, RecallResult) and isinstance(hits, list)
    assert hits[0].text == "peanut allergy is severe"
    top = hits[0]
    assert top.dense is not None and top.lexical is not None and top.score > 0
    assert 0 <= top.recency <= 1 and top.record.namespace == "default"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits.candidates >= 2


def test_recall_is_namespace_isolated(mem: Memory) -> None:
    mem.remember("secret plan alpha", namespace="a")
    mem.remember("something else", namespace="b")
    assert [h.text for h in mem.recall("secret plan alpha", namespace="b", min_score=0)] == [
        "something else"
    ]
    assert mem.recall("anything", namespace="never-used") == []


def test_recall_min_score_cutoff_and_default(mem: Memory) -> None:
    mem.remember("quantum chromodynamics lecture notes")
    loose = mem.recall("banana bread recipe", min_score=0)
    assert len(loose) == 1
    strict = mem.recall("banana bread recipe", min_score=0.99)
    assert strict == [] and strict.below_min_score == 1
    default = mem.recall("banana bread recipe")  # default cutoff drops an unrelated memory
    assert default == [] and default.below_min_score == 1
    assert [h.text for h in mem.recall("quantum chromodynamics lecture notes")] == [
        "quantum chromodynamics lecture notes"
    ]


def test_recall_filters_and_filtered_out_count(mem: Memory) -> None:
    mem.remember_many([
        {"text": "coffee preference black", "metadata": {"source": "chat", "n": 1},
         "category": "preference"},
        {"text": "coffee machine broken", "metadata": {"source": "email", "n": 2}},
        {"text": "coffee beans from Kenya", "metadata": {"source": "chat", "n": 3}},
    ])
    hits = mem.recall("coffee", k=5, min_score=0, filters={"source": "chat"})
    assert {h.text for h in hits} == {"coffee preference black", "coffee beans from Kenya"}
    assert hits.filtered_out == 1
    hits = mem.recall("coffee", k=5, min_score=0,
                      filters={"OR": [{"category": "preference"}, {"metadata.n": {"gte": 3}}]})
    assert {h.text for h in hits} == {"coffee preference black", "coffee beans from Kenya"}
    hits = mem.recall("coffee", min_score=0, filters={"created_at": {"lt": "2000-01-01"}})
    assert hits == [] and hits.filtered_out == 3
    with pytest.raises(InvalidInput, match="unknown filter operator"):
        mem.recall("coffee", filters={"n": {"like": 1}})


def test_selective_filter_widens_the_candidate_pool(mem: Memory) -> None:
    items = [{"text": f"common words filler number {i}", "metadata": {"rare": i == 137}}
             for i in range(300)]
    mem.remember_many(items)
    hits = mem.recall("common words filler", k=1, min_score=0, filters={"rare": True})
    assert [h.text for h in hits] == ["common words filler number 137"]


def test_expired_memories_are_hidden_unless_asked(mem: Memory, monkeypatch) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=60)
    rec = mem.remember("temporary parking spot B4", expires_at=soon)
    assert rec.expires_at is not None
    assert mem.recall("parking spot", min_score=0)
    import walrus_mem._memory.reading as memory_module  # list and recall read the clock there

    real_time = memory_module.time.time
    monkeypatch.setattr(memory_module.time, "time", lambda: real_time() + 3600)
    hidden = mem.recall("parking spot", min_score=0)
    assert hidden == [] and hidden.filtered_out == 1
    assert mem.recall("parking spot", min_score=0, include_expired=True)
    assert mem.list() == [] and mem.list(include_expired=True)
    assert mem.get(rec.id).id == rec.id  # get by id still works


def test_get_list_and_pagination(mem: Memory) -> None:
    recs = mem.remember_many([f"fact number {i}" for i in range(7)]).records
    assert mem.get(recs[3].id) == recs[3]
    listed = mem.list(limit=100)
    assert {r.id for r in listed} == {r.id for r in recs}
    page1 = mem.list(limit=3)
    page2 = mem.list(limit=3, offset=3)
    page3 = mem.list(limit=3, offset=6)
    assert len(page1) == 3 and len(page2) == 3 and len(page3) == 1
    assert len({r.id for r in page1 + page2 + page3}) == 7
    filtered = mem.list(filters={"text": {"contains": "number 5"}})
    assert [r.text for r in filtered] == ["fact number 5"]


def test_get_verify_checks_the_blob(mem: Memory) -> None:
    rec = mem.remember("verify me please")
    assert mem.get(rec.id, verify=True) == rec
    many = mem.remember_many(["quilt member one", "quilt member two"]).records
    assert many[0].quilt_patch_id
    assert mem.get(many[1].id, verify=True).quilt_patch_id == many[1].quilt_patch_id


@pytest.mark.parametrize("bad", ["", "   ", "\n\t ", 42, None, b"\xff\xfe"])
def test_bad_text_is_invalid_input(mem: Memory, bad: object) -> None:
    with pytest.raises(InvalidInput):
        mem.remember(bad)  # type: ignore[arg-type]


def test_utf8_bytes_are_accepted(mem: Memory) -> None:
    assert mem.remember("café au lait".encode()).text == "café au lait"


def test_oversized_text_is_payload_too_large(mem_dir: Path, fake_embedder) -> None:
    settings = make_settings(mem_dir, max_fact_bytes=1024)
    with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as m:
        m.remember("x" * 1024)
        with pytest.raises(PayloadTooLarge, match="1025 bytes"):
            m.remember("y" * 1025)
        with pytest.raises(PayloadTooLarge):
            m.remember("é" * 600)  # 1200 bytes in UTF-8


@pytest.mark.parametrize("ns", ["", "UPPER", "-lead", "a" * 65, "sp ace", "../x"])
def test_invalid_namespace(mem: Memory, ns: str) -> None:
    with pytest.raises(InvalidNamespace):
        mem.remember("hello", namespace=ns)
    with pytest.raises(InvalidNamespace):
        mem.recall("hello", namespace=ns)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metadata": ["x"]}, "metadata must be a mapping"),
        ({"metadata": {"k": object()}}, "JSON-serialisable"),
        ({"metadata": {1: "x"}}, "non-empty strings"),
        ({"importance": 1.5}, "between 0 and 1"),
        ({"importance": True}, "between 0 and 1"),
        ({"category": ""}, "category"),
        ({"expires_at": "2001-01-01"}, "in the past"),
        ({"expires_at": "soon"}, "ISO-8601"),
        ({"idempotency_key": ""}, "idempotency_key"),
    ],
)
def test_bad_arguments(mem: Memory, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        mem.remember("valid text", **kwargs)


def test_bad_recall_arguments(mem: Memory) -> None:
    for k in (0, -1, 10_001, 2.5, True):
        with pytest.raises(InvalidInput):
            mem.recall("q", k=k)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        mem.recall("   ")
    with pytest.raises(InvalidInput):
        mem.list(limit=0)


def test_unknown_id_is_memory_not_found(mem: Memory) -> None:
    mem.remember("something")
    unknown = "0" * 32
    for call in (lambda: mem.get(unknown), lambda: mem.update(unknown, "x"),
                 lambda: mem.forget(unknown), lambda: mem.history(unknown)):
        with pytest.raises(MemoryNotFound):
            call()
    with pytest.raises(InvalidInput, match="32 lowercase hex"):
        mem.get("not-an-id")
    rec = mem.remember("in namespace a", namespace="a")
    with pytest.raises(MemoryNotFound):
        mem.get(rec.id, namespace="b")  # ids do not leak across namespaces


def test_model_mismatch_names_the_reindex_path(mem_dir: Path) -> None:
    settings = make_settings(mem_dir)
    with Memory(settings, embedder=HashEmbedder(32), master_key=MASTER_HEX) as m:
        m.remember("stored with model A")
    with Memory(settings, embedder=HashEmbedder(48), master_key=MASTER_HEX) as m:
        with pytest.raises(ModelMismatch, match="reindex"):
            m.recall("stored")
        with pytest.raises(ModelMismatch):
            m.remember("another")
        assert m.list()[0].text == "stored with model A"  # reads that need no model still work
        assert m.reindex() == 1
        assert m.recall("stored with model A")[0].text == "stored with model A"
        assert m.stats().model_id == HashEmbedder(48).model_id


def test_corrupt_catalog_is_catalog_corrupt(mem_dir: Path, fake_embedder) -> None:
    settings = make_settings(mem_dir)
    with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as m:
        m.remember("fine")
    catalog = mem_dir / "catalog.sqlite3"
    for suffix in ("-wal", "-shm"):
        Path(str(catalog) + suffix).unlink(missing_ok=True)
    catalog.write_bytes(b"\x00corrupted\x00" * 500)
    before = catalog.read_bytes()
    with pytest.raises(CatalogCorrupt):
        Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX)
    assert catalog.read_bytes() == before  # never overwritten


def test_corrupt_index_file_is_rebuilt_with_warning(
    mem_dir: Path, fake_embedder, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(mem_dir)
    with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as m:
        m.remember_many([f"indexed fact {i}" for i in range(20)])
        m.recall("indexed fact 3")
        path = m.stats().index_path
    assert path.exists()
    path.write_bytes(b"not an index" * 10)
    caplog.set_level("WARNING")
    with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as m:
        assert m.recall("indexed fact 3", k=1)[0].text == "indexed fact 3"
    assert any("rebuild" in r.getMessage() for r in caplog.records)


def test_other_key_for_existing_namespace_is_refused(mem_dir: Path, fake_embedder) -> None:
    settings = make_settings(mem_dir)
    with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as m:
        m.remember("mine")
    with Memory(settings, embedder=fake_embedder, master_key=OTHER_MASTER_HEX) as m:
        with pytest.raises(KeyMaterialError, match="access refused"):  # AccessDenied
            m.recall("mine", min_score=0)  # local reads need the namespace's key too
        with pytest.raises(KeyMaterialError, match="access refused"):
            m.remember("theirs")


def test_agent_with_independent_key(mem_dir: Path, fake_embedder) -> None:
    agent_seed = bytes(range(100, 132))
    settings = make_settings(
        mem_dir, agents={"helper": AgentConfig(namespace="helper-ns", key=agent_seed.hex())}
    )
    with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as m:
        rec = m.remember("agent fact", namespace="helper-ns")
        raw = m.walrus.read_blob(rec.blob_id)
    own = NamespaceKeys.from_agent_key(agent_seed, "helper-ns")
    assert open_envelope(own, raw, expected_id=rec.id)["text"] == "agent fact"


def test_master_key_from_environment(mem_dir: Path, fake_embedder, monkeypatch) -> None:
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)
    with Memory(make_settings(mem_dir), embedder=fake_embedder) as m:
        rec = m.remember("env keyed")
        keys = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), "default")
        assert open_envelope(keys, m.walrus.read_blob(rec.blob_id))["text"] == "env keyed"


def test_default_settings_and_context_manager(fake_embedder, clean_environ: Path) -> None:
    with Memory(embedder=fake_embedder, master_key=MASTER_HEX) as m:
        assert m.data_dir == clean_environ
        m.remember("default settings work")
    with pytest.raises(InvalidInput, match="closed"):
        m.recall("x")
    m.close()  # idempotent


def test_remember_many_counts_everything(mem: Memory) -> None:
    admin = mock_admin(mem)
    existing = mem.remember("already here")
    stores = store_count(admin)
    result = mem.remember_many([
        "new one", "", {"text": "new two", "metadata": {"a": 1}, "category": "project"},
        "already here", 7, {"nope": 1}, "new one", {"text": "x", "bogus": 1},
    ])
    assert result.stored == 2
    assert result.deduplicated == 2
    assert result.queued == 0
    assert [i for i, _ in result.failed] == [1, 4, 5, 7]
    assert "empty" in dict(result.failed)[1] and "bogus" in dict(result.failed)[7]
    assert [r.text for r in result] == ["new one", "new two", "already here", "new one"]
    assert result.records[2].text == existing.text and result.records[2].deduplicated
    assert result.records[2].id != existing.id  # re-stated under a new id (restate.py)
    assert result.records[3].id == result.records[0].id and result.records[3].deduplicated
    assert len(result) == 4 and result[1].importance == 0.75
    assert store_count(admin) == stores + 1  # one quilt: the two new facts, the re-stated one
    assert result.records[0].quilt_patch_id
    assert result.records[0].blob_id == result.records[1].blob_id


def test_remember_many_one_quilt_per_666(mem_dir: Path, fake_embedder) -> None:
    settings = make_settings(mem_dir, manifest_every=10_000)  # no periodic manifest here
    mem = Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX)
    admin = mock_admin(mem)
    before = store_count(admin, "put_quilt")
    result = mem.remember_many([f"bulk fact {i}" for i in range(700)])
    assert result.stored == 700 and not result.failed
    assert store_count(admin, "put_quilt") == before + 2
    quilts = {r.blob_id for r in result}
    assert len(quilts) == 2
    sizes = sorted(sum(1 for r in result if r.blob_id == q) for q in quilts)
    # an even split: cheaper than 666 + 34 (blobio.cheapest_batches, docs/walrus.md)
    assert sizes == [350, 350]
    mem.close()


def test_remember_many_rejects_non_lists(mem: Memory) -> None:
    for bad in ("a string", b"bytes", 5, None):
        with pytest.raises(InvalidInput):
            mem.remember_many(bad)  # type: ignore[arg-type]
    assert mem.remember_many([]).stored == 0


def test_idempotency_key_returns_the_earlier_result(mem: Memory) -> None:
    admin = mock_admin(mem)
    first = mem.remember_many(["turn fact a", "turn fact b", ""], idempotency_key="s1:t1")
    stores = store_count(admin)
    again = mem.remember_many(["turn fact a", "turn fact b", "", "extra"],
                              idempotency_key="s1:t1")
    assert again.replayed and not first.replayed
    assert [r.id for r in again] == [r.id for r in first]
    assert again.stored == first.stored == 2 and again.failed == first.failed
    assert store_count(admin) == stores
    assert mem.recall("extra", min_score=0.99) == []  # nothing new was stored
    # same key in another namespace is independent
    other = mem.remember_many(["turn fact a"], namespace="other", idempotency_key="s1:t1")
    assert not other.replayed and other.stored == 1
    one = mem.remember("single", idempotency_key="k")
    two = mem.remember("different text", idempotency_key="k")
    assert two.id == one.id and two.deduplicated


def test_concurrent_threads_share_one_memory(mem: Memory) -> None:
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(10):
                mem.remember(f"thread {n} fact {i}")
                mem.recall(f"thread {n}", min_score=0)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert mem.stats().memories == 40
    assert len(mem.recall("thread 2 fact 7", k=40, min_score=0)) == 40


def test_catalog_is_sqlite_wal_in_the_data_dir(mem: Memory, mem_dir: Path) -> None:
    mem.remember("x")
    con = sqlite3.connect(mem_dir / "catalog.sqlite3")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT count(*) FROM memories").fetchone()[0] == 1
    con.close()


def test_stats(mem: Memory) -> None:
    mem.remember_many(["alpha fact", "beta fact"], namespace="s")
    stats = mem.stats("s")
    assert stats.memories == 2 and stats.published == 2 and stats.queued == 0
    assert stats.model_id == HashEmbedder(64).model_id and stats.dim == 64
    assert stats.embedded and stats.key_fingerprint and stats.text_bytes == 19
    assert stats.manifest_blob_id is None  # until sync / manifest_every writes
    assert mem.sync().manifests["s"] == mem.stats("s").manifest_blob_id
    assert mem.namespaces() == ["s"]


def test_settings_are_read_from_environment(fake_embedder, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WALRUS_MEM_DATA_DIR", str(tmp_path / "envdir"))
    monkeypatch.setenv("WALRUS_MEM_DEFAULT_NAMESPACE", "envns")
    with Memory(Settings(use_keyring=False), embedder=fake_embedder, master_key=MASTER_HEX) as m:
        assert m.remember("env").namespace == "envns"
    assert (tmp_path / "envdir" / "catalog.sqlite3").exists()


def test_fixed_embedder_ranks_by_vector(mem_dir: Path) -> None:
    emb = FixedEmbedder({"north": [1, 0, 0], "east": [0, 1, 0], "query": [0.9, 0.1, 0]}, dim=3)
    with Memory(make_settings(mem_dir), embedder=emb, master_key=MASTER_HEX) as m:
        m.remember_many(["north", "east"])
        hits = m.recall("query", k=2, min_score=0)
        assert [h.text for h in hits] == ["north", "east"]
        assert hits[0].dense == pytest.approx(0.9 / (0.82**0.5), abs=1e-2)
        assert hits[0].lexical is None


def test_blob_count_matches_published_records(mem: Memory) -> None:
    admin = mock_admin(mem)
    before = blob_ids(admin)
    a = mem.remember("one blob")
    batch = mem.remember_many(["q1", "q2", "q3"])
    new = blob_ids(admin) - before
    assert new == {a.blob_id, batch.records[0].blob_id}


def test_conversational_context_brings_in_the_following_memory(mem: Memory, monkeypatch) -> None:
    """The engine's part of context: the successors of the top hits (ranking.successor_keys'
    rule) are fetched, given their own signals and fused again (how much they score is
    ranking's business)."""
    import walrus_mem._recall.recall as recall_module

    asked: list[int] = []
    fused: list[tuple[list[int], list[float], list[float]]] = []
    real_successors = recall_module._successors
    real_order, real_fuse = recall_module.fused_order, recall_module.fuse_arrays

    def spy_successors(idx, keys, present, order, params):
        following, slots = real_successors(idx, keys, present, order, params)
        asked.extend(following)
        return following, slots

    def spy(real):
        def call(keys, dense, lexical, created_at, importance, params, *, now, prior=None):
            fused.append((keys.tolist(), dense.tolist(), lexical.tolist()))
            return real(keys, dense, lexical, created_at, importance, params, now=now,
                        prior=prior)
        return call

    monkeypatch.setattr(recall_module, "_successors", spy_successors)
    monkeypatch.setattr(recall_module, "fused_order", spy(real_order))
    monkeypatch.setattr(recall_module, "fuse_arrays", spy(real_fuse))
    mem.remember_many([f"concert ticket stub number {i}" for i in range(200)])
    question, answer = mem.remember_many(["What concert did you go to last week?",
                                          "It was Matt Patterson!"]).records
    mem.recall("concert you went to last week", k=10, min_score=0)
    answer_key = mem._catalog.query_one("SELECT key FROM memories WHERE id = ?", (answer.id,))[0]
    question_key = answer_key - 1
    assert answer_key in asked  # the question ranked high; its successor was asked for
    (first_keys, _, _), (last_keys, last_dense, last_lexical) = fused[0], fused[-1]
    assert question_key in first_keys and answer_key not in first_keys
    at = last_keys.index(answer_key)  # joined the second fusion with its own signals
    expected = mem._indexes.loaded("default").similarities([answer_key], mem._embedding.embed_query(
        "concert you went to last week"))[0]
    assert math.isnan(last_lexical[at]) and last_dense[at] == pytest.approx(expected)
    other = mem.remember("unrelated later fact", namespace="elsewhere")
    assert all(h.id != other.id for h in mem.recall("concert", k=50, min_score=0))

def test_recall_sees_another_connections_commit_and_skips_catching_up_otherwise(
    tmp_path: Path, fake_embedder: HashEmbedder, master_hex: str
) -> None:
    """Recall checks once, inside its read snapshot, whether another connection wrote:
    if so the index catches up before the recall; if not, nothing is re-read."""
    settings = Settings(data_dir=tmp_path / "d", use_keyring=False)
    with Memory(settings, embedder=fake_embedder, master_key=master_hex) as reader, \
            Memory(settings, embedder=fake_embedder, master_key=master_hex) as writer:
        reader.remember("the first fact about otters")
        assert [h.text for h in reader.recall("otters", min_score=0)] == [
            "the first fact about otters"]
        emb = reader.embedder
        with reader._catalog.snapshot():
            assert reader._indexes.current("default", emb.model_id, emb.dim) is not None
        writer.remember("a second fact about otters")  # another connection commits
        with reader._catalog.snapshot():
            assert reader._indexes.current("default", emb.model_id, emb.dim) is None
        texts = {h.text for h in reader.recall("otters", min_score=0)}
        assert texts == {"the first fact about otters", "a second fact about otters"}
        with reader._catalog.snapshot():  # caught up: the fast path again
            assert reader._indexes.current("default", emb.model_id, emb.dim) is not None


def test_recall_finds_a_namespace_another_connection_just_created(
    tmp_path: Path, fake_embedder: HashEmbedder, master_hex: str
) -> None:
    """An empty answer is never taken from a stale namespace cache."""
    settings = Settings(data_dir=tmp_path / "d", use_keyring=False)
    with Memory(settings, embedder=fake_embedder, master_key=master_hex) as reader, \
            Memory(settings, embedder=fake_embedder, master_key=master_hex) as writer:
        reader.remember("something elsewhere", namespace="other")
        assert list(reader.recall("badgers", namespace="fresh", min_score=0)) == []
        writer.remember("badgers dig setts", namespace="fresh")
        assert [h.text for h in reader.recall("badgers", namespace="fresh", min_score=0)] == [
            "badgers dig setts"]
