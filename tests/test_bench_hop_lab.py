"""bench/_hop_lab.py (issue 26 item 6): its text helpers, and every variant "off" is the
engine's recall exactly (so a LOCO pick of "off" scores as the defaults).

Synthetic LoCoMo-format file and the fake embedder (no model).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench import _hop_lab as lab
from bench import locomo
from walrus_mem.testing import HashEmbedder


def turn(speaker: str, dia_id: str, text: str) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


def conversation(sample_id: str) -> dict[str, Any]:
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Jon", "speaker_b": "Gina",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [
                turn("Jon", "D1:1", "I went to Paris with my sister last week."),
                turn("Gina", "D1:2", "Wow! Did you see the Louvre?"),
                turn("Jon", "D1:3", "Yes, and we ate crepes near Montmartre."),
                turn("Gina", "D1:4", "See ya!"),
            ],
            "session_2_date_time": "2:00 pm on 9 June, 2023",
            "session_2": [
                turn("Gina", "D2:1", "I opened my clothing store in Rome yesterday."),
                turn("Jon", "D2:2", "Congrats Gina! My dance studio opens soon."),
                turn("Gina", "D2:3", "Which games do you play? I play Valorant and chess."),
                turn("Jon", "D2:4", "Mostly chess, and some Street Fighter."),
            ],
        },
        "qa": [
            {"question": "Which cities have Jon and Gina visited?", "answer": "Paris, Rome",
             "evidence": ["D1:1", "D2:1"], "category": 1},
            {"question": "What games does Jon play?", "answer": "chess, Street Fighter",
             "evidence": ["D2:4"], "category": 1},
            {"question": "What did Gina open and where?", "answer": "a store in Rome",
             "evidence": ["D2:1"], "category": 4},
            {"question": "Would Jon like France?", "answer": "yes", "evidence": ["D1:3"],
             "category": 3},
        ],
    }


@pytest.fixture
def hop_lab(tmp_path: Path) -> lab.Lab:
    path = tmp_path / "locomo-mini.json"
    path.write_text(json.dumps([conversation("conv-a"), conversation("conv-b")]))
    return lab.load(path, None, embedder=HashEmbedder())


def test_entities_are_capitalised_words_inside_a_sentence() -> None:
    text = "Jon: I went to Paris with Gina's sister. Then Rome, and the \"Louvre\"."
    # "Jon" (the speaker), "I", "Then" (after ".") and "Louvre" (after a quote) are not
    assert lab.entities(text) == ["paris", "gina", "rome"]
    assert lab.entities(text, frozenset({"gina"})) == ["paris", "rome"]
    assert lab.entities("Nate: See ya!") == []


def test_list_questions() -> None:
    assert lab.asks_for_list("How many games has John won?")
    assert lab.asks_for_list("What books has Melanie read?")
    assert lab.asks_for_list("What kinds of paintings does Caroline make?")
    assert not lab.asks_for_list("What kind of art does Caroline make?")  # the head noun counts
    assert lab.asks_for_list("What do Jon and Gina both have in common?")
    assert not lab.asks_for_list("What is Caroline's job?")
    assert not lab.asks_for_list("When did Melanie paint a sunrise?")


def test_subqueries_split_names_then_clauses() -> None:
    assert lab.subqueries("Which city have both Jean and John visited?") == [
        "Which city have both Jean visited?", "Which city have both John visited?"]
    assert lab.subqueries("What people has Maria met and helped while volunteering?") == [
        "What people has Maria met?", "helped while volunteering?"]
    assert lab.subqueries("What did Gina open?") == []


def test_rrf_weights_and_ties() -> None:
    assert lab.rrf([(1.0, [1, 2, 3]), (1.0, [3, 2])], k0=1.0) == [3, 1, 2]  # 4/3, 1, 1
    assert lab.rrf([(3.0, [1, 2, 3]), (1.0, [3, 2])], k0=1.0) == [1, 2, 3]
    assert lab.rrf([(1.0, [5]), (1.0, [4])], k0=60.0) == [4, 5]  # a tie: the lower row first


def test_relative_prior_lowers_only_when_mixed() -> None:
    factor = lab.relative({0: True, 1: False}, 0.3)
    assert factor(0) == 1.0 and factor(1) == pytest.approx(0.7)
    assert lab.relative({0: False, 1: False}, 0.3)(1) == 1.0
    assert lab.relative({0: True, 1: True}, 0.3)(1) == 1.0


def test_every_variant_off_is_the_engines_recall(hop_lab: lab.Lab) -> None:
    base = lab.outcomes(hop_lab, lambda _lab, s: lab.rows_of(lab.ranked(s)))
    engine = locomo.rank_all(hop_lab.sigs, lab.PARAMS, k=lab.TOP)
    assert [o.retrieved for o in base] == [o.retrieved for o in engine]
    for name, (fn, grid) in lab.VARIANTS.items():
        off = lab.outcomes(hop_lab, fn, **grid[0])
        assert [o.retrieved for o in off] == [o.retrieved for o in base], name


def test_a_variant_on_changes_rankings_and_loco_picks_from_its_grid(hop_lab: lab.Lab) -> None:
    base = lab.outcomes(hop_lab, lambda _lab, s: lab.rows_of(lab.ranked(s)))
    on = lab.outcomes(hop_lab, lab.short_prior, w=0.9, words=4)
    assert [o.retrieved for o in on] != [o.retrieved for o in base]  # "See ya!" goes down
    row, picks = lab.run_variant(hop_lab, "short-prior", base, verbose=False)
    assert set(picks) == {"conv-a", "conv-b"}
    assert all(p in lab.VARIANTS["short-prior"][1] for p in picks.values())
    assert set(row.gain) == {"1-4", "1", "2", "3", "4", "5"}
    assert math.isnan(row.r5["5"]) and row.gain["5"] == (0.0, 0.0)  # no category 5 here
