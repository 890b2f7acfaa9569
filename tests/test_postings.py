"""The postings (walrus_mem._catalog.postings): FTS5's terms, FTS5's bm25, kept in step
with FTS5."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import walrus_mem._catalog.postings as postings
import walrus_mem._recall.lexical as lexical_mod
from walrus_mem import Memory, Settings
from walrus_mem._catalog.catalog import Catalog, fts_table
from walrus_mem._recall.lexical import informative, lexical_pass, rescore
from walrus_mem._recall.ranking import fts_query

MASTER = "5a" * 32
NS = "notes"

TEXTS = [
    "Painted paintings, the painter paints", "Café résumé naïve façade", "foo_bar e-mail x",
    "東京 タワー 東京", "🙂 emoji only 🙂", "numbers 2024 2024 3.14", "", "   ",
    "ÀÉÎÕÜ àéîõü", "straße STRASSE", "running runs ran runner", "I'm don't can't",
]


def assert_postings_match_fts5(cat: Catalog, ns: str) -> None:
    """Blocks well formed, and terms, tf, dl, row counts and totals equal to FTS5's."""
    assert postings.differences(cat.conn, ns) == []


def _catalog(tmp_path: Path) -> Catalog:
    cat = Catalog(tmp_path / "c.sqlite3")
    cat.ensure_namespace(NS, None)
    return cat


