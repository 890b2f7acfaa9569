"""One bad server answer or one bad entry never blocks a namespace for good, nor makes a
manifest drop memories (issue 10 red team, availability findings; docs/sync.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import live, machine
from tests.helpers_proxy import HookProxy


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus")) as srv:
        yield srv


# -- heads file ------------------------------------------------------------------------


def test_a_transient_aggregator_error_does_not_blacklist_a_head(tmp_path: Path,
                                                                server) -> None:
    """A long-running process synced once during a 503: the head was cached as unusable
    for the process lifetime, and every later sync skipped A's writes."""
    heads = tmp_path / "shared" / "heads.txt"
    down = {"on": False}
    with HookProxy(server.url, lambda m, p, b: (503, b"busy")
                   if down["on"] and m == "GET" else None) as agg, \
            machine(tmp_path / "a", server.url, heads_file=heads) as a, \
            machine(tmp_path / "b", server.url, aggregator=agg.url, heads_file=heads,
                    read_deadline=1.0) as b:
        a.remember("first fact", namespace="tr")
        a.sync()
        b.sync("tr")
        new = a.remember("A's new fact", namespace="tr")
        a.sync()
        down["on"] = True
        during = b.sync("tr")
        assert any("AggregatorUnavailable" in s for s in during.skipped_heads)
        down["on"] = False
        after = b.sync("tr")
        assert after.skipped_heads == [] and "tr" in after.pulled
        assert new.id in live(b, "tr")


def test_a_damaged_heads_file_is_reported_never_raised(tmp_path: Path, server) -> None:
    """Non-UTF-8 bytes made every sync raise UnicodeDecodeError; a BOM or a truncated
    head made the line vanish without a word."""
    heads = tmp_path / "shared" / "heads.txt"
    with machine(tmp_path / "a", server.url, heads_file=heads) as a:
        a.remember("alpha", namespace="hg")
        head = a.sync().manifests["hg"]
    heads.write_bytes(bytes(range(256)) * 4 + f"\nhg {head[:-10]}\n".encode())
    with machine(tmp_path / "b", server.url, heads_file=heads) as b:
        report = b.sync("hg")
        assert report.errors == [] and "hg" not in report.pulled
        assert any("not valid UTF-8" in s for s in report.skipped_heads)
        assert any("digest" in s for s in report.skipped_heads)
        assert len(report.skipped_heads) <= 11  # a flood of bad lines is summed up
    heads.write_text(f"\ufeffhg {head}\r\n", encoding="utf-8")
    with machine(tmp_path / "c", server.url, heads_file=heads) as c:
        report = c.sync("hg")
        assert "hg" in report.pulled and report.skipped_heads == []
        assert sorted(live(c, "hg").values()) == ["alpha"]
