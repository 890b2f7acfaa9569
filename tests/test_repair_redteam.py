"""`repair` under the issue 10 red team's attacks: forgets only the damaged catalog knew,
a repair killed mid-restore, rotted text columns, a repair while another process has the
data dir open. Loopback HTTP relayer; kills are real SIGKILLs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import live, machine
from tests.helpers_memory import MASTER_HEX, MOCK_ADMIN_TOKEN, make_settings
from tests.helpers_proxy import HookProxy
from walrus_mem import Memory, Settings
from walrus_mem._cli.doctor import check_integrity
from walrus_mem._local.datadir_lock import DataDirLock
from walrus_mem._memory.repair import repair_namespace
from walrus_mem._memory.repair_run import repair_data_dir
from walrus_mem.errors import DataDirBusy
from walrus_mem.testing import HashEmbedder

ROOT = str(Path(__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def _settings(data_dir: Path, publisher: str, aggregator: str) -> Settings:
    return make_settings(data_dir, publisher_url=publisher, aggregator_urls=aggregator,
                         read_deadline=3.0, publish_deadline=3.0, master_key=MASTER_HEX,
                         state_dir=data_dir.with_name(data_dir.name + "-state"),
                         mock_admin_token=MOCK_ADMIN_TOKEN)


def _open(settings: Settings) -> Memory:
    return Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX)


def _damage_catalog(data_dir: Path, victim: str = "memories_blob") -> None:
    """A bad disk overwrites one index page of the catalog (SQLite's integrity check fails)."""
    path = data_dir / "catalog.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(conn.execute("SELECT rootpage FROM sqlite_master "
                                "WHERE name = ?", (victim,)).fetchone()[0])
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    with open(path, "r+b") as f:
        f.seek((page - 1) * size + 8)
        f.write(b"\xa5" * (size - 8))


def test_repair_keeps_a_forget_that_only_the_damaged_catalog_knew(
        tmp_path: Path, server: RelayerServer) -> None:
    """forget with the publisher down (tombstone only local), then the catalog is damaged:
    repair restores the newest head, which still lists the memory, and carries the
    tombstone over from the moved-aside file, so it stays forgotten and the next manifest
    lists it only as a tombstone."""
    down = {"on": False}
    with HookProxy(server.url, hook=lambda m, p, b: (503, b"down")
                   if down["on"] and m in ("PUT", "DELETE") else None) as pub:
        settings = _settings(tmp_path / "a", pub.url, server.url)
        with _open(settings) as mem:
            mem.remember_many([f"published fact {i} " + "x" * 200 for i in range(50)])
            secret = mem.remember("my bank PIN is 4321")
            mem.sync()
            down["on"] = True
            assert mem.forget(secret.id).manifest_blob_id is None  # no manifest carries it
        _damage_catalog(tmp_path / "a")
        down["on"] = False
        rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
    assert rebuild is not None and rebuild.moved_to is not None
    with _open(_settings(tmp_path / "a", server.url, server.url)) as mem:
        assert secret.id not in live(mem) and len(live(mem)) == 50
        assert rebuild.salvaged_forgets == [secret.id]
        head = mem.sync().manifests["default"]
        _, entries = mem._log.read("default", head)
        assert [e.deleted for e in entries if e.memory_id == secret.id] == [True]
    # the forget's deletion failed (publisher down): done now that the publisher answers
    assert secret.blob_id is not None
    assert httpx.get(f"{server.url}/v1/blobs/{secret.blob_id}", timeout=10).status_code == 404


_KILLED_REPAIR = """
import os, signal, sys
sys.path.insert(0, {root!r})
from pathlib import Path
import walrus_mem._log.merging as log_merging
log_merging.RESTORE_CHUNK = 10
from tests.helpers_memory import make_settings, MASTER_HEX
from walrus_mem.testing import HashEmbedder
from walrus_mem._memory.repair_run import repair_data_dir
s = make_settings(Path({data!r}), publisher_url={url!r}, aggregator_urls={url!r},
                  read_deadline=3.0, publish_deadline=3.0, master_key=MASTER_HEX,
                  state_dir=Path({state!r}))
def progress(done, total):
    if done >= 20:
        os.kill(os.getpid(), signal.SIGKILL)  # after the move, before the salvage
repair_data_dir(s, embedder=HashEmbedder(64), progress=progress)
"""


def test_a_repair_killed_mid_restore_salvages_the_moved_aside_file_next_time(
        tmp_path: Path, server: RelayerServer) -> None:
    down = {"on": False}
    with HookProxy(server.url, hook=lambda m, p, b: (503, b"down")
                   if down["on"] and m == "PUT" else None) as pub:
        settings = _settings(tmp_path / "a", pub.url, server.url)
        with _open(settings) as mem:
            published = mem.remember_many([f"published fact {i} " + "x" * 200
                                           for i in range(60)]).records
            mem.sync()
            down["on"] = True
            queued = mem.remember_many([f"queued offline fact {i}" for i in range(5)]).records
            mem.update(published[0].id, "published fact 0, changed while offline")
        _damage_catalog(tmp_path / "a")
        down["on"] = False
        script = _KILLED_REPAIR.format(root=ROOT, data=str(tmp_path / "a"), url=pub.url,
                                       state=str(tmp_path / "a-state"))
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
        assert proc.returncode == -9, proc.stderr.decode()[-2000:]
        with _open(settings) as mem:  # doctor points at repair, not only at restore
            checks = {c.name: c for c in check_integrity(mem)}
            assert checks["repair salvage"].status == "warn"
        rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
        assert rebuild is not None and rebuild.moved_to is None  # nothing moved this time
    with _open(settings) as mem:
        texts = set(live(mem).values())
        assert {r.text for r in queued} <= texts
        assert "published fact 0, changed while offline" in texts and len(texts) == 65
    assert len(rebuild.salvaged_from) == 1 and rebuild.salvaged_from[0].exists()
    assert rebuild.restored["default"].complete
    assert not (tmp_path / "a" / "repair-salvage.json").exists()  # done: not salvaged again
    again, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
    assert again is None


