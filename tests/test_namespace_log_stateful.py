"""Three machines on one namespace, random operations: they converge on a simple model.

One relayer_mock over loopback HTTP for the whole test; each example gets fresh
data dirs and a fresh namespace. Rules: remember, re-state a fact held (a new id,
the old one forgotten), update, forget, sync, pull another machine's head, back
a whole data dir up / restore it from the backup
(its unsynced changes are lost, as they would be; what it had published or
merged comes back from the per-user seen-heads mirror at its next sync, never
a second manifest with a seq it already used), and a restore killed halfway
(then refused publishing, then resumed). After every head ever published has
been pulled everywhere, each machine must hold exactly the live memories of
the model, nothing forgotten anywhere may be live, and the final manifests must
list every live memory and no forgotten one.

The model: per machine, memory id -> (version, texts that may hold that
version) and a set of forgotten ids; a published head carries a copy of its
machine's model; ``seen`` per machine is the merge of every head it published
or merged (the mirror outlives a data dir restored from a backup, so a sync
merges it back). Merging is the rule of walrus_mem._log.merge: a tombstone wins,
then the higher version; equal versions with different texts leave either
text acceptable (the real rule picks one, deterministically, on every machine).
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx._transports.default as httpx_default
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import walrus_mem._log.merging as log_merging
from relayer_mock.server import RelayerServer
from tests.helpers_log import Interrupt, live, machine
from walrus_mem import Memory
from walrus_mem.errors import RestoreIncomplete, StaleManifest
from walrus_mem.testing import HashEmbedder

MACHINES = 3
_SERVER: RelayerServer | None = None
_COUNTER = itertools.count()

Model = tuple[dict[str, tuple[int, frozenset[str]]], frozenset[str]]


def merge(a: Model, b: Model) -> Model:
    live_a, dead_a = a
    live_b, dead_b = b
    dead = dead_a | dead_b
    out: dict[str, tuple[int, frozenset[str]]] = {}
    for mid in (live_a.keys() | live_b.keys()) - dead:
        x, y = live_a.get(mid), live_b.get(mid)
        if x is None or (y is not None and y[0] > x[0]):
            out[mid] = y  # type: ignore[assignment]
        elif y is None or x[0] > y[0]:
            out[mid] = x
        else:
            out[mid] = (x[0], x[1] | y[1])
    return out, dead


def _fast_tmp() -> Path:
    """A temp dir on tmpfs when there is one: fsync is free there, and this test
    is about the log's logic, not disk durability (other tests cover that)."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="walrus-mem-3m-",
                                 dir=shm if shm.is_dir() else None))


