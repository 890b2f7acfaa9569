"""bench/locomo.py: data loading, evidence cleaning, the official recall metric, both backends.

Uses a small synthetic LoCoMo-format file and the fake embedder (no model).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench import locomo
from walrus_mem._recall import ranking
from walrus_mem.testing import HashEmbedder


def turn(speaker: str, dia_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def sample(sample_id: str, a: str, b: str, turns: dict[int, list[dict[str, Any]]],
           qa: list[dict[str, Any]]) -> dict[str, Any]:
    conv: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    for n, ts in turns.items():
        conv[f"session_{n}"] = ts
        conv[f"session_{n}_date_time"] = f"1:00 pm on {n} May, 2023"
    conv["session_99_date_time"] = "a date with no session"
    return {"sample_id": sample_id, "conversation": conv, "qa": qa}


DATA = [
    sample(
        "conv-1",
        "Ann",
        "Bob",
        {
            10: [turn("Ann", "D10:1", "I adopted a tortoise named Shelly last week."),
                 turn("Ann", "D10:2", "Got running shoes again, the old ones wore out fast.")],
            2: [
                turn("Ann", "D2:1", "What concert did you go to on Friday?"),
                turn("Bob", "D2:2", "Matt Patterson, amazing voice!"),
                turn("Ann", "D2:3", "I bought new running shoes.",
                     img_url="x", blip_caption="a photo of red sneakers"),
            ],
            1: [
                turn("Bob", "D1:1", "I painted a sunrise over the lake."),
                turn("Ann", "D1:2", "Lovely colours, the orange really pops."),
            ],
        },
        [
            {"question": "What did Bob paint by the lake?", "answer": "a sunrise",
             "evidence": ["D1:1"], "category": 4},
            {"question": "Which concert was on Friday?", "answer": "Matt Patterson",
             "evidence": ["D2:2"], "category": 4},
            {"question": "What pet and shoes does Ann have?", "answer": "tortoise; shoes",
             "evidence": ["D10:1; D2:3", "D99:1"], "category": 1},
            {"question": "What did Ann paint?", "adversarial_answer": "a sunrise",
             "evidence": ["D1:1"], "category": 5},
            {"question": "Is there anything?", "answer": "n/a", "evidence": [], "category": 3},
            {"question": "Which running shoes did Ann buy on 10 May, 2023?", "answer": "new ones",
             "evidence": ["D10:2"], "category": 4},
        ],
    ),
    sample(
        "conv-2",
        "Cy",
        "Di",
        {1: [turn("Cy", "D1:1", "My tortoise escaped the garden."),
             turn("Di", "D1:2", "Oh no, did you find it?"),
             turn("Cy", "D1:3", "See you!")],
         2: [turn("Di", "D2:1", "We found the tortoise under the porch."),
             turn("Cy", "D2:2", "See  you!")]},  # the same text again (whitespace aside)
        [{"question": "What escaped?", "answer": "tortoise", "evidence": ["D1:1"],
          "category": 4},
         {"question": "Where was the tortoise found?", "answer": "under the porch",
          "evidence": ["D2:1", "D2:2"], "category": 1}],
    ),
]


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-mini.json"
    path.write_text(json.dumps(DATA))
    return path


def test_clean_evidence_follows_the_recipe() -> None:
    known = {"D1:3", "D8:6", "D9:17", "D30:5", "D2:1"}
    raw = ["D1:3", "D8:6; D9:17", "D", "D:11:26", "D30:05", " D2:1 ", "D1:3"]
    assert locomo.clean_evidence(raw, known) == ("D1:3", "D8:6", "D9:17", "D2:1")


def test_load_orders_sessions_numerically_and_cleans_evidence(data_file: Path) -> None:
    convs = locomo.load_locomo(data_file)
    assert [c.sample_id for c in convs] == ["conv-1", "conv-2"]
    c1 = convs[0]
    assert [t.dia_id for t in c1.turns] == ["D1:1", "D1:2", "D2:1", "D2:2", "D2:3", "D10:1",
                                             "D10:2"]
    assert c1.turns[0].date_time == "1:00 pm on 1 May, 2023" and c1.turns[0].session == 1
    assert c1.questions[2].evidence == ("D10:1", "D2:3")  # "D99:1" matches no turn
    assert c1.questions[4].evidence == ()
    shoes = c1.turns[4]
    assert shoes.document() == "Ann: I bought new running shoes."
    assert shoes.document(captions=True) == (
        "Ann: I bought new running shoes. [image: a photo of red sneakers]"
    )


def test_evidence_recall_is_locomos() -> None:
    assert locomo.evidence_recall(["a", "b", "c"], ["b", "x"], 5) == 0.5
    assert locomo.evidence_recall(["a", "b", "c"], ["c"], 2) == 0.0
    assert locomo.evidence_recall(["a"], [], 1) == 1.0  # no evidence counts as found


def test_a_hit_standing_for_several_turns_counts_for_each() -> None:
    hits = [("a", "b"), "c", ("d",)]
    assert locomo.evidence_recall(hits, ["b", "d"], 3) == 1.0
    assert locomo.evidence_recall(hits, ["b", "d"], 1) == 0.5  # k counts hits, not ids


def test_summarize_groups_categories() -> None:
    outcomes = [
        locomo.Outcome("c", 1, ("a",), ("a",)),
        locomo.Outcome("c", 4, ("b",), ("a",)),
        locomo.Outcome("c", 5, ("a",), ("a",)),
    ]
    table = locomo.summarize(outcomes, ks=(1,))
    assert table["1-4"] == {"n": 2.0, "R@1": 0.5, "se@1": pytest.approx(0.5)}
    assert table["5"] == {"n": 1.0, "R@1": 1.0, "se@1": 0.0}
    assert table["all"]["R@1"] == pytest.approx(2 / 3)
    assert "2" not in table and "3" not in table
    assert "0.500±0.500" in locomo.format_table("t", table, ks=(1,))


def test_standalone_backend_end_to_end(data_file: Path) -> None:
    convs = locomo.load_locomo(data_file)
    results = locomo.run_standalone(convs, HashEmbedder(dim=64))
    assert set(results) == {"bm25", "dense", "hybrid"}
    hybrid = [o.retrieved for o in results["hybrid"]]  # questions in file order
    assert hybrid[0][0] == ("D1:1",)
    # The answer shares no word with the question and follows the turn that asked it.
    # With the fake embedder its own cosine is 0, so the context gate gives it nothing
    # (LoCoMo turns carry the speaker's name, which keeps real answers above the gate);
    # with the gate off it inherits from the question and ranks right after it.
    assert hybrid[1][0] == ("D2:1",) and ("D2:2",) not in results["bm25"][1].retrieved
    ungated = replace(ranking.DEFAULT_PARAMS, context_gate=0.0)
    ctx = locomo.run_standalone(convs, HashEmbedder(dim=64), params=ungated)
    assert ctx["hybrid"][1].retrieved[:2] == (("D2:1",), ("D2:2",))
    # namespaces are separate: conv-2's question only sees conv-2's turns
    assert {i for hit in hybrid[6] for i in hit} == {"D1:1", "D1:2", "D1:3", "D2:1", "D2:2"}
    assert hybrid[6][0] == ("D1:1",)
    # the named date picks the turn of the session held that day (recall's time prior)
    assert hybrid[5][:2] == (("D10:2",), ("D2:3",))
    undated = locomo.run_standalone(convs, HashEmbedder(dim=64),
                                    params=replace(ranking.DEFAULT_PARAMS, time_weight=0.0))
    assert undated["hybrid"][5].retrieved[:2] == (("D2:3",), ("D10:2",))


def test_api_backend_end_to_end(data_file: Path) -> None:
    convs = locomo.load_locomo(data_file)
    results, timings = locomo.run_api(convs, HashEmbedder(dim=64))
    assert {o.sample_id for o in results["hybrid"]} == {"conv-1", "conv-2"}
    assert len(results["hybrid"]) == 8
    standalone = locomo.run_standalone(convs, HashEmbedder(dim=64))
    for name in ("bm25", "hybrid"):
        api = locomo.summarize(results[name])["1-4"]
        ref = locomo.summarize(standalone[name])["1-4"]
        assert api == pytest.approx(ref), name
    assert timings["recall_p50_ms"] > 0


def test_repeated_text_is_one_document_carrying_every_turn(data_file: Path) -> None:
    conv2 = locomo.load_locomo(data_file)[1]
    docs = conv2.documents()
    assert [d.dia_ids for d in docs] == [("D1:1",), ("D1:2",), ("D1:3", "D2:2"), ("D2:1",)]
    see_you = docs[2]
    assert see_you.text == "Cy: See you!"  # the first occurrence's text
    assert see_you.metadata() == {"dia_id": "D1:3", "dia_ids": ["D1:3", "D2:2"], "session": 1,
                                  "date_time": "1:00 pm on 1 May, 2023"}


def test_the_library_keeps_the_first_write_of_a_repeated_text(tmp_path: Path) -> None:
    """The rule the bench works around: one memory per distinct text, first metadata wins."""
    from walrus_mem.config import Settings

    settings = Settings(config_file=None, data_dir=tmp_path, publisher_url=None,
                        aggregator_urls=[])
    memory_cls = locomo._memory_class()
    with memory_cls(settings, embedder=HashEmbedder(dim=64),
                    master_key=locomo.BENCH_MASTER_KEY) as mem:
        result = mem.remember_many([{"text": "Cy: See you!", "metadata": {"dia_id": "D1:3"}},
                                    {"text": "Cy: See  you!", "metadata": {"dia_id": "D2:2"}}],
                                   namespace="conv-2")
        assert (result.stored, result.deduplicated) == (1, 1)
        assert [r.metadata for r in result.records] == [{"dia_id": "D1:3"}] * 2


def _every_turn_is_findable(convs: list[locomo.Conversation]) -> None:
    """Recall each turn's own text through the API: a top hit carries the turn's dia_id.

    The fake embedder and FTS5 both see a text as a bag of words, so a turn whose
    words are exactly another's ("Nate: Bye Joanna!" / "Joanna: Bye Nate!") ties
    with it; the tie goes to the earlier memory and the turn comes second.
    """
    queries = [
        locomo.Conversation(
            c.sample_id, c.turns,
            tuple(locomo.Question(t.document(), (t.dia_id,), 4) for t in c.turns),
        )
        for c in convs
    ]
    results, _ = locomo.run_api(queries, HashEmbedder(dim=384), k=5, methods=("hybrid",))
    assert len(results["hybrid"]) == sum(len(c.turns) for c in convs)
    words = {(c.sample_id, t.dia_id): sorted(re.findall(r"\w+", t.document().lower()))
             for c in convs for t in c.turns}
    for o in results["hybrid"]:
        turn = o.evidence[0]
        assert any(turn in hit for hit in o.retrieved[:2]), (o.sample_id, turn)
        if turn not in o.retrieved[0]:
            assert words[o.sample_id, turn] == words[o.sample_id, o.retrieved[0][0]]


def test_every_turn_is_findable_by_its_dia_id(data_file: Path) -> None:
    convs = locomo.load_locomo(data_file)
    _every_turn_is_findable(convs)
    results, _ = locomo.run_api(convs, HashEmbedder(dim=64))
    porch = results["hybrid"][-1]  # evidence D2:1 and the repeated "See you!" (D2:2)
    assert locomo.evidence_recall(porch.retrieved, porch.evidence, 20) == 1.0


LOCOMO_DEV = Path("/work/shared/data/locomo-dev.json")


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="LoCoMo dev file not available")
def test_every_dev_file_turn_is_findable_by_its_dia_id() -> None:
    _every_turn_is_findable(locomo.load_locomo(LOCOMO_DEV))


def test_leave_one_out_picks_on_the_other_conversations() -> None:
    def outcomes(hits: dict[str, str]) -> list[locomo.Outcome]:
        return [locomo.Outcome(conv, 4, (hit,), ("e",)) for conv, hit in hits.items()]

    # point 0 is right on conv a only, point 1 on b and c. Held out a: point 1 wins on
    # b and c. Held out b (or c): the points tie on the other two, the first is kept.
    # Each held-out conversation gets the point that is wrong on it: LOCO 0, pooled 2/3.
    grid = [outcomes({"a": "e", "b": "x", "c": "x"}), outcomes({"a": "x", "b": "e", "c": "e"})]
    loco = locomo.leave_one_out(grid)
    assert loco.picks == {"a": 1, "b": 0, "c": 0}
    assert [o.retrieved for o in loco.outcomes] == [("x",)] * 3
    assert locomo.leave_one_out(grid[:1]).outcomes == grid[0]
    gain, se = locomo.paired_gain(grid[0], grid[1])
    assert gain == pytest.approx(1 / 3) and se > 0


def test_cache_is_written_as_it_fills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cache.npz"
    fake = HashEmbedder(dim=384)
    calls: list[int] = []

    def encode(self: locomo.CachedEmbedder, texts: list[str]) -> Any:
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt  # the run stops half way
        return fake.embed(texts)

    monkeypatch.setattr(locomo.CachedEmbedder, "_encode", encode)
    texts = [f"turn number {i}" for i in range(25)]
    with pytest.raises(KeyboardInterrupt):
        locomo.CachedEmbedder(path, chunk=10).embed(texts)
    again = locomo.CachedEmbedder(path, chunk=10)
    assert len(again._cache) == 20  # the two chunks done before the stop
    calls.clear()
    vecs = again.embed(texts)
    assert calls == [5]  # only the texts the stopped run never embedded
    assert vecs == pytest.approx(fake.embed(texts))


# What the full public file (locomo10.json, ten conversations) holds beyond the dev file's
# five, as far as the bench is concerned: a text repeated within a conversation (conv-47's
# "Jolene: See you!", here three times, once with other spacing and once NFD-composed) and
# across conversations, image turns with and without a caption, a turn with no words but
# its image, a dia_id with a stray space, category-5 questions with only an
# "adversarial_answer", questions with no evidence key or malformed ids, a session with no
# date, an empty session, evidence given as one string, and the per-sample summaries.
FULL_FORMAT = [
    {
        "sample_id": "conv-47",
        "conversation": {
            "speaker_a": "Jolene", "speaker_b": "Deborah",
            "session_1_date_time": "7:31 pm on 21 January, 2022",
            "session_1": [
                turn("Jolene", "D1:1", "I bought a new yoga mat in the café downtown."),
                turn("Deborah", "D1:2", "Nice! Send me a picture.", img_url=["u"],
                     query="yoga mat", blip_caption="a photo of a purple yoga mat"),
                turn("Jolene", "D1:3", "See you!"),
            ],
            "session_2_date_time": "2:01 pm on 23 January, 2022",
            "session_2": [
                {"speaker": "Deborah", "dia_id": "D2:1", "img_url": ["u"],
                 "blip_caption": "a photo of a snake in a terrarium"},  # no words, one image
                turn("Jolene", "D2:2 ", "My snake Susie loves the new terrarium."),
                turn("Jolene", "D2:3", "See  you!"),
            ],
            "session_3": [  # no session date
                turn("Deborah", "D3:1", "The cafe\u0301 downtown has yoga classes now."),
                turn("Jolene", "D3:2", "See you!", img_url=["u"]),  # an image, no caption
            ],
            "session_4_date_time": "1:00 pm on 2 March, 2022",
            "session_4": [],
        },
        "qa": [
            {"question": "What pet does Jolene have?", "answer": "a snake",
             "evidence": ["D2:2", "D2:1"], "category": 4},
            {"question": "When did Jolene buy a yoga mat?", "answer": 2022,
             "evidence": ["D1:1"], "category": 2},
            {"question": "What did Deborah's picture show?",
             "adversarial_answer": "a yoga mat", "evidence": ["D1:2"], "category": 5},
            {"question": "How did Jolene say goodbye?", "answer": "See you!",
             "evidence": ["D1:3", "D2:3; D3:2", "D:3:2", "D30:05"], "category": 1},
            {"question": "What classes does the café offer?", "answer": "yoga",
             "category": 3},
        ],
        "observation": {"session_1_observation": {"Jolene": [["bought a mat", "D1:1"]]}},
        "session_summary": {"session_1_summary": "Jolene bought a yoga mat."},
        "event_summary": {"events_session_1": {"Jolene": [], "date": "21 January, 2022"}},
    },
    {
        "sample_id": "conv-48",
        "conversation": {
            "speaker_a": "Jolene", "speaker_b": "Andrew",
            "session_1_date_time": "9:00 am on 1 June, 2023",
            "session_1": [
                turn("Jolene", "D1:1", "See you!"),  # the same text as in conv-47
                turn("Andrew", "D1:2", "Bye, enjoy the hike with the dogs."),
            ],
        },
        "qa": [{"question": "Who is going hiking with dogs?", "answer": "Andrew",
                "evidence": "D1:2", "category": 4}],  # one id, not a list
    },
]


@pytest.fixture
def full_format_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-full-format.json"
    path.write_text(json.dumps(FULL_FORMAT))
    return path


def test_full_format_file_loads(full_format_file: Path) -> None:
    conv47, conv48 = locomo.load_locomo(full_format_file)
    ids = [t.dia_id for t in conv47.turns]
    assert ids == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3", "D3:1", "D3:2"]
    assert conv47.turns[3].document() == "Deborah: [image: a photo of a snake in a terrarium]"
    assert conv47.turns[6].date_time == ""
    docs = conv47.documents()
    assert [d.dia_ids for d in docs] == [("D1:1",), ("D1:2",), ("D1:3", "D2:3", "D3:2"),
                                        ("D2:1",), ("D2:2",), ("D3:1",)]
    assert [d.dia_ids for d in conv48.documents()] == [("D1:1",), ("D1:2",)]  # own namespace
    assert conv48.questions[0].evidence == ("D1:2",)
    assert [q.category for q in conv47.questions] == [4, 2, 5, 1, 3]
    assert conv47.questions[0].evidence == ("D2:2", "D2:1")
    assert conv47.questions[3].evidence == ("D1:3", "D2:3", "D3:2")
    assert conv47.questions[4].evidence == ()


def test_every_full_format_turn_is_findable_by_its_dia_id(full_format_file: Path) -> None:
    _every_turn_is_findable(locomo.load_locomo(full_format_file))


def test_bench_runs_on_the_full_format(full_format_file: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/locomo.py's command line end to end: API backend, baselines, LOCO, the report."""
    fake = HashEmbedder(dim=384)
    monkeypatch.setattr(locomo, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(locomo.CachedEmbedder, "_encode", lambda self, texts: fake.embed(texts))
    out = tmp_path / "report.json"
    assert locomo.main([str(full_format_file), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["conversations"] == ["conv-47", "conv-48"]
    assert (report["turns"], report["distinct_texts"]) == (10, 8)
    hybrid = report["methods"]["hybrid"]
    assert hybrid["1-4"]["n"] == 5 and hybrid["5"]["n"] == 1
    assert hybrid["1"]["R@20"] == 1.0  # one memory stands for the three goodbyes
    assert set(report["loco"]["per_conversation"]) == {"conv-47", "conv-48"}
    assert (tmp_path / "results" / "locomo-embeddings-minilm-l6.npz").exists()
    assert locomo.main([str(full_format_file), "--json", str(out),
                        "--conversations", "conv-48"]) == 0
    assert json.loads(out.read_text())["conversations"] == ["conv-48"]
    with pytest.raises(SystemExit):
        locomo.main([str(full_format_file), "--conversations", "conv-50"])
