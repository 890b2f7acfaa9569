"""A head recorded but not announced (issue 10 red team f5): a sync SIGKILLed between
recording its manifest in the catalog and writing heads.sqlite3 / the heads file must
still announce it, at the next sync, or no other machine ever learns it. Loopback HTTP
relayer; kills are real SIGKILLs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import MOCK_ADMIN_TOKEN, live, machine
from walrus_mem import Memory
from walrus_mem._log.heads import HeadRef, HeadsFile

ROOT = str(Path(__file__).resolve().parent.parent)

_KILL_AT = """
import os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.helpers_log import machine
import {module} as target
cls = getattr(target, {cls!r})
real = getattr(cls, {method!r})
def killed(*a, **k):
    if {when!r} == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    out = real(*a, **k)
    os.kill(os.getpid(), signal.SIGKILL)
setattr(cls, {method!r}, killed)
mem = machine(Path({data!r}), {url!r}, state_dir=Path({state!r}), heads_file=Path({hf!r}))
mem.sync("k")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def _at(tmp_path: Path, name: str, url: str, **kw: Any) -> Memory:
    """A machine with its own per-user state dir, sharing the heads file."""
    return machine(tmp_path / name, url, state_dir=tmp_path / f"{name}-state",
                   heads_file=tmp_path / "shared" / "heads.txt", **kw)


def _kill_sync(tmp_path: Path, url: str, name: str, target: str, when: str) -> None:
    module, _, attr = target.rpartition(":")
    cls, method = attr.split(".")
    script = _KILL_AT.format(root=ROOT, module=module, cls=cls, method=method, when=when,
                             data=str(tmp_path / name), url=url,
                             state=str(tmp_path / f"{name}-state"),
                             hf=str(tmp_path / "shared" / "heads.txt"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]


def _lines(tmp_path: Path) -> list[HeadRef]:
    return [ref for _, ref in HeadsFile(tmp_path / "shared" / "heads.txt").read("k")]


@pytest.mark.parametrize(("target", "when"), [
    ("walrus_mem._catalog.log_tables:LogTables.record_manifest", "after"),  # nothing announced
    ("walrus_mem._log.heads:HeadsFile.replace", "before"),  # heads.sqlite3 has it, the file not
    ("walrus_mem._catalog.log_tables:LogTables.announced", "before"),  # all written, not cleared
])
def test_a_sync_killed_before_announcing_its_head_announces_it_next_time(
        tmp_path: Path, server: RelayerServer, target: str, when: str) -> None:
    with _at(tmp_path, "a", server.url) as a, _at(tmp_path, "b", server.url) as b:
        a.remember("the seed fact", namespace="k")
        a.sync("k")
        b.sync("k")  # learns A's head through the file
        mine = b.remember("B's fact, published by the killed sync", namespace="k")
    _kill_sync(tmp_path, server.url, "b", target, when)
    with _at(tmp_path, "b", server.url) as b:
        recorded = b.stats("k").manifest_blob_id  # the killed sync did publish
        assert recorded is not None
        report = b.sync("k")  # nothing new to publish: only the announcement is left
        assert report.errors == [] and report.manifests == {}
        ref = HeadRef.parse(recorded)
        assert _lines(tmp_path) == [ref]
        assert b._log.seen.get("k", ref.blob_id) is not None
        assert b.sync("k").errors == [] and _lines(tmp_path) == [ref]  # idempotent
        assert b._log.tables.unannounced("k") is None
    with _at(tmp_path, "a", server.url) as a:
        assert a.sync("k").pulled["k"].added == 1
        assert mine.id in live(a, "k")


def test_a_head_superseded_before_it_was_announced_again_is_not_written_back(
        tmp_path: Path, server: RelayerServer) -> None:
    """B wrote its line and was killed before clearing the pending announcement; A then
    merged B's head and replaced that line with its own: B must not add a stale line."""
    with _at(tmp_path, "a", server.url) as a, _at(tmp_path, "b", server.url) as b:
        a.remember("the seed fact", namespace="k")
        a.sync("k")
        b.sync("k")
        b.remember("B's fact", namespace="k")
    _kill_sync(tmp_path, server.url, "b", "walrus_mem._catalog.log_tables:LogTables.announced",
               "before")
    with _at(tmp_path, "a", server.url) as a:
        a.remember("A's fact after merging B", namespace="k")
        newer = HeadRef.parse(a.sync("k").manifests["k"])
    assert _lines(tmp_path) == [newer]
    with _at(tmp_path, "b", server.url) as b:
        assert b._log.tables.unannounced("k") is not None
        assert b.sync("k").errors == []
        assert b._log.tables.unannounced("k") is None
        assert _lines(tmp_path) == [newer]


def test_a_heads_file_that_cannot_be_written_is_reported_and_written_by_the_next_sync(
        tmp_path: Path, server: RelayerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    with _at(tmp_path, "a", server.url) as a, _at(tmp_path, "b", server.url) as b:
        a.remember("the seed fact", namespace="k")
        a.sync("k")
        b.sync("k")
        mine = b.remember("B's fact", namespace="k")
        real = HeadsFile.replace

        def refused(self: HeadsFile, *args: Any) -> None:
            raise PermissionError(13, "Permission denied", str(self.path))

        monkeypatch.setattr(HeadsFile, "replace", refused)
        report = b.sync("k")
        head = report.manifests["k"]  # published all the same
        assert any("announce" in e and "next sync" in e for e in report.errors)
        assert a.sync("k").pulled == {}  # A cannot know it yet
        monkeypatch.setattr(HeadsFile, "replace", real)
        assert b.sync("k").errors == []
        assert _lines(tmp_path) == [HeadRef.parse(head)]
        assert a.sync("k").pulled["k"].added == 1 and mine.id in live(a, "k")
