"""A data dir (or state dir) another user could change is refused, as ssh's StrictModes
refuses a ~/.ssh others can write (issue 23, item 10).

The red team's scenario: another local user pre-creates a world-writable ``/tmp/mem``
(the path docs/configuration.md used as its example) with ``catalog.sqlite3`` a
symlink to a file they own; the victim's plaintext memories landed there. Each case
is checked as one user (a world-writable dir, a symlink leaving the dir, a 0666 file);
another owner is simulated with ``os.chown`` when the tests run as root.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_cli import invoke
from tests.helpers_log import machine
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import InsecureDataDir, Memory
from walrus_mem._cli.doctor import run_checks
from walrus_mem._memory.repair_run import repair_data_dir
from walrus_mem.testing import HashEmbedder

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX owners and modes")

OTHER_UID = 54321
as_root = pytest.mark.skipif(os.geteuid() != 0,
                             reason="simulating another owner needs os.chown, i.e. root")


@pytest.fixture
def server(tmp_path: Path):
    with RelayerServer(tmp_path / "walrus", admin=False) as srv:
        yield srv


def _open(data_dir: Path, **kw: object) -> Memory:
    return Memory(make_settings(data_dir, **kw), embedder=HashEmbedder(64), master_key=MASTER_HEX)


def _world_writable_dir(path: Path) -> Path:
    path.mkdir()
    os.chmod(path, 0o777)  # what `mkdir -m 777 /tmp/mem` by another user leaves
    return path


def test_the_red_team_scenario_writes_nothing_through_the_planted_link(tmp_path, server):
    """World-writable pre-created data dir whose catalog is a link to the attacker's file."""
    data_dir = _world_writable_dir(tmp_path / "mem")
    loot = tmp_path / "attacker" / "loot.sqlite3"
    loot.parent.mkdir()
    loot.touch(mode=0o666)
    (data_dir / "catalog.sqlite3").symlink_to(loot)
    if os.geteuid() == 0:  # the planted files are the attacker's, as in the report
        for p in (data_dir, loot.parent, loot):
            os.chown(p, OTHER_UID, OTHER_UID)
        os.lchown(data_dir / "catalog.sqlite3", OTHER_UID, OTHER_UID)
    with pytest.raises(InsecureDataDir) as caught:
        machine(data_dir, server.url)
    message = str(caught.value)
    assert str(data_dir) in message and "StrictModes" in message
    assert loot.stat().st_size == 0  # nothing of the victim's reached the attacker's file
    assert sorted(p.name for p in data_dir.iterdir()) == ["catalog.sqlite3"]  # nothing created


def test_a_world_writable_data_dir_is_refused_with_the_fix(tmp_path):
    data_dir = _world_writable_dir(tmp_path / "mem")
    with pytest.raises(InsecureDataDir, match=r"writable by others \(mode 0777\)") as caught:
        _open(data_dir)
    assert f"chmod 700 {data_dir}" in str(caught.value)
    assert list(data_dir.iterdir()) == []
    os.chmod(data_dir, 0o700)  # the fix the message gives
    with _open(data_dir) as mem:
        mem.remember("the fixed data dir opens", namespace="n")


def test_a_group_writable_data_dir_is_refused(tmp_path):
    data_dir = tmp_path / "mem"
    data_dir.mkdir()
    os.chmod(data_dir, 0o770)
    with pytest.raises(InsecureDataDir, match="mode 0770"):
        _open(data_dir)


@pytest.mark.parametrize("name", ["catalog.sqlite3", "heads.sqlite3", "catalog.sqlite3-wal"])
def test_a_file_writable_by_others_is_refused(tmp_path, name):
    data_dir = tmp_path / "mem"
    with _open(data_dir) as mem:
        mem.remember("written before the mode changed", namespace="n")
    target = data_dir / name
    target.touch()
    os.chmod(target, 0o666)
    with pytest.raises(InsecureDataDir, match=rf"{name} is writable by others \(mode 0666\)") \
            as caught:
        _open(data_dir)
    assert f"chmod go-w {target}" in str(caught.value)
    os.chmod(target, 0o600)
    if name == "catalog.sqlite3-wal":
        target.unlink()
    with _open(data_dir) as mem:
        assert [r.text for r in mem.list("n")] == ["written before the mode changed"]


def test_a_file_deeper_in_the_data_dir_is_checked_too(tmp_path):
    data_dir = tmp_path / "mem"
    with _open(data_dir) as mem:
        mem.remember("an indexed fact", namespace="n")
        mem.recall("indexed", namespace="n")
    index_file = next((data_dir / "index").glob("*.usearch"))
    os.chmod(index_file, 0o646)
    with pytest.raises(InsecureDataDir, match=r"index/.*\.usearch is writable by others"):
        _open(data_dir)


