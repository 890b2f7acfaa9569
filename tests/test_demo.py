"""The end-to-end demo (what `make demo` runs) holds every claim."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from walrus_mem.demo import run_demo

from .helpers_cli import invoke


@pytest.mark.model
def test_demo_passes_through_the_cli():
    result = invoke(["demo"])
    assert "✓" in result.stdout and "✗" not in result.stdout
    assert "DEMO FAILED" not in result.stdout


def test_demo_reports_a_failed_claim(monkeypatch, tmp_path):
    import walrus_mem.demo as demo

    def broken_step(n, s):
        n.check(False, "a claim that does not hold")

    monkeypatch.setattr(demo, "_STEPS", [*demo._STEPS[:1], ("broken", broken_step)])
    out = io.StringIO()
    assert run_demo(Console(file=out), workdir=tmp_path) is False
    assert "DEMO FAILED" in out.getvalue() and "a claim that does not hold" in out.getvalue()
