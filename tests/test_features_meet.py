"""Where the log's features meet (issue 23): a re-statement after a forget, repair with
two concurrent newest heads, restore's access check, agent names that equal the main
agent's namespace. Each machine has its own data dir and HOME (state dir); one
relayer_mock over loopback HTTP with its admin routes off, as on real Walrus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import live, machine
from tests.helpers_memory import MASTER_HEX, OTHER_MASTER_HEX
from walrus_mem import Memory
from walrus_mem._memory.repair_run import repair_data_dir
from walrus_mem.config import AgentConfig, Settings
from walrus_mem.errors import AccessDenied, ConfigError, InvalidSessionKey
from walrus_mem.sessions import AgentDirectory
from walrus_mem.testing import HashEmbedder
from walrus_mem.tools import call_tool

PEANUTS = "the user is allergic to peanuts"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin=False) as srv:
        yield srv


def _machine(root: Path, name: str, url: str, **kw: Any) -> Memory:
    """A machine with its own data dir and its own HOME (per-user state dir)."""
    return machine(root / name, url, state_dir=root / f"{name}-home", **kw)


def _head(mem: Memory, ns: str) -> str:
    """Sync; the namespace's newest head here (published now, or earlier)."""
    report = mem.sync(ns)
    assert not report.errors, report.errors
    head = mem.stats(ns).manifest_blob_id
    assert head is not None
    return head


def _texts(mem: Memory, ns: str) -> list[str]:
    return sorted(live(mem, ns).values())


# -- item 7: a deduplicated remember is a write ---------------------------------------------


@pytest.mark.parametrize("first", ["a", "b"])
def test_restating_a_fact_forgotten_elsewhere_leaves_it_live_everywhere(
        tmp_path: Path, server: RelayerServer, first: str) -> None:
    """A forgets X; B, which still holds X, is told X again. Whichever machine pulls
    first, X is live on both afterwards and on a fresh machine restoring their heads;
    the old id is forgotten everywhere (a tombstone only ever of that very id)."""
    ns = "restate"
    with _machine(tmp_path, "a", server.url) as a, _machine(tmp_path, "b", server.url) as b:
        a.remember("a seed fact", namespace=ns)
        x = a.remember(PEANUTS, namespace=ns)
        b.restore(ns, a.sync(ns).manifests[ns])
        a.forget(x.id, namespace=ns)
        head_a = _head(a, ns)
        again = b.remember(PEANUTS, namespace=ns)
        assert again.deduplicated and again.text == PEANUTS
        assert again.id != x.id  # the re-statement is a write: a new id, the old one retired
        assert x.id not in live(b, ns)
        head_b = _head(b, ns)
        if first == "a":
            a.pull(head_b, namespace=ns, allow_stale=True)
            b.pull(head_a, namespace=ns, allow_stale=True)
        else:
            b.pull(head_a, namespace=ns, allow_stale=True)
            a.pull(head_b, namespace=ns, allow_stale=True)
        for mem in (a, b):
            assert _texts(mem, ns) == sorted(["a seed fact", PEANUTS])
            assert x.id not in live(mem, ns) and again.id in live(mem, ns)
        newest = [_head(a, ns), _head(b, ns)]
    with _machine(tmp_path, "c", server.url) as c:  # a fresh machine, from the newest heads
        c.restore(ns, newest[0])
        c.pull(newest[1], namespace=ns, allow_stale=True)
        assert _texts(c, ns) == sorted(["a seed fact", PEANUTS])
        assert x.id not in live(c, ns)
    with _machine(tmp_path, "d", server.url) as d:  # and from the two heads that met first
        d.restore(ns, head_a)
        d.pull(head_b, namespace=ns, allow_stale=True)
        assert _texts(d, ns) == sorted(["a seed fact", PEANUTS])


def test_a_restatement_keeps_the_memory_s_fields_and_dedupes_within_a_batch(
        tmp_path: Path, server: RelayerServer) -> None:
    ns = "restate-fields"
    with _machine(tmp_path, "a", server.url) as a:
        x = a.remember(PEANUTS, namespace=ns, category="identity", metadata={"src": "chat"})
        result = a.remember_many([PEANUTS, "something new", PEANUTS], namespace=ns)
        assert (result.stored, result.deduplicated) == (1, 2)
        moved = result.records[0]
        assert moved.id == result.records[2].id != x.id  # one re-statement for the batch
        assert (moved.category, moved.metadata) == ("identity", {"src": "chat"})
        assert moved.created_at == x.created_at
        assert [e.event for e in a.history(x.id, namespace=ns)][-1] == "DELETE"
        assert sorted(live(a, ns)) == sorted([moved.id, result.records[1].id])
        assert len(a.recall(PEANUTS, namespace=ns, k=5, min_score=0)) == 2


