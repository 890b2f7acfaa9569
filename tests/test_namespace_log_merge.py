"""The merge rule's red-team cases (issue 10): twins, unread blobs, races (docs/sync.md)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relayer_mock.server import RelayerServer
from tests.helpers_log import MOCK_ADMIN_TOKEN, LyingAggregator, live, machine
from walrus_mem import Memory
from walrus_mem.errors import RestoreIncomplete

T = "my parking spot is B-12"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def state(mem: Memory, ns: str) -> dict[str, tuple[Any, ...]]:
    """id -> every field a merge must keep."""
    return {r.id: (r.text, r.category, r.metadata, r.importance, r.version)
            for r in mem.list(ns, limit=10_000, include_expired=True)}


# -- twins: one text remembered on two machines -------------------------------------


def test_an_update_of_a_twin_made_after_the_merge_survives(tmp_path: Path, server) -> None:
    """f1: the twin merged on the other machine is no tombstone of it."""
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        x = a.remember("the wifi password is hunter2", namespace="tw")
        y = b.remember("the wifi password is hunter2", namespace="tw")
        ha, hb = a.sync().manifests["tw"], b.sync().manifests["tw"]
        a.pull(hb, namespace="tw", allow_unrelated=True)
        b.pull(ha, namespace="tw", allow_unrelated=True)
        b.update(y.id, "the wifi password changed to correct-horse", namespace="tw")
        blob = b.get(y.id, namespace="tw").blob_id
        ha, hb = a.sync().manifests["tw"], b.sync().manifests["tw"]
        rb = b.pull(ha, namespace="tw")
        ra = a.pull(hb, namespace="tw")
        assert (ra.forgotten, rb.forgotten, ra.updated) == (0, 0, 1)
        for m in (a, b):
            assert live(m, "tw") == {x.id: "the wifi password is hunter2",
                                     y.id: "the wifi password changed to correct-horse"}
        assert httpx.get(f"{server.url}/v1/blobs/{blob}").status_code == 200


def test_a_forget_of_one_twin_leaves_the_other(tmp_path: Path, server) -> None:
    """f1b: A forgets M; D, never having seen M, writes the same text as N: N stays."""
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "c", server.url) as c, \
            machine(tmp_path / "d", server.url) as d:
        m = a.remember(T, namespace="tf")
        c.restore("tf", a.sync().manifests["tf"])
        a.forget(m.id, namespace="tf")
        ha = a.sync().manifests.get("tf") or a.stats("tf").manifest_blob_id
        n = d.remember(T, namespace="tf")
        hd = d.sync().manifests["tf"]
        c.pull(hd, namespace="tf", allow_unrelated=True)
        c.pull(ha, namespace="tf")
        hc = c.sync().manifests["tf"]
        for other in (a, d):
            other.pull(hc, namespace="tf", allow_unrelated=True)
        for mem in (a, c, d):
            assert live(mem, "tf") == {n.id: T}


def test_twins_keep_their_own_metadata(tmp_path: Path, server) -> None:
    """f23: the copy carrying category / metadata / importance loses none of them."""
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        a.remember("Project Falcon deadline is June 1", namespace="md")
        y = b.remember("Project Falcon deadline is June 1", namespace="md", category="work",
                       metadata={"source": "contract.pdf", "pinned": True}, importance=0.95)
        ha, hb = a.sync().manifests["md"], b.sync().manifests["md"]
        b.pull(ha, namespace="md", allow_unrelated=True)
        a.pull(hb, namespace="md", allow_unrelated=True)
        for mem in (a, b):
            got = mem.get(y.id, namespace="md")
            assert (got.category, got.metadata, got.importance) == (
                "work", {"source": "contract.pdf", "pinned": True}, 0.95)
        assert state(a, "md") == state(b, "md")
        # the twin's metadata can still be edited (its text is its twin's)
        b.update(y.id, metadata={"source": "contract-v2.pdf"}, namespace="md")
        assert b.get(y.id, namespace="md").metadata == {"source": "contract-v2.pdf"}



def test_recall_shows_twins_once_and_still_fills_k(tmp_path: Path, server) -> None:
    """Twins rank side by side; recall shows the better one and reads past it for k hits."""
    texts = [f"the blue door code is {n}" for n in range(6)]
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        for text in texts:
            a.remember(text, namespace="rc")
            b.remember(text, namespace="rc")
        a.pull(b.sync().manifests["rc"], namespace="rc", allow_unrelated=True)
        assert len(live(a, "rc")) == 12
        for k in (1, 3, 5, 6):
            hits = a.recall("blue door code", namespace="rc", k=k, min_score=0)
            assert len(hits) == k
            assert len({h.record.text for h in hits}) == k


@pytest.fixture(scope="module")
def twin_heads(server, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """A start (one memory of text T) and heads of four writers acting on T's twins:
    a forget of the original, an independent copy later edited, a copy with metadata
    later rewritten, and a copy that is forgotten where it was written."""
    root = tmp_path_factory.mktemp("twins")
    url = server.url
    ns = "po"
    heads: list[str] = []
    with machine(root / "a", url) as a:
        m = a.remember(T, namespace=ns)
        start = a.sync().manifests[ns]
        a.forget(m.id, namespace=ns)
        heads.append(a.sync().manifests.get(ns) or str(a.stats(ns).manifest_blob_id))
    with machine(root / "d", url) as d:
        n = d.remember(T, namespace=ns)
        heads.append(d.sync().manifests[ns])
        d.update(n.id, metadata={"edited": "on d"}, namespace=ns)
        heads.append(d.sync().manifests[ns])
    with machine(root / "b", url) as b:
        p = b.remember(T, namespace=ns, category="work", metadata={"source": "b"},
                       importance=0.9)
        heads.append(b.sync().manifests[ns])
        b.update(p.id, "my parking spot moved to C-3", namespace=ns)
        heads.append(b.sync().manifests[ns])
    with machine(root / "e", url) as e:
        e.restore(ns, start)
        q = e.remember(T + " (east gate)", namespace=ns)
        heads.append(e.sync().manifests[ns])
        e.forget(q.id, namespace=ns)
        heads.append(e.sync().manifests.get(ns) or str(e.stats(ns).manifest_blob_id))
    return start, heads


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_twin_merges_do_not_depend_on_pull_order(server, twin_heads, data) -> None:
    """Commutativity (docs/sync.md): a machine holding the start pulls the writers'
    heads in any order and grouping, and always ends in the state of one pull of all."""
    start, heads = twin_heads
    order = data.draw(st.permutations(heads))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(heads) - 1), max_size=3)))
    groups = [order[i:j] for i, j in zip([0, *cuts], [*cuts, len(order)], strict=True)]
    with tempfile.TemporaryDirectory() as tmp:
        with machine(Path(tmp) / "ref", server.url) as ref:
            ref.restore("po", start)
            ref.pull(heads, namespace="po", allow_unrelated=True, allow_stale=True)
            expected = state(ref, "po")
        with machine(Path(tmp) / "c", server.url) as c:
            c.restore("po", start)
            for group in groups:
                c.pull(group, namespace="po", allow_unrelated=True, allow_stale=True)
            assert state(c, "po") == expected
    texts = sorted(t for t, *_ in expected.values())
    # the original was forgotten; d's edited copy and b's rewrite survive; e's is gone
    assert texts == ["my parking spot is B-12", "my parking spot moved to C-3"]
    assert {"edited": "on d"} in [md for _, _, md, *_ in expected.values()]


# -- a blob no aggregator serves during a pull --------------------------------------


def test_a_memory_whose_blob_answered_404_is_carried_forward_and_retried(
        tmp_path: Path, server) -> None:
    """f2: missing on every aggregator is not merged-and-gone: the pulling machine's
    manifests keep listing the writer's entry, and later syncs fetch it."""
    with machine(tmp_path / "a", server.url) as a:
        recs = [a.remember(f"fact number {i} about the project", namespace="nf")
                for i in range(4)]
        ha = a.sync().manifests["nf"]
        victim = recs[2]
        blob = str(a.get(victim.id, namespace="nf").blob_id)
    with LyingAggregator(server.url) as proxy, \
            machine(tmp_path / "b", server.url, aggregator=proxy.url) as b:
        proxy.swap[blob] = "A" * 43  # no such blob: 404 for it on B's only aggregator
        b.remember("B's own fact", namespace="nf")
        b.sync()
        report = b.pull(ha, namespace="nf", allow_unrelated=True)
        assert report.missing == [(victim.id, blob)] and report.added == 3
        assert victim.id not in live(b, "nf")
        hb = b.sync().manifests["nf"]
        _, entries = b._log.read("nf", hb)
        carried = {e.memory_id: e for e in entries}[victim.id]
        assert (carried.blob_id, carried.deleted) == (blob, False)
        with machine(tmp_path / "c", server.url) as c:  # a restore of B's head alone
            assert c.restore("nf", hb).restored == 5
            assert live(c, "nf")[victim.id] == "fact number 2 about the project"
        assert b.sync().pulled["nf"].missing == [(victim.id, blob)]  # still pending
        proxy.swap.clear()  # the aggregator caught up
        assert b.sync().pulled["nf"].added == 1
        assert live(b, "nf")[victim.id] == "fact number 2 about the project"
        assert b.pull(namespace="nf").up_to_date  # nothing pending any more


