"""Issue 26 item 4: capture keeps the fact and drops the secret; guesses are not facts.

Runs the real capture path (MemoryHooks.capture_now into a recording stub, see
bench/capture.py) on tests/data/capture_turns.json.
"""

from __future__ import annotations

import pytest

from bench.capture import evaluate, stored_facts
from walrus_mem.extract import extract_facts


def test_fact_kept_and_password_never_stored():
    stored = stored_facts("My daughter Lina starts school in September and my password is hunter2")
    assert any("Lina" in fact and "September" in fact for fact in stored)
    assert not any("hunter2" in fact for fact in stored)


def test_fact_kept_with_a_command_line_secret_redacted():
    stored = stored_facts("I run on Arch Linux at home, and I log in to the server with "
                          "mysql -u root -pDr4g0nFly! every morning")
    assert any("Arch Linux" in fact for fact in stored)
    assert "Dr4g0nFly" not in " ".join(stored)


@pytest.mark.parametrize("text", [
    "Maybe I'll try Rust someday, not sure.",
    "If I ever move to Berlin, I'd probably get a bike.",
    "I might learn Go next year, who knows.",
    "One day I'd love to run a marathon, maybe.",
    "Vielleicht probiere ich irgendwann Rust aus, bin mir nicht sicher.",
    "Quizás aprenda Kotlin algún día, no estoy seguro.",
    "Peut-être que j'essaierai Python un jour, je ne sais pas.",
    "Может быть, когда-нибудь попробую Rust, не уверен.",
])
def test_guesses_are_not_facts(text):
    assert extract_facts(text) == []


@pytest.mark.parametrize(("text", "word"), [
    ("If a deploy fails, we always roll back first and investigate later.", "roll back"),
    ("I'm sure I'll be in Berlin on Monday for the offsite.", "Berlin"),
    ("My colleague May runs the data team in Oslo.", "Oslo"),
    ("I live in Porto, and maybe I'll move to Lisbon next year.", "Porto"),
    ("I can't stop thinking about the screenplay I finished last week.", "screenplay"),
])
def test_facts_that_look_hedged_are_kept(text, word):
    facts = [f.text for f in extract_facts(text)]
    assert any(word in fact for fact in facts)
    assert not any("Lisbon" in fact for fact in facts)


def test_capture_set_figures():
    """Held-out half measured once after tuning on dev: precision 0.94, recall 0.85."""
    result = evaluate()
    for split in ("dev", "heldout"):
        figures = result[split]["all"]
        assert figures["leaked"] == 0
        assert figures["precision"] >= 0.9
        assert figures["recall"] >= 0.8