# -- item 9: repair rebuilds from every concurrent newest head ------------------------------


def _garble_catalog(data_dir: Path) -> None:
    for suffix in ("-wal", "-shm"):
        (data_dir / f"catalog.sqlite3{suffix}").unlink(missing_ok=True)
    (data_dir / "catalog.sqlite3").write_bytes(b"not sqlite at all " * 300)


def test_repair_restores_every_concurrent_newest_head(tmp_path: Path,
                                                      server: RelayerServer) -> None:
    """A holds its own head (seq 4) and B's concurrent one (seq 3, which forgot X and
    updated Y), unsynced since the pull; its catalog is lost. Repair must rebuild from
    both heads: X stays forgotten and Y keeps B's update."""
    ns = "rep"
    with _machine(tmp_path, "a", server.url, master_key=MASTER_HEX) as a, \
            _machine(tmp_path, "b", server.url) as b:
        a.remember("a seed fact", namespace=ns)
        x = a.remember("forget me on B", namespace=ns)
        y = a.remember("Y version one", namespace=ns)
        b.restore(ns, a.sync(ns).manifests[ns])
        for i in range(3):  # A's own head reaches seq 4
            a.remember(f"A's fact {i}", namespace=ns)
            a.sync(ns)
        b.forget(x.id, namespace=ns)
        b.sync(ns)  # seq 2
        b.update(y.id, "Y version two", namespace=ns)
        head_b = b.sync(ns).manifests[ns]  # seq 3
        assert head_b.split(".")[1] == "3" and a.stats(ns).manifest_seq == 4
        a.pull(head_b, namespace=ns)
        before = live(a, ns)
        assert x.id not in before and before[y.id] == "Y version two"
        settings = a.settings
    _garble_catalog(settings.data_dir)
    rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
    assert rebuild is not None and rebuild.moved_to is not None and not rebuild.failed
    assert rebuild.restored[ns].complete
    with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as a:
        after = live(a, ns)
        assert x.id not in after  # not resurrected
        assert after[y.id] == "Y version two"  # not rolled back
        assert after == before


# -- item 14: restore's access check comes first --------------------------------------------


def test_restore_on_an_emptied_namespace_never_takes_another_key(
        tmp_path: Path, server: RelayerServer) -> None:
    """A's namespace in a shared catalog is empty (forget_all). B, with another key whose
    own "notes" was rotated, restores its head into the shared data dir: refused before
    anything is written, A's key stays the namespace's, B reads nothing A writes."""
    with _machine(tmp_path, "b-own", server.url, key=OTHER_MASTER_HEX) as mine:
        mine.remember("B's own note", namespace="notes")
        mine.sync("notes")
        rotated = mine.rotate_key("notes")
        assert rotated.complete and rotated.manifest_blob_id is not None
    shared = tmp_path / "shared"
    with machine(shared, server.url, state_dir=tmp_path / "a-home") as a:
        a.remember("A's first note", namespace="notes")
        a.forget_all("notes", confirm=True)
        owner = a.stats("notes").key_fingerprint
        with machine(shared, server.url, key=OTHER_MASTER_HEX,
                     state_dir=tmp_path / "b-home") as b:
            with pytest.raises(AccessDenied):
                b.restore("notes", rotated.manifest_blob_id)
            assert b.stats("notes").key_fingerprint == owner
            assert b._catalog.count("notes") == 0  # nothing of B's was merged in
            a.remember("A's secret, written after B's attempt", namespace="notes")
            with pytest.raises(AccessDenied):
                b.list("notes")
        assert _texts(a, "notes") == ["A's secret, written after B's attempt"]


# -- item 15: agent names never reach the main agent's namespace ----------------------------