def test_repair_rebuilds_rotted_text_from_the_sealed_copy_and_never_publishes_it(
        tmp_path: Path, server: RelayerServer) -> None:
    """The text column is not authenticated, the sealed copy is: rows whose text rotted
    (one published, one queued) get their text back from the sealed copy, even with the
    aggregator unreachable; nothing is sealed again or re-queued."""
    down = {"pub": False, "agg": False}
    with HookProxy(server.url, hook=lambda m, p, b: (503, b"down") if down["pub"]
                   and m == "PUT" else None) as pub, \
            HookProxy(server.url, hook=lambda m, p, b: (503, b"down") if down["agg"]
                      and m == "GET" else None) as agg:
        with machine(tmp_path / "a", pub.url, aggregator=agg.url,
                     state_dir=tmp_path / "a-state") as a:
            good = a.remember("I am allergic to peanuts")
            a.sync()
            down["pub"] = True
            queued = a.remember("the boiler code is 7731")
            assert queued.status == "queued"
        with sqlite3.connect(tmp_path / "a" / "catalog.sqlite3") as conn:
            conn.execute("UPDATE memories SET text = 'I am allergic to peanvts' WHERE id = ?",
                         (good.id,))
            conn.execute("UPDATE memories SET text = 'the boiler code is 7781' WHERE id = ?",
                         (queued.id,))
        down.update(pub=False, agg=True)
        with machine(tmp_path / "a", pub.url, aggregator=agg.url,
                     state_dir=tmp_path / "a-state") as a:
            report = repair_namespace(a)
            assert a.get(good.id).text == "I am allergic to peanuts"
            assert a.get(good.id).status == "published"
            assert [h.text for h in a.recall("boiler code", k=1)] == ["the boiler code is 7731"]
            assert report.resealed == [] and report.unrepaired == []
            assert sorted(report.rebuilt) == sorted([good.id, queued.id])
            down["agg"] = False
            head = a.sync().manifests["default"]
    with machine(tmp_path / "b", server.url, state_dir=tmp_path / "b-state") as b:
        b.restore("default", head)
        assert sorted(live(b).values()) == ["I am allergic to peanuts", "the boiler code is 7731"]


_AGENT = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.helpers_log import machine
m = machine(Path({data!r}), {url!r}, state_dir=Path({state!r}))
m.remember("an agent keeps this data dir open", namespace="default")
print("open", flush=True)
sys.stdin.readline()
m.close()
"""


def test_repair_refuses_while_another_process_has_the_data_dir_open(
        tmp_path: Path, server: RelayerServer) -> None:
    settings = _settings(tmp_path / "a", server.url, server.url)
    with _open(settings) as mem:
        mem.remember_many([f"written before the agent starts {i}" for i in range(30)])
        mem.sync()
        mem.remember("a second manifest")
        mem.sync()
    # damage the agent can work around (as in a real session), the integrity check cannot
    _damage_catalog(tmp_path / "a", "sqlite_autoindex_manifests_1")
    script = _AGENT.format(root=ROOT, data=str(tmp_path / "a"), url=server.url,
                           state=str(tmp_path / "a-state"))
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as agent:
        assert agent.stdin is not None and agent.stdout is not None
        try:
            assert agent.stdout.readline().strip() == "open"
            before = sorted(p.name for p in (tmp_path / "a").iterdir())
            with pytest.raises(DataDirBusy) as caught:
                repair_data_dir(settings, embedder=HashEmbedder(64))
            assert any(f"pid {agent.pid}" in h for h in caught.value.holders)
            assert sorted(p.name for p in (tmp_path / "a").iterdir()) == before  # not moved
        finally:
            agent.stdin.write("\n")
            agent.stdin.flush()
            agent.wait(60)
    rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder(64))  # the agent stopped
    assert rebuild is not None and rebuild.moved_to is not None
    with _open(settings) as mem:
        assert "an agent keeps this data dir open" in set(live(mem).values())


def test_a_memory_cannot_open_the_data_dir_while_a_repair_holds_it(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    opener = (f"import sys; sys.path.insert(0, {ROOT!r})\n"
              "from pathlib import Path\n"
              "from tests.helpers_memory import make_settings\n"
              "from walrus_mem import Memory, DataDirBusy\n"
              "from walrus_mem.testing import HashEmbedder\n"
              "try:\n"
              f"    Memory(make_settings(Path({str(data)!r})), embedder=HashEmbedder(64))\n"
              "except DataDirBusy as exc:\n"
              "    print('busy:', exc)\n")
    with DataDirLock(data).exclusive():
        out = subprocess.run([sys.executable, "-c", opener], capture_output=True, text=True,
                             timeout=60)
        assert out.stdout.startswith("busy:"), out.stderr[-2000:]
    # released: the same opener succeeds
    out = subprocess.run([sys.executable, "-c", opener], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout == "", out.stderr[-2000:]
