"""Forks seen all at once, and versions beyond the lineage window (docs/sync.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import walrus_mem._log.lineage as lineage
from relayer_mock.server import RelayerServer
from tests.helpers_log import MOCK_ADMIN_TOKEN, live, machine


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def events(mem, mid: str, ns: str) -> list[tuple[str, str]]:
    return [(h.event, h.text) for h in mem.history(mid, namespace=ns)]


def test_a_third_machine_pulling_two_forked_heads_at_once_counts_their_conflicts(
        tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        x, y, z = a.remember_many(["X first", "Y first", "Z first"], namespace="tf")
        b.restore("tf", a.sync().manifests["tf"])
        a.update(x.id, "X by A", namespace="tf")          # same version on both: conflict
        b.update(x.id, "X by B", namespace="tf")
        a.update(y.id, "Y by A v2", namespace="tf")       # v3 against v2: conflict
        a.update(y.id, "Y by A v3", namespace="tf")
        b.update(y.id, "Y by B v2", namespace="tf")
        b.update(z.id, "Z by B only", namespace="tf")     # one side only: no conflict
        ha, hb = a.sync().manifests["tf"], b.sync().manifests["tf"]
    with machine(tmp_path / "pairwise", server.url) as p:
        p.restore("tf", ha)
        pairwise = p.pull(hb, namespace="tf")
        expected = live(p, "tf")
    assert pairwise.conflicts == 2
    with machine(tmp_path / "c", server.url) as c:
        report = c.pull([ha, hb], namespace="tf")
        assert live(c, "tf") == expected
        assert report.conflicts == 2
        loser = ({"X by A", "X by B"} - {expected[x.id]}).pop()
        assert ("CONFLICT", loser) in events(c, x.id, "tf")
        assert ("CONFLICT", "Y by B v2") in events(c, y.id, "tf")
        assert not [e for e in events(c, z.id, "tf") if e[0] == "CONFLICT"]


def test_a_head_that_descends_from_the_other_is_no_conflict_when_pulled_together(
        tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        x = a.remember("X first", namespace="td")
        b.restore("td", a.sync().manifests["td"])
        a.update(x.id, "X by A", namespace="td")
        ha = a.sync().manifests["td"]
        b.pull(ha, namespace="td")
        b.update(x.id, "X by B after A", namespace="td")
        hb = b.sync().manifests["td"]
    with machine(tmp_path / "c", server.url) as c:
        report = c.pull([ha, hb], namespace="td")
        assert report.conflicts == 0 and live(c, "td")[x.id] == "X by B after A"


def test_a_fork_older_than_the_lineage_window_is_reported_not_lost(
        tmp_path: Path, server, monkeypatch) -> None:
    """A updates a memory more often than the lineage keeps (here 4) while B updates it
    once: B's version must not vanish as an "ancestor" of A's; it is a conflict, kept in
    history on both machines."""
    monkeypatch.setattr(lineage, "LINEAGE_MAX", 4)
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        x = a.remember("X first", namespace="lw")
        b.restore("lw", a.sync().manifests["lw"])
        for i in range(8):
            a.update(x.id, f"X by A v{i + 2}", namespace="lw")
        b.update(x.id, "X by B v2", namespace="lw")
        ha, hb = a.sync().manifests["lw"], b.sync().manifests["lw"]
        ra, rb = a.pull(hb, namespace="lw"), b.pull(ha, namespace="lw")
        assert live(a, "lw") == live(b, "lw") and live(a, "lw")[x.id] == "X by A v9"
        assert (ra.conflicts, rb.conflicts) == (1, 1)
        for m in (a, b):
            assert ("CONFLICT", "X by B v2") in events(m, x.id, "lw")


def test_beyond_the_lineage_window_a_lagging_machine_reports_a_conflict_only_on_its_side(
        tmp_path: Path, server, monkeypatch) -> None:
    """B never changed the memory; A updated it past the window. A still has B's version
    in its own history, so A sees no conflict; B cannot tell its version from a concurrent
    one and keeps it in history as CONFLICT (docs/sync.md: the documented false positive)."""
    monkeypatch.setattr(lineage, "LINEAGE_MAX", 4)
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        x = a.remember("X first", namespace="lg")
        b.restore("lg", a.sync().manifests["lg"])
        b.remember("something else on B", namespace="lg")
        for i in range(8):
            a.update(x.id, f"X by A v{i + 2}", namespace="lg")
        ha, hb = a.sync().manifests["lg"], b.sync().manifests["lg"]
        ra, rb = a.pull(hb, namespace="lg"), b.pull(ha, namespace="lg")
        assert live(a, "lg") == live(b, "lg") and live(b, "lg")[x.id] == "X by A v9"
        assert (ra.conflicts, rb.conflicts) == (0, 1)
        assert ("CONFLICT", "X first") in events(b, x.id, "lg")


def test_a_twin_keeps_its_blob_on_the_machine_that_held_it(tmp_path: Path, server) -> None:
    url = server.url
    with machine(tmp_path / "a", url) as a, machine(tmp_path / "b", url) as b:
        a.remember("seed", namespace="db")
        b.restore("db", a.sync().manifests["db"])
        x = a.remember("the same fact typed twice", namespace="db")
        y = b.remember("the same fact typed twice", namespace="db")
        ha, hb = a.sync().manifests["db"], b.sync().manifests["db"]
        for holder, other_head, own in ((b, ha, y), (a, hb, x)):
            blob = holder.get(own.id, namespace="db").blob_id
            report = holder.pull(other_head, namespace="db")
            assert report.deduplicated == 1 and not report.deleted_blobs
            assert {x.id, y.id} <= set(live(holder, "db"))
            assert blob is not None and httpx.get(f"{url}/v1/blobs/{blob}").status_code == 200