# -- local changes while a pull is in flight ----------------------------------------


def _on_first_fetch(mem: Memory, action: Any) -> None:
    """Run ``action`` once, when the pull fetches its first fact: after the merge was
    planned, before anything fetched is applied."""
    original = mem._log._fetch
    done: list[bool] = []

    def fetch(keys: Any, entry: Any) -> Any:
        if not done:
            done.append(True)
            action()
        return original(keys, entry)

    mem._log._fetch = fetch  # type: ignore[method-assign]


def test_an_update_made_while_a_pull_fetches_is_a_conflict_not_overwritten(
        tmp_path: Path, server) -> None:
    """f3: the plan was made against the version before the update."""
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        once, twice = a.remember_many(["meeting is on Monday", "lunch at noon"],
                                      namespace="up")
        b.restore("up", a.sync().manifests["up"])
        a.update(once.id, "meeting moved to Tuesday", namespace="up")      # v2
        a.update(twice.id, "lunch at one", namespace="up")                 # v2
        a.update(twice.id, "lunch at two", namespace="up")                 # v3
        ha = a.sync().manifests["up"]

        def edit_on_b() -> None:
            with ThreadPoolExecutor(1) as pool:  # another thread of B's process
                pool.submit(b.update, once.id, "meeting moved to Wednesday", namespace="up"
                            ).result()
                pool.submit(b.update, twice.id, "lunch at three", namespace="up").result()

        _on_first_fetch(b, edit_on_b)
        report = b.pull(ha, namespace="up")
        assert report.conflicts == 2
        # same version, B's later: B's stays (A's to history); A's v3 wins over B's v2
        assert live(b, "up") == {once.id: "meeting moved to Wednesday",
                                 twice.id: "lunch at two"}
        assert ("CONFLICT", "meeting moved to Tuesday") in [
            (h.event, h.text) for h in b.history(once.id, namespace="up")]
        assert ("CONFLICT", "lunch at three") in [
            (h.event, h.text) for h in b.history(twice.id, namespace="up")]
        hb = b.sync().manifests["up"]
        assert a.pull(hb, namespace="up").conflicts == 1
        assert live(a, "up") == live(b, "up")


