"""Forget and its blob deletions under partial knowledge, kills and races (issue 10 red team):
a quilt holding a memory this data dir failed to fetch, a forget killed before deleting,
a forget racing an outbox flush. Loopback HTTP relayer; kills are real SIGKILLs."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import MOCK_ADMIN_TOKEN, live, machine
from tests.helpers_proxy import HookProxy
from walrus_mem import Memory
from walrus_mem._cli.doctor import check_integrity

ROOT = str(Path(__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def _at(tmp_path: Path, name: str, url: str, **kw: Any) -> Memory:
    """A machine with its own per-user state dir (two users, two computers)."""
    return machine(tmp_path / name, url, state_dir=tmp_path / f"{name}-state", **kw)


def _status(server: RelayerServer, blob_id: str) -> int:
    return httpx.get(f"{server.url}/v1/blobs/{blob_id}", timeout=10).status_code


@pytest.mark.parametrize("known_from", ["pending entries", "manifests"])
def test_forget_keeps_a_quilt_that_a_known_manifest_lists_a_live_memory_in(
        tmp_path: Path, server: RelayerServer, known_from: str) -> None:
    """B's restore missed one patch of A's two-fact quilt; B forgets the other fact. No
    local row counts the missed one, but the merge's pending entries (read with every
    aggregator down), or else A's manifest merged here, list it live in that quilt: the
    quilt is kept, and A's memory stays restorable."""
    with _at(tmp_path, "a", server.url) as a:
        x, z = a.remember_many(["the garage code is 4455", "my passport expires in 2031"],
                               namespace="q").records
        head = a.sync().manifests["q"]
        quilt, patch = a.get(z.id, namespace="q").blob_id, a.get(z.id, namespace="q").quilt_patch_id
    assert quilt is not None and patch is not None and x.blob_id == quilt
    lagging = {"on": True, "down": False}
    with HookProxy(server.url, hook=lambda m, p, b: (404, b"{}") if lagging["on"]
                   and m == "GET" and patch in p else (503, b"down") if lagging["down"]
                   and m == "GET" else None) as agg:
        with _at(tmp_path, "b", server.url, aggregator=agg.url) as b:
            restored = b.restore("q", head)
            assert [mid for mid, _ in restored.missing] == [z.id]
            lagging["on"] = False
            if known_from == "pending entries":
                lagging["down"] = True  # no read needed
            else:
                b._log.tables.set_pending("q", {})  # as a data dir from before them
            report = b.forget(x.id, namespace="q")
            assert report.deleted_blobs == [] and "does not hold" in report.kept_blobs[quilt]
            lagging["down"] = False
            assert b.sync().errors == []  # settled: not retried on every sync
    assert _status(server, quilt) == 200
    with _at(tmp_path, "c", server.url) as c:
        again = c.restore("q", head)
        assert again.missing == [] and z.id in live(c, "q")


_KILL_AT_DELETE = """
import os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from walrus_mem._memory.publisher import Publisher
from tests.helpers_log import machine
def killed(self, blobs):
    os.kill(os.getpid(), signal.SIGKILL)  # after the tombstone's commit, before any delete
Publisher.delete_blobs = killed  # forget and pull (the log holds the Publisher) call it
mem = machine(Path({data!r}), {url!r}, state_dir=Path({state!r}))
if {op!r} == "forget":
    mem.forget({arg!r}, namespace="fk")
else:
    mem.pull({arg!r}, namespace="fk")
"""


def _killed(tmp_path: Path, server: RelayerServer, name: str, op: str, arg: str) -> None:
    script = _KILL_AT_DELETE.format(root=ROOT, data=str(tmp_path / name), url=server.url,
                                    state=str(tmp_path / f"{name}-state"), op=op, arg=arg)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]


def test_forget_killed_before_deleting_its_blob_is_finished_by_sync(
        tmp_path: Path, server: RelayerServer) -> None:
    with _at(tmp_path, "a", server.url) as a:
        rec = a.remember("the safe combination is 12-34-56", namespace="fk")
        a.sync()
        blob = a.get(rec.id, namespace="fk").blob_id
    assert blob is not None
    _killed(tmp_path, server, "a", "forget", rec.id)
    assert _status(server, blob) == 200
    with _at(tmp_path, "a", server.url) as a:
        assert rec.id not in live(a, "fk")  # the tombstone committed
        a.sync()
    assert _status(server, blob) == 404


