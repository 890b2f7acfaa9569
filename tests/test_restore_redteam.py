"""Restore and sync under the issue 10 red team: a failed restore of a rotated namespace,
and a restore mark that belongs to a pull still running in another process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import MOCK_ADMIN_TOKEN, dir_snapshot, machine
from walrus_mem._cli.doctor import check_integrity
from walrus_mem.errors import HeadMismatch

ROOT = str(Path(__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def test_a_failed_restore_of_a_rotated_namespace_registers_nothing(
        tmp_path: Path, server: RelayerServer) -> None:
    """The key generation is adopted only from bytes that match the head reference: a
    mistyped digest raises HeadMismatch and leaves the data dir exactly as it was."""
    with machine(tmp_path / "a", server.url, state_dir=tmp_path / "a-state") as a:
        a.remember("a fact of a rotated namespace", namespace="gen")
        a.sync()
        a.rotate_key("gen")
        head = a.sync().manifests.get("gen") or a.stats("gen").manifest_blob_id
    assert head is not None
    bad = head[:-1] + ("0" if head[-1] != "0" else "1")
    with machine(tmp_path / "b", server.url, state_dir=tmp_path / "b-state") as b:
        b.remember("b's fact in another namespace", namespace="other")
        before = dir_snapshot(tmp_path / "b")
        with pytest.raises(HeadMismatch):
            b.restore("gen", bad)
        assert dir_snapshot(tmp_path / "b") == before
        assert b.namespaces() == ["other"]
        report = b.restore("gen", head)  # the right head still restores, generation and all
        assert report.complete and report.restored == 1


_PULLING = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.helpers_log import machine
m = machine(Path({data!r}), {url!r}, state_dir=Path({state!r}))
with m._log.turn("p", wait=True):  # what a pull holds while it merges
    m._log.tables.set_restoring("p", {{"heads": [{head!r}], "started": 0.0}})
    print("pulling", flush=True)
    sys.stdin.readline()
    if {finish!r}:
        m._log.tables.set_restoring("p", None)
m.close()
"""


def _seed(tmp_path: Path, server: RelayerServer) -> str:
    """Machine a with one fact in namespace p, synced: its head."""
    with machine(tmp_path / "a", server.url, state_dir=tmp_path / "a-state") as a:
        a.remember("seed fact", namespace="p")
        return a.sync().manifests["p"]


@contextmanager
def _pulling_elsewhere(tmp_path: Path, server: RelayerServer, head: str,
                       finish: bool) -> Iterator[subprocess.Popen[str]]:
    """Another process holding machine a's pull turn with its restore mark set, until
    released (a line on its stdin; released on exit if still running)."""
    script = _PULLING.format(root=ROOT, data=str(tmp_path / "a"), url=server.url,
                             state=str(tmp_path / "a-state"), head=head, finish=finish)
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as other:
        assert other.stdin is not None and other.stdout is not None
        try:
            assert other.stdout.readline().strip() == "pulling"
            yield other
        finally:
            if other.poll() is None:
                other.stdin.write("\n")
                other.stdin.flush()
                other.wait(60)


@pytest.mark.parametrize("finish", [True, False])
def test_sync_tells_a_pull_running_elsewhere_from_an_interrupted_restore(
        tmp_path: Path, server: RelayerServer, finish: bool) -> None:
    head = _seed(tmp_path, server)
    with machine(tmp_path / "a", server.url, state_dir=tmp_path / "a-state") as a:
        with _pulling_elsewhere(tmp_path, server, head, finish):
            a.remember("written while the other process pulls", namespace="p")
            errors = a.sync("p").errors
            assert errors and "running" in errors[0] and "interrupted" not in errors[0]
            assert "walrus-mem restore" not in " ".join(errors)
        after = a.sync("p")
        if finish:  # the pull finished: this sync publishes
            assert after.errors == [] and "p" in after.manifests
        else:  # the puller died with the mark set: now it is an interrupted restore
            assert any("interrupted" in e and "walrus-mem restore" in e for e in after.errors)


@pytest.mark.parametrize("via", ["sync", "publish"])
def test_a_pull_that_ends_while_sync_looks_at_its_mark_is_not_an_interrupted_restore(
        tmp_path: Path, server: RelayerServer, monkeypatch: pytest.MonkeyPatch,
        via: str) -> None:
    """The race behind red team f9: the mark was read while the other process pulled,
    the lock once that pull had finished (mark cleared). Not interrupted: publish."""
    head = _seed(tmp_path, server)
    with machine(tmp_path / "a", server.url, state_dir=tmp_path / "a-state") as a, \
            _pulling_elsewhere(tmp_path, server, head, finish=True) as other:
        assert other.stdin is not None
        a.remember("written while the other process pulls", namespace="p")
        stdin, real_turn = other.stdin, a._log.turn

        def turn_once_the_pull_ended(ns: str, *, wait: bool) -> Any:
            if other.poll() is None:  # the pull finishes between the two looks
                stdin.write("\n")
                stdin.flush()
                assert other.wait(60) == 0
            return real_turn(ns, wait=wait)

        monkeypatch.setattr(a._log, "turn", turn_once_the_pull_ended)
        if via == "sync":
            report = a.sync("p")
            assert report.errors == [] and "p" in report.manifests
        else:
            assert a._log.publish("p") != head
        assert a._log.tables.restoring("p") is None


def test_doctor_calls_a_running_pull_running_not_an_interrupted_restore(
        tmp_path: Path, server: RelayerServer) -> None:
    head = _seed(tmp_path, server)
    for finish in (True, False):
        with machine(tmp_path / "a", server.url, state_dir=tmp_path / "a-state") as a:
            with _pulling_elsewhere(tmp_path, server, head, finish):
                check = next(c for c in check_integrity(a) if c.name == "restore p")
                assert check.status == "warn" and "running" in check.detail
                assert "restore" not in check.fix
            after = next(c for c in check_integrity(a) if c.name == "restore p")
            if finish:
                assert after.status == "ok"
            else:  # the puller exited with its mark set: an interrupted restore
                assert after.status == "fail" and "restore" in after.fix


def test_a_remember_due_a_manifest_during_an_interrupted_restore_is_not_failed(
        tmp_path: Path, server: RelayerServer) -> None:
    """The fact is stored; only the periodic manifest is refused (sync reports it)."""
    with machine(tmp_path / "a", server.url, state_dir=tmp_path / "a-state",
                 manifest_every=1) as a:
        a.remember("seed fact", namespace="p")  # published with its manifest at once
        head = a.stats("p").manifest_blob_id
        assert head is not None
        a._log.tables.set_restoring("p", {"heads": [head], "started": 0.0})  # killed pull
        rec = a.remember("written while the restore is unfinished", namespace="p")
        assert a.get(rec.id, namespace="p").text == rec.text
        assert any("interrupted" in e for e in a.sync("p").errors)