def test_pulls_of_one_namespace_run_one_at_a_time_and_never_revive_a_forget(
        tmp_path: Path, server) -> None:
    """f24: a second merge waits for the first; a tombstone recorded while a merge
    fetches is checked again when the memory would be inserted."""
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        a.remember("filler fact", namespace="tp")
        n = a.remember("the spare key is under the blue pot", namespace="tp")
        h1 = a.sync().manifests["tp"]
        held: list[bool] = []

        def meanwhile() -> None:
            with b._log.turn("tp", wait=False) as free:
                held.append(not free)
            with pytest.raises(RestoreIncomplete, match="under way"):
                b._log.publish("tp")  # e.g. a forget's manifest: refused at once, not queued
            b._catalog.forget_memory("tp", n.id, 0.0, n.version + 1)  # what a 2nd pull does

        _on_first_fetch(b, meanwhile)
        report = b.pull(h1, namespace="tp")
        assert held == [True]  # the pull holds the namespace's merge/manifest lock
        assert report.added == 1 and set(live(b, "tp").values()) == {"filler fact"}
        hb = b.sync().manifests["tp"]
        _, entries = b._log.read("tp", hb)
        assert [e.deleted for e in entries if e.memory_id == n.id] == [True]


# -- key rotation on both machines ----------------------------------------------------


def test_after_both_machines_rotate_a_plain_update_is_no_conflict(
        tmp_path: Path, server) -> None:
    """f25: resealing changes every digest at the same version; the lineage also holds
    a digest of each ancestor's content, which resealing keeps."""
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        recs = a.remember_many([f"rotating fact {i}" for i in range(4)], namespace="rt").records
        b.restore("rt", a.sync().manifests["rt"])
        a.rotate_key("rt")
        b.rotate_key("rt")
        for r in recs[:2]:
            a.update(r.id, r.text + " (edited on A)", namespace="rt")
        b.update(recs[3].id, "rotating fact 3 (edited on B)", namespace="rt")
        a.update(recs[3].id, "rotating fact 3 (edited on A)", namespace="rt")  # concurrent
        ha, hb = a.sync().manifests["rt"], b.sync().manifests["rt"]
        assert b.pull(ha, namespace="rt").conflicts == 1
        assert a.pull(hb, namespace="rt").conflicts == 1
        assert live(a, "rt") == live(b, "rt")
        assert [h.event for h in b.history(recs[0].id, namespace="rt")].count("CONFLICT") == 0