def test_pulled_forget_killed_before_deleting_is_finished_by_the_resumed_restore(
        tmp_path: Path, server: RelayerServer) -> None:
    """B updated M (its own blob), A forgot M; B's pull of that forget is killed before
    deleting B's blob: the restore that resumes the pull deletes it."""
    with _at(tmp_path, "a", server.url) as a, _at(tmp_path, "b", server.url) as b:
        m = a.remember("my diary entry about the move", namespace="fk")
        b.restore("fk", a.sync().manifests["fk"])
        b.update(m.id, "my diary entry about the move, with the new address", namespace="fk")
        b.sync()
        own = b.get(m.id, namespace="fk").blob_id
        forget_head = a.forget(m.id, namespace="fk").manifest_blob_id
    assert own is not None and forget_head is not None
    _killed(tmp_path, server, "b", "pull", forget_head)
    assert _status(server, own) == 200
    with _at(tmp_path, "b", server.url) as b:
        assert b._log.tables.restoring("fk") is not None  # the pull did not finish
        assert b.restore("fk").complete
        assert m.id not in live(b, "fk")
    assert _status(server, own) == 404


def test_forget_while_sync_is_storing_the_memory_deletes_what_got_published(
        tmp_path: Path, server: RelayerServer) -> None:
    """forget of a queued memory while sync's store of it is in flight (slow publisher):
    the store completes, then its blob is deleted, and no manifest lists the memory."""
    state = {"down": False, "slow": False}
    stored = threading.Event()

    def hook(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        return (503, b"down") if state["down"] and method == "PUT" else None

    def delay(method: str, path: str) -> float:
        if state["slow"] and method == "PUT" and path.startswith("/v1/blobs"):
            stored.set()
            return 1.5
        return 0.0

    with HookProxy(server.url, hook=hook, delay=delay) as pub, \
            _at(tmp_path, "a", pub.url, publish_deadline=10.0) as a:
        a.remember("a harmless first fact", namespace="fq")
        a.sync()
        state["down"] = True
        rec = a.remember("my ex's new address is 12 Elm St", namespace="fq")
        assert rec.status == "queued"
        state["down"], state["slow"] = False, True
        result: dict[str, Any] = {}
        flush = threading.Thread(target=lambda: result.update(sync=a.sync("fq")))
        flush.start()
        assert stored.wait(30)
        time.sleep(0.2)  # the store request is at the publisher now
        a.forget(rec.id, namespace="fq")
        flush.join(60)
        state["slow"] = False
        assert result["sync"].published == 1  # it did get stored
        published = [r["blob_id"] for r in a._catalog.query(
            "SELECT blob_id FROM versions WHERE memory_id = ? AND blob_id IS NOT NULL",
            (rec.id,))]
        assert len(published) == 1
        a.sync("fq")
        head = a.stats("fq").manifest_blob_id
        assert head is not None
        _, entries = a._log.read("fq", head)
        assert not any(e.memory_id == rec.id and not e.deleted for e in entries)
    assert _status(server, published[0]) == 404
    assert json.dumps(result["sync"].errors) == "[]"


def test_a_deletion_the_backend_refused_is_retried_by_the_next_sync(
        tmp_path: Path, server: RelayerServer) -> None:
    refuse = {"on": False}
    with HookProxy(server.url, hook=lambda m, p, b: (503, b"busy")
                   if refuse["on"] and m == "DELETE" else None) as pub, \
            _at(tmp_path, "a", pub.url, aggregator=server.url) as a:
        rec = a.remember("an old address, to forget", namespace="fr")
        a.sync()
        blob = a.get(rec.id, namespace="fr").blob_id
        assert blob is not None
        refuse["on"] = True
        report = a.forget(rec.id, namespace="fr")
        assert report.deleted_blobs == [] and "503" in report.kept_blobs[blob]
        waiting = a.sync("fr").errors
        assert waiting and "not deleted yet" in waiting[0]
        checks = {c.name: c for c in check_integrity(a)}
        assert checks["blob deletions"].status == "warn"
        assert _status(server, blob) == 200
        refuse["on"] = False
        assert a.sync("fr").errors == []
    assert _status(server, blob) == 404