def test_a_symlink_leaving_the_data_dir_is_refused_one_inside_is_not(tmp_path):
    data_dir = tmp_path / "mem"
    data_dir.mkdir(mode=0o700)
    outside = tmp_path / "elsewhere.sqlite3"
    (data_dir / "catalog.sqlite3").symlink_to(outside)  # dangling: SQLite would create it
    with pytest.raises(InsecureDataDir, match="symlink to .*outside the data dir") as caught:
        _open(data_dir)
    assert f"rm {data_dir / 'catalog.sqlite3'}" in str(caught.value)
    assert not outside.exists()

    (data_dir / "catalog.sqlite3").unlink()
    (data_dir / "real-index").mkdir(mode=0o700)
    (data_dir / "index").symlink_to(data_dir / "real-index")  # stays inside: fine
    with _open(data_dir) as mem:
        mem.remember("kept inside the data dir", namespace="n")
        assert mem.recall("kept", namespace="n")


def test_a_data_dir_reached_through_the_users_own_symlink_opens(tmp_path):
    real = tmp_path / "disk" / "walrus-mem"
    link = tmp_path / "mem"
    real.parent.mkdir()
    link.symlink_to(real)  # e.g. ~/.local/share/walrus-mem -> a bigger disk
    with _open(link) as mem:
        mem.remember("through the link", namespace="n")
    assert (real / "catalog.sqlite3").is_file()
    assert stat.S_IMODE(real.stat().st_mode) == 0o700


def test_a_parent_others_can_write_without_the_sticky_bit_is_refused(tmp_path):
    shared = _world_writable_dir(tmp_path / "shared")
    with pytest.raises(InsecureDataDir, match="without the sticky bit") as caught:
        _open(shared / "mem")
    assert str(shared) in str(caught.value) and not (shared / "mem").exists()
    os.chmod(shared, 0o1777)  # like /tmp: others cannot move our entries
    with _open(shared / "mem") as mem:
        mem.remember("a private dir under a sticky one", namespace="n")


@as_root
def test_a_data_dir_owned_by_another_user_is_refused(tmp_path):
    data_dir = tmp_path / "mem"
    data_dir.mkdir(mode=0o700)
    os.chown(data_dir, OTHER_UID, OTHER_UID)
    with pytest.raises(InsecureDataDir, match=f"owned by uid {OTHER_UID}, not by you"):
        _open(data_dir)


@as_root
def test_a_file_owned_by_another_user_is_refused(tmp_path):
    data_dir = tmp_path / "mem"
    with _open(data_dir) as mem:
        mem.remember("mine", namespace="n")
    os.chown(data_dir / "catalog.sqlite3", OTHER_UID, OTHER_UID)
    with pytest.raises(InsecureDataDir, match=f"catalog.sqlite3 is owned by uid {OTHER_UID}"):
        _open(data_dir)


@as_root
def test_a_symlink_on_the_way_owned_by_another_user_is_refused(tmp_path):
    real = tmp_path / "mine"
    real.mkdir(mode=0o700)
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    link = sticky / "mem"
    link.symlink_to(real)  # planted by another user in a sticky dir: they can re-point it
    os.lchown(link, OTHER_UID, OTHER_UID)
    with pytest.raises(InsecureDataDir, match="symlink owned by uid"):
        _open(link)


def test_the_state_dir_is_checked_likewise(tmp_path):
    state = _world_writable_dir(tmp_path / "state")
    with pytest.raises(InsecureDataDir, match=r"state dir .*writable by others"):
        _open(tmp_path / "mem", state_dir=state)
    os.chmod(state, 0o700)
    elsewhere = tmp_path / "elsewhere.sqlite3"
    (state / "seen-heads.sqlite3").symlink_to(elsewhere)
    with pytest.raises(InsecureDataDir, match="state dir .*seen-heads.sqlite3 is a symlink"):
        _open(tmp_path / "mem", state_dir=state)
    assert not elsewhere.exists()


def test_a_state_dir_not_there_yet_is_created_private_later(tmp_path):
    state = tmp_path / "state" / "walrus-mem"
    with _open(tmp_path / "mem", state_dir=state) as mem:
        mem.remember("one", namespace="n")
        mem.sync("n")
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_the_cli_repair_and_doctor_say_what_to_fix(tmp_path, monkeypatch):
    data_dir = _world_writable_dir(tmp_path / "mem")
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    result = invoke(["--data-dir", str(data_dir), "remember", "never written"], expect=1)
    assert "[InsecureDataDir]" in result.stderr and f"chmod 700 {data_dir}" in result.stderr
    settings = make_settings(data_dir)
    with pytest.raises(InsecureDataDir):
        repair_data_dir(settings, embedder=HashEmbedder(64))
    assert list(data_dir.iterdir()) == []  # not even the repair lock
    checks = {c.name: c for c in run_checks(None, data_dir=data_dir, model=False)}
    assert checks["data dir"].status == "fail" and "chmod 700" in checks["data dir"].detail
