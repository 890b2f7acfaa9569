"""Query understanding: time expressions, memory dates, names, and the recall prior."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from walrus_mem._recall import temporal
from walrus_mem._recall.query_features import (
    analyse,
    candidate_prior,
    mentions_time,
    names,
    starts_with,
    wanted,
)
from walrus_mem._recall.ranking import DEFAULT_PARAMS
from walrus_mem._recall.temporal import Span, memory_time, parse_time, query_spans
from walrus_mem.config import Settings
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

DAY = 86400.0


def ts(year: int, month: int, day: int, hour: int = 0) -> float:
    return datetime(year, month, day, hour, tzinfo=UTC).timestamp()


# --------------------------------------------------------------------------- temporal


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("What did Gina find on 1 February, 2023?", ts(2023, 2, 1), ts(2023, 2, 2)),
        ("What was accepted on May 23, 2023?", ts(2023, 5, 23), ts(2023, 5, 24)),
        ("What happened on the 3rd of June 2023", ts(2023, 6, 3), ts(2023, 6, 4)),
        ("notes from 2024-02-29", ts(2024, 2, 29), ts(2024, 3, 1)),
        ("What did Maria donate in December 2023?", ts(2023, 12, 1), ts(2024, 1, 1)),
        ("Where did I travel in Sept. 2022?", ts(2022, 9, 1), ts(2022, 10, 1)),
        ("How often did she go to the beach in 2023?", ts(2023, 1, 1), ts(2024, 1, 1)),
    ],
)
def test_absolute_dates_become_spans(text: str, start: float, end: float) -> None:
    assert query_spans(text) == [Span(start, end)]


def test_a_month_without_a_year_matches_that_month_of_any_year() -> None:
    (span,) = query_spans("When did Melanie go camping in June?")
    assert span == Span(month=6)
    assert span.contains(ts(2023, 6, 30)) and span.contains(ts(1999, 6, 1))
    assert not span.contains(ts(2023, 7, 9))
    assert span.contains(ts(2023, 7, 6), slack_days=7)  # told a few days later


def test_words_that_only_look_like_months_are_not_times() -> None:
    assert query_spans("What may Ana like for dinner?") == []
    assert query_spans("Did Mar go to the March for science?") == []  # no preposition
    assert query_spans("What did I buy on 31 February, 2023?") == []  # no such day
    assert query_spans("What is 2023 minus 5?") == []  # a bare number is not a year


def test_relative_times_need_the_time_of_the_query() -> None:
    assert query_spans("What did I do yesterday?") == []
    now = ts(2026, 11, 24, 15)  # a Tuesday
    assert query_spans("What did I do yesterday?", now) == [Span(ts(2026, 11, 23),
                                                                 ts(2026, 11, 24))]
    assert query_spans("meetings last week", now) == [Span(ts(2026, 11, 16), ts(2026, 11, 23))]
    assert query_spans("books I read last month", now) == [Span(ts(2026, 10, 1),
                                                               ts(2026, 11, 1))]
    assert query_spans("trips this year", now) == [Span(ts(2026, 1, 1), ts(2027, 1, 1))]


def test_a_span_reaches_slack_days_past_its_end() -> None:
    day = Span(ts(2023, 5, 8), ts(2023, 5, 9))
    assert day.contains(ts(2023, 5, 8, 13))
    assert not day.contains(ts(2023, 5, 10)) and day.contains(ts(2023, 5, 10), slack_days=7)
    assert not day.contains(ts(2023, 5, 7, 23), slack_days=7)  # never before the span
    assert not day.contains(float("nan"))


def test_parse_time_reads_the_usual_date_shapes() -> None:
    assert parse_time("1:56 pm on 8 May, 2023") == ts(2023, 5, 8)
    assert parse_time("2023-05-08T13:56:00Z") == ts(2023, 5, 8, 13) + 56 * 60
    assert parse_time("2023-05-08") == ts(2023, 5, 8)
    assert parse_time(1683500000) == 1683500000.0
    assert parse_time(datetime(2023, 5, 8, tzinfo=UTC)) == ts(2023, 5, 8)
    for junk in (True, None, "", "soon", float("nan"), float("inf"), [2023], {"y": 1}):
        assert parse_time(junk) is None


def test_memory_time_prefers_a_date_in_metadata_over_the_write_time() -> None:
    written = ts(2026, 1, 1)
    assert memory_time({"date_time": "1:56 pm on 8 May, 2023"}, written) == ts(2023, 5, 8)
    assert memory_time({"date": "not a date", "timestamp": ts(2020, 1, 1)}, written) == ts(
        2020, 1, 1)
    assert memory_time({"topic": "May 8, 2023"}, written) == written  # not a date key
    assert memory_time({}, written) == written


def test_dates_at_the_edge_of_the_calendar_are_no_times() -> None:
    for text in ("in December 9999", "on 31 December, 9999", "9999-12-31", "in december 0000"):
        assert query_spans(text) == []
    june = Span(month=6)
    for ts_ in (1e20, -1e20, float("inf")):  # a "timestamp" in metadata can be anything
        assert not june.contains(ts_, 7)
        assert not Span(0.0, DAY).contains(ts_, 7)


@given(st.text(max_size=300))
@example("in December 9999 or on 31 December, 9999")
def test_time_parsing_never_raises(text: str) -> None:
    for span in query_spans(text, now=ts(2026, 1, 1)):
        assert span.month is not None or span.start < span.end
    parse_time(text)
    analyse(text, now=ts(2026, 1, 1))


# --------------------------------------------------------------------------- names and prior


def test_names_are_capitalised_words_that_are_not_stopwords_months_or_verbs() -> None:
    assert names("When did Caroline go to the LGBTQ support group?") == ["caroline", "lgbtq"]
    assert names("What did Tim suggest to John, and did John agree?") == ["tim", "john"]
    assert names("What snacks should I avoid in June? Tell me.") == []
    assert names("Caroline's hobbies") == ["caroline"]


@pytest.mark.parametrize(
    ("query", "asks"),
    [("When did Caroline go to the support group?", True), ("how long has Ana lived there", True),
     ("What year did Jon open his studio?", True), ("Which day is the dentist?", True),
     ("What did Caroline research?", False), ("Whenever I travel, what do I pack?", False)],
)
def test_a_question_for_a_time_is_recognised(query: str, asks: bool) -> None:
    assert analyse(query).asks_when is asks


def _prior(query: str, texts: list[str], times: list[float], **params: float) -> list[float] | None:
    prior = candidate_prior(analyse(query), texts, lambda: times, replace(DEFAULT_PARAMS, **params))
    return None if prior is None else prior.tolist()


NAN = float("nan")


def test_prior_lowers_the_candidates_that_miss_a_named_subject_or_time() -> None:
    texts = ["Ana: went to the fair", "Bo: went too", "Ana's brother went", "Cy: so did I"]
    times = [ts(2023, 5, 8, 13), ts(2023, 5, 9), ts(2023, 9, 1), ts(2023, 5, 20)]
    got = _prior("What did Ana do on 8 May, 2023?", texts, times)
    # Bo is dated the day after (within the slack) but is not Ana; Cy is neither
    assert got == pytest.approx([1.0, 0.75, 0.5, 0.75 * 0.5])
    assert _prior("What did Ana do on 8 May, 2023?", texts, times, subject_weight=0.0,
                  time_weight=0.0) is None


def test_a_when_question_lowers_the_candidates_that_mention_no_time() -> None:
    texts = ["Bo: we moved, it was great", "Bo: we moved last summer", "Bo: moved in 2019"]
    assert _prior("when did Bo move?", texts, [NAN] * 3) == pytest.approx([0.7, 1.0, 1.0])
    assert _prior("where did Bo move?", texts, [NAN] * 3) is None


def test_prior_changes_nothing_when_every_or_no_candidate_matches() -> None:
    times = [ts(2023, 5, 8), ts(2023, 6, 1)]
    # both start with Ana; neither is in 2022
    assert _prior("What did Ana do in 2022?", ["Ana: a", "Ana: b"], times) is None
    assert _prior("What did Ana do in 2022?", ["Bo: a", "Cy: b"], times) is None
    assert _prior("what do I like to eat", ["Bo: a", "Cy: b"], times) is None


def test_subjects_and_times_are_read_from_the_start_and_the_words_of_a_text() -> None:
    assert starts_with("Ana: hello", ("ana",)) and starts_with("ANA's car", ("ana",))
    assert not starts_with("Bo met Ana", ("ana",)) and not starts_with("", ("ana",))
    assert mentions_time("see you next week") and mentions_time("back in 2019")
    assert mentions_time("two days ago") and not mentions_time("I like the lake")
    assert not wanted(analyse("what do I like"), DEFAULT_PARAMS)
    assert not wanted(analyse("When did Ana go?"), replace(
        DEFAULT_PARAMS, subject_weight=0.0, when_weight=0.0))


# --------------------------------------------------------------------------- through recall


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    settings = Settings(config_file=None, data_dir=tmp_path, publisher_url=None,
                        aggregator_urls=[])
    return Memory(settings, embedder=HashEmbedder(dim=256), master_key="00" * 32)


def test_recall_ranks_the_named_subjects_memory_first(memory: Memory) -> None:
    with memory as mem:
        mem.remember_many([
            "Bo: Ana and I go hiking",
            "Ana: I go hiking in the hills",
        ])
        query = "Where does Ana go hiking?"
        off = replace(DEFAULT_PARAMS, subject_weight=0.0)
        assert mem.recall(query, min_score=0, params=off)[0].text.startswith("Bo:")
        hits = mem.recall(query, min_score=0)
        assert hits[0].text.startswith("Ana:")
        by_text = {h.text[:3]: h.score for h in hits}
        plain = {h.text[:3]: h.score for h in mem.recall(query, min_score=0, params=off)}
        assert by_text["Ana"] == plain["Ana"] and by_text["Bo:"] < plain["Bo:"]  # only lowers


def test_recall_matches_a_named_date_against_the_memorys_own_date(memory: Memory) -> None:
    with memory as mem:
        mem.remember_many([
            {"text": "Went to the beach with the whole family",
             "metadata": {"date": "2023-07-02"}},
            {"text": "Went to the beach with friends",
             "metadata": {"date_time": "1:56 pm on 8 May, 2023"}},
            {"text": "Cleaned the garage"},  # no date in metadata: its write time
        ])
        query = "Who went to the beach in July 2023?"
        off = replace(DEFAULT_PARAMS, time_weight=0.0)
        assert "friends" in mem.recall(query, min_score=0, params=off)[0].text
        assert "family" in mem.recall(query, min_score=0)[0].text
        # a date no memory has changes nothing
        assert [h.text for h in mem.recall("Who went to the beach in 2019?", min_score=0)] == [
            h.text for h in mem.recall("Who went to the beach in 2019?", min_score=0, params=off)]


def test_recall_answers_a_when_question_with_the_memory_that_says_when(memory: Memory) -> None:
    with memory as mem:
        mem.remember_many(["Ana: moved to Lisbon, I love the city",
                           "Ana: I moved to Lisbon the summer after graduating"])
        query = "When did Ana move to Lisbon?"
        off = replace(DEFAULT_PARAMS, when_weight=0.0)
        assert "love" in mem.recall(query, min_score=0, params=off)[0].text
        assert "summer" in mem.recall(query, min_score=0)[0].text


def test_recall_survives_odd_dates_in_queries_and_metadata(memory: Memory) -> None:
    with memory as mem:
        mem.remember_many([
            {"text": "Ana: the far future", "metadata": {"timestamp": 1e300}},
            {"text": "Ana: the distant past", "metadata": {"date": "0001-01-01"}},
            {"text": "Ana: a bad date", "metadata": {"date_time": "soon-ish", "time": True}},
        ])
        for query in ("When did Ana go in December 9999?", "What did Ana do in June?",
                      "What did Ana do yesterday?", "When was 0001-01-01?"):
            assert len(mem.recall(query, min_score=0)) == 3


_TIME_WORDS = ["in", "of", "on", "since", "by", "during", "early", "late", "mid", "last", "this",
               "may", "May", "june", "Jun.", "sept", "december", "2023", "1999", "8", "21st",
               "yesterday", "today", "tonight", "morning", "night", "week", "weekend", "month",
               "year", "2023-05-08", ",", "did", "Ana", "go", "the", "concert", "march", "mar",
               "Last week", "last  night", "THIS MONTH", "this morning", "last year", "in May",
               "8 May, 2023", "May 8 2023", "in 2022", "during sept", "last weekend",
               "w01234", "12345", "2023x", "x2023", "5th", "of", "2021-13-01", "20", "1999."]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TIME_WORDS), max_size=9),
       st.sampled_from([None, 1_700_000_000.0]))
@example(["Last", "week"], 1_700_000_000.0)
@example(["last", "night"], 1_700_000_000.0)
def test_the_quick_no_time_check_never_hides_a_time(words: list[str], now: float | None) -> None:
    """query_spans returns early when no four-digit number, month name or relative word
    occurs: the same spans as running every pattern."""
    text = " ".join(words)
    with patch.object(temporal, "_MAYBE_TIME", re.compile("")):  # matches everything
        full = query_spans(text, now)
    assert query_spans(text, now) == full