@pytest.mark.parametrize(("config", "taken"), [
    ({"agents": {"main": AgentConfig(namespace="private")}}, "private"),
    ({"default_namespace": "assistant"}, "assistant"),
    ({"default_namespace": "assistant", "agents": {"main": AgentConfig(namespace="home")}},
     "assistant"),
])
def test_an_agent_name_equal_to_the_main_namespace_is_refused(
        tmp_path: Path, server: RelayerServer, config: dict[str, Any], taken: str) -> None:
    with machine(tmp_path / "a", server.url, **config) as mem:
        main_ns = AgentDirectory.from_config(mem.settings).resolve("main:1").namespace
        stored = call_tool(mem, "memory_store", {"facts": ["main's private fact"]},
                           session_key="main:1")
        assert stored["ok"], stored
        for key in (f"agent:{taken}:1", f"agent:{taken}", f"agent:{taken}:subagent:2"):
            with pytest.raises(InvalidSessionKey, match="main"):
                AgentDirectory.from_config(mem.settings).resolve(key)
            found = call_tool(mem, "memory_search", {"query": "main's private fact"},
                              session_key=key)
            assert not found["ok"] and found["error"]["type"] == "InvalidSessionKey", found
        # main and ordinary agents are unchanged
        assert AgentDirectory.from_config(mem.settings).resolve("agent:main:1").namespace \
            == main_ns
        assert AgentDirectory.from_config(mem.settings).resolve("agent:coder:1").namespace \
            == "coder"


def test_a_configured_agent_on_the_main_namespace_is_a_config_error(tmp_path: Path) -> None:
    for agents in ({"main": AgentConfig(namespace="private"), "private": AgentConfig()},
                   {"main": AgentConfig(namespace="home"), "coder": AgentConfig(namespace="home")}):
        with pytest.raises(ConfigError, match=r"\[agents.main\]"):
            AgentDirectory.from_config(Settings(data_dir=tmp_path, agents=agents))
    # A configured agent may own the default namespace (one process per agent, its
    # default_namespace set to the agent's): then main sessions are that agent's; an
    # unconfigured name still cannot claim it.
    for agents, default in (({"assistant": AgentConfig()}, "assistant"),
                            ({"writer": AgentConfig(namespace="team")}, "team")):
        settings = Settings(data_dir=tmp_path, default_namespace=default, agents=agents)
        directory = AgentDirectory.from_config(settings)
        owner = next(iter(agents))
        assert directory.resolve(f"agent:{owner}:1").namespace == default
        assert directory.resolve("main:1").namespace == default
        if owner != default:
            with pytest.raises(InvalidSessionKey, match=owner):
                directory.resolve(f"agent:{default}:1")


def _damage_an_index_page(catalog: Path) -> None:
    """Garbage over one page of an index of the memories table: the integrity check
    fails (repair moves the file aside), the rows stay readable (they are salvaged)."""
    import contextlib
    import sqlite3

    with contextlib.closing(sqlite3.connect(catalog)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        row = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND "
                           "tbl_name = 'memories' AND sql IS NOT NULL ORDER BY name").fetchone()
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    assert row is not None
    with open(catalog, "r+b") as f:
        f.seek((int(row[0]) - 1) * size + 8)
        f.write(b"\xa5" * (size - 8))


def test_repair_keeps_a_fact_re_stated_since_the_last_sync(tmp_path: Path,
                                                           server: RelayerServer) -> None:
    """Items 7 and 9 meet (found by tests/test_log_features_stateful.py): a re-statement
    moved X's fact to a new id Y and forgot X, unsynced; the catalog is damaged. Repair
    restores the head (X live again) and salvages Y and X's forget: Y must not be mapped
    onto X (same text) before X's forget removes it, or the fact is gone."""
    ns = "restated"
    with _machine(tmp_path, "a", server.url, master_key=MASTER_HEX) as a:
        x = a.remember("the boiler is serviced every March", namespace=ns)
        a.sync(ns)
        y = a.remember("the boiler is serviced every March", namespace=ns)
        assert y.deduplicated and y.id != x.id
        settings = a.settings
    _damage_an_index_page(settings.data_dir / "catalog.sqlite3")
    rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder(64), namespace=ns)
    assert rebuild is not None and rebuild.moved_to is not None
    with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as a:
        assert list(live(a, ns).values()) == ["the boiler is serviced every March"]
        assert x.id not in live(a, ns)
