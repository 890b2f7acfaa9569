"""Red-team findings on the namespace log (docs/sync.md): a forget pulled from
another machine scrubs the text from disk, concurrent updates with unequal version
counts are conflicts, one bad heads-file line does not block sync, heads starting
with '-' work on the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import MOCK_ADMIN_TOKEN, live, machine


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def _disk_holds(data_dir: Path, *needles: bytes) -> list[str]:
    found = []
    for path in sorted(data_dir.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.name}:{n.decode()}" for n in needles if n in data]
    return found


def test_forget_pulled_from_another_machine_leaves_no_text_on_disk(tmp_path: Path,
                                                                   server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        x = a.remember("my bank pin hint is 4321 original", namespace="fp")
        a.remember("the sky is blue", namespace="fp")
        h0 = a.sync().manifests["fp"]
    with machine(tmp_path / "b", server.url) as b:
        b.restore("fp", h0)
        b.update(x.id, "my bank pin hint is 9876 updated on B", namespace="fp")
        b.sync("fp")
    with machine(tmp_path / "a", server.url) as a:
        a.forget(x.id, namespace="fp")  # republishes at once
        ha = a.stats("fp").manifest_blob_id
        assert ha is not None
    with machine(tmp_path / "b", server.url) as b:
        report = b.pull(ha, namespace="fp")
        assert report.forgotten == 1 and x.id not in live(b, "fp")
        assert b._catalog.fts_search("fp", '"sky"', 10) != []
    assert _disk_holds(tmp_path / "b", b"4321", b"9876") == []


def test_a_heads_file_line_that_cannot_be_merged_does_not_block_sync(tmp_path: Path,
                                                                     server) -> None:
    heads = tmp_path / "shared" / "heads.txt"
    with machine(tmp_path / "a", server.url, heads_file=heads) as a:
        a.remember("heads file fact A", namespace="hf")
        blob, _, digest = a.sync().manifests["hf"].split(".")
    good = heads.read_text()
    gone = "A" * 43  # a well-formed blob id no one stored (gone / expired)
    bad = [f"{gone}.5.{'ab' * 32}", f"{blob}.9.{digest}", f"{blob}.1.{'cd' * 32}"]
    heads.write_text(good + "".join(f"hf {line}\n" for line in bad))
    with machine(tmp_path / "a", server.url, heads_file=heads) as a:
        a.remember("fact 2 after the bad lines", namespace="hf")
        report = a.sync()
        assert report.errors == [] and "hf" in report.manifests
        assert len(report.skipped_heads) == 3
        # the forged seq and digest are the line's own errors: its reference names
        # something other than what its blob holds (InvalidHead), not a lying aggregator
        for line, reason in zip(bad, ("BlobNotFound", "InvalidHead", "InvalidHead"),
                                strict=True):
            assert any(s.startswith(f"hf {line}: {reason}") for s in report.skipped_heads)
        new_head = report.manifests["hf"]
        # sync dropped the lines of the real blob (its new head supersedes them); the
        # gone one stays: pull without heads reports it and does not raise.
        pulled = a.pull(namespace="hf")
        assert pulled.up_to_date and [s.split(":")[0] for s in pulled.skipped] == [bad[0]]
    with machine(tmp_path / "b", server.url) as b:
        b.restore("hf", new_head)
        assert sorted(live(b, "hf").values()) == ["fact 2 after the bad lines",
                                                  "heads file fact A"]


def test_concurrent_updates_with_unequal_version_counts_are_a_conflict(tmp_path: Path,
                                                                       server) -> None:
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        y = a.remember("Y as written first", namespace="uv")
        z = a.remember("Z as written first", namespace="uv")
        b.restore("uv", a.sync().manifests["uv"])
        a.update(y.id, "Y by A v2", namespace="uv")
        a.update(y.id, "Y by A v3", namespace="uv")
        b.update(y.id, "Y by B v2", namespace="uv")
        ha, hb = a.sync().manifests["uv"], b.sync().manifests["uv"]
        ra, rb = a.pull(hb, namespace="uv"), b.pull(ha, namespace="uv")
        assert live(a, "uv") == live(b, "uv") and live(a, "uv")[y.id] == "Y by A v3"
        assert (ra.conflicts, rb.conflicts) == (1, 1)
        for m in (a, b):
            assert ("CONFLICT", "Y by B v2") in [(h.event, h.text)
                                                 for h in m.history(y.id, namespace="uv")]
        # Sequential updates are no conflict: B takes A's v3 and updates it twice
        # (v5); A updates Z once meanwhile; nothing here is concurrent.
        a.sync(), b.sync()
        b.update(y.id, "Y by B v4", namespace="uv")
        b.update(y.id, "Y by B v5", namespace="uv")
        a.update(z.id, "Z by A v2", namespace="uv")
        ha, hb = a.sync().manifests["uv"], b.sync().manifests["uv"]
        ra, rb = a.pull(hb, namespace="uv"), b.pull(ha, namespace="uv")
        assert (ra.conflicts, rb.conflicts) == (0, 0) and ra.updated == rb.updated == 1
        assert live(a, "uv") == live(b, "uv")
        assert live(a, "uv")[y.id] == "Y by B v5" and live(a, "uv")[z.id] == "Z by A v2"