def test_tokenizer_gives_fts5s_terms_and_lengths(tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    try:
        with cat.write():
            for key, text in enumerate(TEXTS, start=1):
                cat.fts_add(NS, key, text)
        assert_postings_match_fts5(cat, NS)
        tok = postings.tokenizer()
        assert tok.terms(["painted", "e_mail", "_", "Café"]) == [
            ("paint",), ("e", "mail"), (), ("cafe",)]
    finally:
        cat.close()


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 4: every insert path (append, new block, middle insert, split) runs often."""
    monkeypatch.setattr(postings, "BLOCK", 4)


VOCAB = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "painted", "paints", "café"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "remove", "replace"]),
                              st.integers(1, 40),
                              st.lists(st.sampled_from(VOCAB), min_size=0, max_size=7),
                              st.booleans()),
                    min_size=1, max_size=60))
def test_postings_follow_any_sequence_of_writes(
        tmp_path_factory: pytest.TempPathFactory, small_blocks: None,
        ops: list[tuple[str, int, list[str], bool]]) -> None:
    """Adds, removes and replacements in any key order (updates keep their key), in
    transactions of any size (a transaction's adds are written together), leave the
    postings equal to FTS5's index, and scores equal to FTS5's bm25."""
    cat = _catalog(tmp_path_factory.mktemp("p"))
    try:
        present: dict[int, str] = {}  # key -> its text (FTS5 keeps none: fts_remove is told)
        done = 0
        while done < len(ops):
            with cat.write():
                for op, key, words, commit in ops[done:]:
                    done += 1
                    text = " ".join(words)
                    if op == "add" and key not in present:
                        cat.fts_add(NS, key, text)
                        present[key] = text
                    elif op == "remove":
                        cat.fts_remove(NS, key, present.pop(key, ""))
                    elif op == "replace" and key in present:
                        cat.fts_remove(NS, key, present[key])
                        cat.fts_add(NS, key, text)
                        present[key] = text
                    if commit:
                        break
        assert_postings_match_fts5(cat, NS)
        rows = len(present)
        for query in ("alpha beta", "painted gamma zeta", "café delta epsilon beta", "omega",
                      "painted paints alpha"):  # two words, one term: FTS5 counts it twice
            _assert_same_scores(cat, query, rows)
    finally:
        cat.close()


@pytest.mark.parametrize("order", ["descending", "interleaved"])
def test_inserts_in_any_key_order_keep_blocks_small(tmp_path: Path, small_blocks: None,
                                                    order: str) -> None:
    """Keys arriving below a block's first key or inside its range (an update keeps its
    key) grow a block, which splits past 2 x BLOCK; removals empty and drop blocks."""
    cat = _catalog(tmp_path)
    keys = list(range(60, 0, -1)) if order == "descending" else (
        list(range(2, 61, 2)) + list(range(1, 60, 2)))
    try:
        for key in keys:  # one transaction each: every add goes to the block it belongs to
            with cat.write():
                cat.fts_add(NS, key, f"alpha beta{key % 3} alpha")
        assert_postings_match_fts5(cat, NS)
        blocks = cat.conn.execute(f"SELECT count(*) FROM {postings.postings_table(NS)} "
                                  "WHERE term = 'alpha'").fetchone()[0]
        assert 60 / 8 <= blocks <= 60 / 2
        with cat.write():
            for key in keys[::2]:
                cat.fts_remove(NS, key, f"alpha beta{key % 3} alpha")
        assert_postings_match_fts5(cat, NS)
        _assert_same_scores(cat, "alpha beta1", 30)
    finally:
        cat.close()


def _assert_same_scores(cat: Catalog, query: str, rows: int) -> None:
    """The postings' bm25 of every matching row is FTS5's, to the last bit; the
    candidates' rescoring too, reading the other words whole or by blocks."""
    _assert_same_scores_read(cat, query, rows)
    with pytest.MonkeyPatch.context() as m:
        # only the rarest word chooses; the others are found block by block
        m.setattr(lexical_mod, "POSTINGS_BUDGET", 0)
        m.setattr(lexical_mod, "FTS_BUDGET_FACTOR", 0)
        m.setattr(lexical_mod, "WHOLE_READ", 0)
        _assert_same_scores_read(cat, query, rows)


def _assert_same_scores_read(cat: Catalog, query: str, rows: int) -> None:
    match, counts, from_postings = informative(cat, NS, query, rows)
    assert from_postings
    if match is None:
        return
    table = fts_table(NS)
    want = {r[0]: -r[1] for r in cat.conn.execute(
        f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?", (match,))}
    lex = lexical_pass(cat, NS, match, 2, counts, True)
    if lex.complete:
        assert dict(zip(lex.keys.tolist(), lex.scores.tolist(), strict=True)) == want
    keys = sorted(set(want) | {1, 2, 3})
    full = rescore(cat, NS, match, lex, counts, keys)
    assert dict(zip(full.keys.tolist(), full.scores.tolist(), strict=True)) == want
    some = keys[::3]  # a few wanted keys: only the blocks that can hold them are read
    part = rescore(cat, NS, match, lexical_pass(cat, NS, match, 2, counts, True), counts, some)
    assert dict(zip(part.keys.tolist(), part.scores.tolist(), strict=True)) == {
        key: want[key] for key in some if key in want}


def test_candidates_are_rescored_from_the_blocks_that_hold_them(
        tmp_path: Path, small_blocks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The words that did not choose the candidates score them from the few blocks
    (of many) whose key ranges hold them: FTS5's bm25 of exactly those rows."""
    cat = _catalog(tmp_path)
    try:
        with cat.write():
            for key in range(1, 81):
                words = ["filler"] + ["rare"] * (key % 16 == 0) + ["mid"] * (key % 3 == 0) + [
                    "extra"] * (key % 4 == 0) + ["mid"] * (key % 9 == 0)  # tf 2 at times
                cat.fts_add(NS, key, " ".join(words))
        monkeypatch.setattr(lexical_mod, "POSTINGS_BUDGET", 0)
        monkeypatch.setattr(lexical_mod, "FTS_BUDGET_FACTOR", 0)
        monkeypatch.setattr(lexical_mod, "WHOLE_READ", 0)
        read: list[int] = []
        real = postings.read_at

        def spy(conn, ns, term, wanted):  # type: ignore[no-untyped-def]
            found = real(conn, ns, term, wanted)
            read.append(len(found[0]))
            return found

        monkeypatch.setattr(postings, "read_at", spy)
        match, counts, _ = informative(cat, NS, "rare mid extra", 80)
        assert counts == {'"rare"': 5, '"mid"': 26, '"extra"': 20}
        lex = lexical_pass(cat, NS, match, 2, counts, True)
        assert not lex.complete and lex.top == [16, 32]  # chosen by "rare" alone
        table = fts_table(NS)
        want = {r[0]: -r[1] for r in cat.conn.execute(
            f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?", (match,))}
        wanted = [16, 17, 18, 20, 27, 48, 72, 80]  # 20, 27: first keys of blocks
        full = rescore(cat, NS, match, lex, counts, wanted)
        assert dict(zip(full.keys.tolist(), full.scores.tolist(), strict=True)) == {
            key: want[key] for key in wanted if key in want}
        assert read and all(n < 20 for n in read)  # a few blocks, not the words' every row
    finally:
        cat.close()


def test_a_batch_of_adds_appends_to_each_terms_last_block(tmp_path: Path,
                                                          small_blocks: None) -> None:
    """One transaction's adds (remember_many) are written per term, in blocks of BLOCK."""
    cat = _catalog(tmp_path)
    try:
        with cat.write():
            cat.fts_add(NS, 1, "alpha beta")
        with cat.write():
            for key in range(2, 40):
                cat.fts_add(NS, key, f"alpha gamma{key % 2}")
        assert_postings_match_fts5(cat, NS)
        sizes = [r[0] for r in cat.conn.execute(
            f"SELECT n FROM {postings.postings_table(NS)} WHERE term = 'alpha' ORDER BY first")]
        assert sizes == [4] * 9 + [3]  # the first block filled up, then full blocks
    finally:
        cat.close()


def test_a_failed_transaction_leaves_the_postings_as_they_were(tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    try:
        with cat.write():
            cat.fts_add(NS, 1, "alpha beta")
        with pytest.raises(RuntimeError), cat.write():
            cat.fts_add(NS, 2, "alpha gamma")
            cat.fts_remove(NS, 1, "alpha beta")
            raise RuntimeError("crash before commit")
        assert_postings_match_fts5(cat, NS)
        assert postings.stats(cat.conn, NS) == (1, 2)
    finally:
        cat.close()


def test_a_catalog_without_postings_gets_them_at_open(tmp_path: Path) -> None:
    """An older catalog (FTS5 only) is upgraded when opened: same scores after."""
    cat = _catalog(tmp_path)
    with cat.write():
        for key, text in enumerate(TEXTS * 3, start=1):
            cat.fts_add(NS, key, text)
    with cat.write() as c:
        c.execute(f"DROP TABLE {postings.postings_table(NS)}")
        c.execute(f"DROP TABLE {postings.counts_table(NS)}")
        c.execute(f"DROP TABLE {postings.STATS_TABLE}")
        c.execute("DELETE FROM meta WHERE key = 'postings'")
    assert cat.lexicon_counts(NS, ['"paint"']) is None  # nothing to answer from: FTS5 does
    cat.close()
    cat = Catalog(tmp_path / "c.sqlite3")
    try:
        assert_postings_match_fts5(cat, NS)
        _assert_same_scores(cat, "painted café numbers", len(TEXTS) * 3)
    finally:
        cat.close()


def test_a_word_fts5_splits_is_answered_by_fts5(tmp_path: Path) -> None:
    """"e_mail" is the phrase "e mail" to FTS5: the postings do not answer it, FTS5 does."""
    settings_ = Settings(data_dir=tmp_path / "m", use_keyring=False)
    from walrus_mem.testing import HashEmbedder

    with Memory(settings_, embedder=HashEmbedder(dim=32), master_key=MASTER) as mem:
        mem.remember_many(["send the e_mail today", "mail the letter", "an e mail draft",
                           "nothing here"])
        cat = mem._catalog
        match, counts, from_postings = informative(cat, "default", "e_mail", 4)
        assert not from_postings and match == '"e_mail"'
        hits = mem.recall("e_mail", k=4, min_score=0)
        lexical = {h.record.text for h in hits if h.lexical is not None}
        assert lexical == {"send the e_mail today", "an e mail draft"}  # the phrase only


def test_memory_writes_keep_the_postings_in_step(tmp_path: Path) -> None:
    """remember, update, forget and a reopened data dir: postings equal FTS5's index."""
    from walrus_mem.testing import HashEmbedder

    settings_ = Settings(data_dir=tmp_path / "m", use_keyring=False)
    rng = random.Random(3)
    words = "garden peanuts allergy coffee tea morning evening running painted".split()
    with Memory(settings_, embedder=HashEmbedder(dim=32), master_key=MASTER) as mem:
        ids = [r.id for r in mem.remember_many([" ".join(rng.choices(words, k=5)) + f" n{i}"
                                                for i in range(200)])]
        for record_id in ids[10:30]:
            mem.update(record_id, " ".join(rng.choices(words, k=4)))
        for record_id in ids[40:60]:
            mem.forget(record_id)
        assert_postings_match_fts5(mem._catalog, "default")
        before = [(h.id, h.score) for h in mem.recall("peanuts allergy", k=10, min_score=0)]
    with Memory(settings_, embedder=HashEmbedder(dim=32), master_key=MASTER) as mem:
        assert_postings_match_fts5(mem._catalog, "default")
        assert [(h.id, h.score) for h in mem.recall("peanuts allergy", k=10,
                                                    min_score=0)] == before


def test_texts_tokenized_together_get_their_own_counts() -> None:
    tok = postings.tokenizer()
    assert tok.counts_many(TEXTS) == [tok.counts(text) for text in TEXTS]
    assert tok.counts_many([]) == []


def test_query_words_are_tokenized_as_fts5_does() -> None:
    tok = postings.tokenizer()
    assert tok.terms(["Running", "naïve", "東京"]) == [("run",), ("naiv",), ("東京",)]
    assert fts_query("Running naïve") == '"running" OR "naïve"'


def _bytes_per_posting(cat: Catalog, ns: str) -> float:
    payload, postings_n = cat.conn.execute(
        f"SELECT sum(length(keys) + length(tfdl)), sum(n) FROM {postings.postings_table(ns)}"
    ).fetchone()
    return float(payload) / float(postings_n)


def test_postings_take_a_few_bytes_a_posting(tmp_path: Path) -> None:
    """Keys as varint gaps, tf and length as varints: short facts' postings take about
    3 bytes each (16 with int64 keys and uint32 pairs), in one batch and one by one."""
    rng = random.Random(5)
    words = [f"word{i}" for i in range(300)]
    cat = _catalog(tmp_path)
    try:
        with cat.write():
            for key in range(1, 2001):
                cat.fts_add(NS, key, " ".join(rng.choice(words) for _ in range(9)))
        for key in range(2001, 2101):
            with cat.write():
                cat.fts_add(NS, key, " ".join(rng.choice(words) for _ in range(9)))
        assert_postings_match_fts5(cat, NS)
        assert _bytes_per_posting(cat, NS) <= 4.0
        _assert_same_scores(cat, "word3 word17 word250", 2100)
    finally:
        cat.close()


def test_a_catalog_written_by_schema_5_is_upgraded_in_place(tmp_path: Path) -> None:
    """tests/data/catalog_schema5.sqlite3 was written by walrus_mem at schema 5 (postings
    format 1: int64 keys, uint32 tf/length pairs; 30 facts, one forgotten, one updated).
    Opening it re-encodes its postings in place: equal to FTS5's index, same bm25, smaller;
    its schema version moves on, so an older walrus_mem refuses it."""
    import shutil

    from walrus_mem._catalog.catalog import POSTINGS_FORMAT, SCHEMA_VERSION

    path = tmp_path / "catalog.sqlite3"
    shutil.copy(Path(__file__).parent / "data" / "catalog_schema5.sqlite3", path)
    cat = Catalog(path)
    try:
        assert cat.query_one("SELECT max(version) FROM schema_version")[0] == SCHEMA_VERSION > 5
        assert cat.get_meta("postings") == POSTINGS_FORMAT != "1"
        assert_postings_match_fts5(cat, NS)
        assert _bytes_per_posting(cat, NS) <= 4.0
        assert cat.query_one("SELECT count(*) FROM memories")[0] == 29
        _assert_same_scores(cat, "painter rooibos mint", 29)
        _assert_same_scores(cat, "painted café", 29)
    finally:
        cat.close()


def test_blocks_of_every_width(tmp_path: Path, small_blocks: None) -> None:
    """Gaps and counts past one byte (2, 4 and 8-byte blocks), a block widened by an
    append or an insert, a term whose blocks have several widths: all equal to FTS5's,
    the same bm25, read whole, in one query with other words, or block by block."""
    cat = _catalog(tmp_path)
    long = " ".join(["alpha"] * 300)  # tf and length past 255
    keys = [1, 2, 3, 4, 5, 300, 301, 70_000, 70_001, 70_002, 2**33, 2**33 + 5, 2**33 + 6]
    try:
        with cat.write():
            for key in keys[:5]:
                cat.fts_add(NS, key, "alpha beta")
        for key in keys[5:]:  # appends that widen the last block, one transaction each
            with cat.write():
                cat.fts_add(NS, key, long if key == 301 else "alpha beta")
        with cat.write():  # inserts into a narrow block's range, one of them wide
            cat.fts_add(NS, 70_500, "alpha gamma")
            cat.fts_add(NS, 6, long)
        assert_postings_match_fts5(cat, NS)
        widths = {len(r[0]) // r[1] for r in cat.conn.execute(
            f"SELECT keys, n FROM {postings.postings_table(NS)} WHERE term = 'alpha'")}
        assert {1, 8} <= widths  # one term, blocks of several widths
        _assert_same_scores(cat, "alpha beta gamma", len(keys) + 2)
        with cat.write():
            cat.fts_remove(NS, 301, long)
            cat.fts_remove(NS, 2**33, "alpha beta")
        assert_postings_match_fts5(cat, NS)
        _assert_same_scores(cat, "alpha beta gamma", len(keys))
    finally:
        cat.close()