class _World:
    """What all examples share: one relayer and three machines (data dirs).

    Each example works in a namespace of its own, so the machines can live
    across examples (opening three Memory objects per example would dominate
    the test's time)."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = url
        self.root = root
        self.mems: list[Memory] = [self.open(i) for i in range(MACHINES)]

    def open(self, i: int) -> Memory:
        return machine(self.root / f"m{i}", self.url, embedder=HashEmbedder(16),
                       read_deadline=2.0)

    def reopen(self, i: int) -> None:
        self.mems[i].close()
        self.mems[i] = self.open(i)


_WORLD: _World | None = None


@pytest.fixture(scope="module", autouse=True)
def world() -> Iterator[_World]:
    global _WORLD
    root = _fast_tmp()
    # Admin routes off, as on real Walrus: forget cannot delete blobs (a data dir
    # restored from a backup older than a forget still finds them) and the epoch
    # comes from store answers.
    with RelayerServer(root / "walrus", admin=False, fsync=False) as server:
        _WORLD = _World(server.url, root)
        try:
            yield _WORLD
        finally:
            for mem in _WORLD.mems:
                mem.close()
            _WORLD = None
            shutil.rmtree(root, ignore_errors=True)


class ThreeMachines(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert _WORLD is not None
        self.world = _WORLD
        self.mems = self.world.mems
        self.root = self.world.root
        self.ns = f"ns{next(_COUNTER)}"
        # Everyone starts from one genesis head (unrelated starts are a separate test).
        first = self.mems[0].remember("genesis fact", namespace=self.ns)
        genesis = self.mems[0].sync(self.ns).manifests[self.ns]
        for mem in self.mems[1:]:
            mem.restore(self.ns, genesis)
        start: Model = ({first.id: (1, frozenset({"genesis fact"}))}, frozenset())
        self.model: list[Model] = [start] * MACHINES
        self.heads: list[tuple[str, Model]] = [(genesis, start)]
        self.latest: list[tuple[str, Model] | None] = [(genesis, start)] * MACHINES
        self.backups: dict[int, Model] = {}
        self.seen: list[Model] = [start] * MACHINES
        self.texts = itertools.count()

    def _open(self, i: int) -> Memory:
        return self.world.open(i)

    def _reopen(self, i: int) -> None:
        self.world.reopen(i)

    def _published(self, i: int, head: str) -> None:
        self.heads.append((head, self.model[i]))
        self.latest[i] = (head, self.model[i])
        self.seen[i] = merge(self.seen[i], self.model[i])

    def _catch_up(self, i: int) -> None:
        """Publishing (or a restore with no head) first merges every head this machine
        has seen: a no-op unless its data dir was restored from a backup."""
        self.model[i] = merge(self.model[i], self.seen[i])

    def _holds(self, i: int, content: Model) -> bool:
        """``content`` adds nothing to what machine i holds or has seen."""
        known = merge(self.model[i], self.seen[i])
        return merge(known, content) == known

    def _text(self) -> str:
        return f"fact number {next(self.texts)} of {self.ns}"

    # -- rules -------------------------------------------------------------------------

    @rule(i=st.integers(0, MACHINES - 1))
    def remember(self, i: int) -> None:
        text = self._text()
        rec = self.mems[i].remember(text, namespace=self.ns)
        alive, dead = self.model[i]
        self.model[i] = ({**alive, rec.id: (1, frozenset({text}))}, dead)

    @rule(i=st.integers(0, MACHINES - 1), pick=st.integers(0, 10_000))
    def update(self, i: int, pick: int) -> None:
        alive, dead = self.model[i]
        if not alive:
            return
        mid = sorted(alive)[pick % len(alive)]
        text = self._text()
        rec = self.mems[i].update(mid, text, namespace=self.ns)
        assert rec.version == alive[mid][0] + 1
        self.model[i] = ({**alive, mid: (rec.version, frozenset({text}))}, dead)

    @rule(i=st.integers(0, MACHINES - 1), pick=st.integers(0, 10_000))
    def forget(self, i: int, pick: int) -> None:
        alive, dead = self.model[i]
        if not alive:
            return
        mid = sorted(alive)[pick % len(alive)]
        report = self.mems[i].forget(mid, namespace=self.ns)
        self.model[i] = ({k: v for k, v in alive.items() if k != mid}, dead | {mid})
        if report.manifest_blob_id is not None:  # published at once: a head like sync's
            self._catch_up(i)
            self._published(i, report.manifest_blob_id)

    @rule(i=st.integers(0, MACHINES - 1), pick=st.integers(0, 10_000))
    def restate(self, i: int, pick: int) -> None:
        """The user states again a fact this machine holds (maybe forgotten elsewhere):
        the memory moves to a new id and its old id is forgotten (walrus_mem/_memory/restate.py),
        so the fact stays live everywhere whatever forget of the old id it meets."""
        held = live(self.mems[i], self.ns)
        if not held:
            return
        texts = sorted(set(held.values()))
        text = texts[pick % len(texts)]
        rec = self.mems[i].remember(text, namespace=self.ns)
        gone = set(held) - set(live(self.mems[i], self.ns))
        assert rec.deduplicated and rec.id not in held and len(gone) == 1
        assert {held[mid] for mid in gone} == {text}
        alive, dead = self.model[i]
        alive = {mid: v for mid, v in alive.items() if mid not in gone}
        self.model[i] = ({**alive, rec.id: (1, frozenset({text}))}, dead | gone)

    @rule(i=st.integers(0, MACHINES - 1))
    def sync(self, i: int) -> None:
        report = self.mems[i].sync(self.ns)
        assert not report.errors, report.errors
        self._catch_up(i)
        head = report.manifests.get(self.ns)
        if head is not None:
            self._published(i, head)

    @rule(i=st.integers(0, MACHINES - 1), j=st.integers(0, MACHINES - 1))
    def pull(self, i: int, j: int) -> None:
        published = self.latest[j]
        if published is None:
            return
        head, content = published
        try:
            self.mems[i].pull(head, namespace=self.ns)
        except StaleManifest:
            # Refused as older than what i holds or has seen: it adds nothing to i.
            assert self._holds(i, content)
            return
        self.model[i] = merge(self.model[i], content)
        self.seen[i] = merge(self.seen[i], content)

    @rule(i=st.integers(0, MACHINES - 1))
    def backup(self, i: int) -> None:
        self.mems[i].close()
        target = self.root / f"backup{i}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.root / f"m{i}", target)
        self.backups[i] = self.model[i]
        self.mems[i] = self._open(i)

    @precondition(lambda self: bool(self.backups))
    @rule(pick=st.integers(0, MACHINES - 1))
    def restore_from_backup(self, pick: int) -> None:
        i = sorted(self.backups)[pick % len(self.backups)]
        self.mems[i].close()
        shutil.rmtree(self.root / f"m{i}")
        shutil.copytree(self.root / f"backup{i}", self.root / f"m{i}")
        self.mems[i] = self._open(i)
        self.model[i] = self.backups[i]  # its unsynced changes are gone

    @rule(i=st.integers(0, MACHINES - 1))
    def restore_a_backup_older_than_its_last_sync(self, i: int) -> None:
        """The red team's case in one step: the whole data dir (heads.sqlite3 included)
        is backed up, the machine writes and publishes, then the backup is restored.
        Its next publish must merge what it had published, never reuse its seq."""
        self.backup(i)
        text = self._text()
        rec = self.mems[i].remember(text, namespace=self.ns)
        alive, dead = self.model[i]
        self.model[i] = ({**alive, rec.id: (1, frozenset({text}))}, dead)
        self.sync(i)
        self.restore_from_backup(sorted(self.backups).index(i))

    @rule(i=st.integers(0, MACHINES - 1), j=st.integers(0, MACHINES - 1))
    def kill_during_restore(self, i: int, j: int) -> None:
        published = self.latest[j]
        if published is None or i == j:
            return
        head, content = published
        calls = itertools.count()

        def killer(done: int, total: int) -> None:
            if next(calls) >= 1 and done < total:
                raise Interrupt(f"killed at {done}/{total}")

        try:
            self.mems[i].restore(self.ns, head, progress=killer)
        except StaleManifest:
            assert self._holds(i, content)
            return
        except Interrupt:
            self._reopen(i)  # the process died
            report = self.mems[i].sync(self.ns)
            assert self.ns not in report.manifests
            assert any("RestoreIncomplete" in e for e in report.errors)
            with pytest.raises(RestoreIncomplete):
                self.mems[i]._publish_manifest(self.ns)
            resumed = self.mems[i].restore(self.ns)
            assert resumed.resumed and resumed.complete
            self._catch_up(i)  # a restore with no head also merges every head seen
        self.model[i] = merge(self.model[i], content)
        self.seen[i] = merge(self.seen[i], content)

    # -- checks ------------------------------------------------------------------------

    @invariant()
    def local_state_matches_the_model(self) -> None:
        for mem, (alive, dead) in zip(self.mems, self.model, strict=True):
            held = live(mem, self.ns)
            assert set(held) == set(alive)
            for mid, text in held.items():
                assert text in alive[mid][1]
            assert not set(held) & dead

    def teardown(self) -> None:
        try:
            self._exchange_everything()
        finally:
            for i in range(MACHINES):
                shutil.rmtree(self.root / f"backup{i}", ignore_errors=True)

    def _exchange_everything(self) -> None:
        expected: Model = ({}, frozenset())
        for content in [*self.model, *(c for _, c in self.heads)]:
            expected = merge(expected, content)
        alive, dead = expected
        # Every head ever published reaches every machine; then each publishes the
        # merged state and those heads are exchanged too.
        for mem in self.mems:
            report = mem.sync(self.ns)
            assert not report.errors, report.errors
            self.heads += [(h, expected) for h in report.manifests.values()]
        every_head = [h for h, _ in self.heads]
        for mem in self.mems:
            mem.pull(every_head, namespace=self.ns, allow_stale=True)
        merged = []
        for mem in self.mems:
            assert not mem.sync(self.ns).errors
            merged.append(mem.stats(self.ns).manifest_blob_id)
        for mem in self.mems:
            mem.pull([h for h in merged if h], namespace=self.ns, allow_stale=True)
        views = [live(mem, self.ns) for mem in self.mems]
        assert views[0] == views[1] == views[2]
        # every head of every machine is known everywhere now: no writer ever published
        # two manifests with one seq (a data dir restored from a backup merges first)
        for mem in self.mems:
            assert mem._log.seen.equivocations(self.ns) == []
        assert set(views[0]) == set(alive)
        for mid, text in views[0].items():
            assert text in alive[mid][1]
        # The manifests published once everything is known list exactly the live
        # memories, and every forgotten one only as a tombstone.
        for mem in self.mems:
            assert not mem.sync(self.ns).errors
            head = mem.stats(self.ns).manifest_blob_id
            assert head is not None
            _, entries = mem._log.read(self.ns, head)
            assert {e.memory_id for e in entries if not e.deleted} == set(alive)
            assert {e.memory_id for e in entries if e.deleted} >= dead


# CI size 100 x 8 (about 2.5 minutes here; tests/test_log_features_stateful.py, in the same
# run, covers the log's newer features): a long local run sets WALRUS_MEM_STATEFUL_EXAMPLES.
ThreeMachines.TestCase.settings = settings(
    max_examples=int(os.environ.get("WALRUS_MEM_STATEFUL_EXAMPLES", "100")),
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.fixture(autouse=True)
def small_restore_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_merging, "RESTORE_CHUNK", 2)  # so a kill lands between chunks
    # Plain-HTTP loopback only: share one TLS context instead of loading the CA
    # bundle for every client (80 ms each, most of a reopened Memory's cost).
    original = httpx_default.create_ssl_context
    monkeypatch.setattr(httpx_default, "create_ssl_context",
                        functools.lru_cache(maxsize=None)(original))


test_three_machines_converge = ThreeMachines.TestCase
