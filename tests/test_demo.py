"""The end-to-end demo (what `make demo` runs) holds every claim."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from walrus_mem._cli.demo import FACTS_A, MEANING_QUERIES, run_demo

from .helpers_cli import envelope_of, invoke


@pytest.mark.model
def test_demo_passes_through_the_cli(clean_environ, real_embedder, monkeypatch):
    """The one run with the real model (the session's copy, shared with other model tests)."""
    import walrus_mem._recall.embeddings

    monkeypatch.setattr(walrus_mem._recall.embeddings, "make_embedder",
                        lambda *a, **k: real_embedder)
    result = invoke(["demo"])
    out = result.stdout
    assert "All " in out and "claims held" in out
    assert "✗" not in out and "DEMO FAILED" not in out
    for step in ("1/9", "9/9"):
        assert step in out
    assert "WrongNamespace" in out and "TamperedBlob" in out
    assert "<walrus-memories nonce=" in out
    # The demo never touches the user's data dir (here: the test's temp data dir).
    assert not clean_environ.exists()


def test_demo_queries_share_no_word_with_their_facts():
    from walrus_mem._cli.demo import _words

    for query, fact in MEANING_QUERIES:
        assert fact in FACTS_A
        assert not _words(query) & _words(fact), (query, fact)


def test_demo_reports_a_failed_claim(monkeypatch, tmp_path):
    import walrus_mem._cli.demo as demo

    def broken_step(n, s):
        n.check(False, "a claim that does not hold")

    monkeypatch.setattr(demo, "_STEPS", [*demo._STEPS[:1], ("broken", broken_step)])
    out = io.StringIO()
    assert run_demo(Console(file=out), workdir=tmp_path) is False
    assert "DEMO FAILED" in out.getvalue() and "a claim that does not hold" in out.getvalue()


def test_demo_failure_exits_1(monkeypatch):
    import walrus_mem._cli.demo as demo

    def broken_step(n, s):
        n.check(False, "nope")

    monkeypatch.setattr(demo, "_STEPS", [("broken", broken_step)])
    result = invoke(["demo"], expect=1)
    assert "DEMO FAILED" in result.stdout
    as_json = invoke(["--json", "demo"], expect=1)
    doc = envelope_of(as_json)
    assert doc["data"] == {"claims_held": False} and doc["error"]["type"] == "ClaimFailed"
    assert "DEMO FAILED" in as_json.stderr
