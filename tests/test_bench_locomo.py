"""bench/locomo.py: data loading, evidence cleaning, the official recall metric, both backends.

Uses a small synthetic LoCoMo-format file and the fake embedder (no model).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench import locomo
from walrus_mem import ranking
from walrus_mem.testing import HashEmbedder


def turn(speaker: str, dia_id: str, text: str, **extra: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def sample(sample_id: str, a: str, b: str, turns: dict[int, list[dict[str, str]]],
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
            10: [turn("Ann", "D10:1", "I adopted a tortoise named Shelly last week.")],
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
        ],
    ),
    sample(
        "conv-2",
        "Cy",
        "Di",
        {1: [turn("Cy", "D1:1", "My tortoise escaped the garden."),
             turn("Di", "D1:2", "Oh no, did you find it?")]},
        [{"question": "What escaped?", "answer": "tortoise", "evidence": ["D1:1"],
          "category": 4}],
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
    assert [t.dia_id for t in c1.turns] == ["D1:1", "D1:2", "D2:1", "D2:2", "D2:3", "D10:1"]
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


def test_summarize_groups_categories() -> None:
    outcomes = [
        locomo.Outcome("c", 1, ("a",), ("a",)),
        locomo.Outcome("c", 4, ("b",), ("a",)),
        locomo.Outcome("c", 5, ("a",), ("a",)),
    ]
    table = locomo.summarize(outcomes, ks=(1,))
    assert table["1-4"] == {"n": 2.0, "R@1": 0.5}
    assert table["5"] == {"n": 1.0, "R@1": 1.0}
    assert table["all"]["R@1"] == pytest.approx(2 / 3)
    assert "2" not in table and "3" not in table
    assert "1-4" in locomo.format_table("t", table, ks=(1,))


def test_standalone_backend_end_to_end(data_file: Path) -> None:
    convs = locomo.load_locomo(data_file)
    results = locomo.run_standalone(convs, HashEmbedder(dim=64))
    assert set(results) == {"bm25", "dense", "hybrid"}
    hybrid = [o.retrieved for o in results["hybrid"]]  # questions in file order
    assert hybrid[0][0] == "D1:1"
    # The answer shares no word with the question and follows the turn that asked it.
    # With the fake embedder its own cosine is 0, so the context gate gives it nothing
    # (LoCoMo turns carry the speaker's name, which keeps real answers above the gate);
    # with the gate off it inherits from the question and ranks right after it.
    assert hybrid[1][0] == "D2:1" and "D2:2" not in results["bm25"][1].retrieved
    ungated = replace(ranking.DEFAULT_PARAMS, context_gate=0.0)
    ctx = locomo.run_standalone(convs, HashEmbedder(dim=64), params=ungated)
    assert ctx["hybrid"][1].retrieved[:2] == ("D2:1", "D2:2")
    # namespaces are separate: conv-2's question only sees conv-2's turns
    assert set(hybrid[5]) == {"D1:1", "D1:2"} and hybrid[5][0] == "D1:1"


def test_api_backend_end_to_end(data_file: Path) -> None:
    convs = locomo.load_locomo(data_file)
    results, timings = locomo.run_api(convs, HashEmbedder(dim=64))
    assert {o.sample_id for o in results["hybrid"]} == {"conv-1", "conv-2"}
    assert len(results["hybrid"]) == 6
    standalone = locomo.run_standalone(convs, HashEmbedder(dim=64))
    for name in ("bm25", "hybrid"):
        api = locomo.summarize(results[name])["1-4"]
        ref = locomo.summarize(standalone[name])["1-4"]
        assert api == pytest.approx(ref), name
    assert timings["recall_p50_ms"] > 0
