"""How two states of one namespace combine: the merge rule (docs/sync.md).

A state is a set of live memories (id → version, update time, digest of the
sealed fact) and a set of tombstones (id → version at forget). Merging is a
union, and a memory present on both sides with different content resolves by
one deterministic rule:

1. A tombstone wins over every version: a memory forgotten anywhere stays
   forgotten everywhere once the heads meet, and no later manifest lists it.
2. Otherwise the higher ``version`` wins (more updates);
3. on equal versions the later ``updated_at`` wins, then the larger digest.

When both sides updated a memory concurrently (equal versions with
different content, or a lower version that is not an ancestor of the higher
one by content: lineage.py), the losing version is kept in ``history`` as a
``CONFLICT`` entry and counted in the report, on both machines, unless the two
versions hold the same fact (the same edit made on both machines, sealed with
different nonces): that is decided once both are opened (_log/apply.py).

Absence is not deletion: a manifest that does not list a memory says nothing
about it, so an old or partial snapshot can never remove anything. The rule
is commutative, associative and idempotent, so machines that exchanged heads
end with the same live memories whatever the order of their pulls.

Two different memories that end up with the same text (remembered on two
machines independently) are **twins**: both stay, as any two memories do
(counted as ``deduplicated``; recall shows one of them). A merge never turns
one memory into a tombstone of another: a tombstone only ever comes from a
forget of that very id, so an update of either twin, or a forget of one
written without knowing the other, merges like any other change, in any
order (catalog.dedupe_slot keeps the unique text index apart for them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .manifest import Entry

__all__ = ["LocalVersion", "MergePlan", "plan_merge"]


@dataclass(frozen=True)
class LocalVersion:
    """The current version of a live local memory, as the merge rule sees it."""

    version: int
    updated_at: float
    digest: str

    def rank(self) -> tuple[int, float, str]:
        return (self.version, self.updated_at, self.digest)


@dataclass
class MergePlan:
    """What merging remote entries into the local state takes."""

    add: list[Entry] = field(default_factory=list)
    """Live remotely, unknown here: fetch and insert."""
    replace: list[Entry] = field(default_factory=list)
    """Remote version wins over the local one: fetch and make it current."""
    conflicts: list[Entry] = field(default_factory=list)
    """Replaced at the same version (the local version loses, kept in history); a
    higher remote version is found concurrent only once fetched (_log/apply.py)."""
    kept: list[Entry] = field(default_factory=list)
    """Local version wins over a concurrent remote one: the remote loser goes to history."""
    forget: list[Entry] = field(default_factory=list)
    """Remote tombstones of memories live here."""
    tombstones: list[Entry] = field(default_factory=list)
    """Remote tombstones of memories not live here (recorded so they stay gone)."""
    rivals: list[Entry] = field(default_factory=list)
    """Remote versions that lost to another remote version of the same pull (several
    heads at once) and are neither the local version nor its ancestor: once the winner
    is in, each one concurrent with it goes to history as a conflict (_log/apply.py),
    as it would have had the heads been pulled one by one."""
    unchanged: int = 0

    @property
    def fetches(self) -> list[Entry]:
        return [*self.add, *self.replace, *self.kept]


def plan_merge(
    remote: Iterable[Entry],
    live: Mapping[str, LocalVersion],
    tombstones: Mapping[str, int],
    concurrent: Callable[[str, Entry], bool] | None = None,
) -> MergePlan:
    """Decide, entry by entry, how ``remote`` merges into the local state.

    ``concurrent(id, entry)``: whether a remote version lower than the local one is
    not its ancestor (then the remote loser goes to history as a conflict).
    """
    plan = MergePlan()
    best: dict[str, Entry] = {}
    for entry in remote:  # several heads may list one memory: keep the winner
        other = best.get(entry.memory_id)
        if other is None or _wins(entry, other):
            best[entry.memory_id] = entry
    seen_rivals: set[tuple[str, str]] = set()
    for entry in remote:
        mid, win = entry.memory_id, best[entry.memory_id]
        local = live.get(mid)
        if (entry.deleted or win.deleted or mid in tombstones or entry.digest is None
                or entry.digest == win.digest or (mid, entry.digest) in seen_rivals
                or (local is not None and local.digest == entry.digest)):
            continue
        if (local is not None and concurrent is not None and entry.version < local.version
                and not concurrent(mid, entry)):
            continue  # an ancestor of our version: it conflicts with nothing new
        seen_rivals.add((mid, entry.digest))
        plan.rivals.append(entry)
    for mid, entry in best.items():
        if entry.deleted:
            if mid in live:
                plan.forget.append(entry)
            elif mid in tombstones:
                plan.unchanged += 1
            else:
                plan.tombstones.append(entry)
            continue
        if mid in tombstones:
            plan.unchanged += 1
            continue
        local = live.get(mid)
        if local is None:
            plan.add.append(entry)
        elif local.digest == entry.digest:
            plan.unchanged += 1
        elif entry.rank() > local.rank():
            plan.replace.append(entry)
            if entry.version == local.version:
                plan.conflicts.append(entry)
        elif entry.version == local.version or (
                concurrent is not None and concurrent(mid, entry)):
            plan.kept.append(entry)
        else:
            plan.unchanged += 1  # an older version of ours
    return plan


def _wins(a: Entry, b: Entry) -> bool:
    if a.deleted != b.deleted:
        return a.deleted
    return a.rank() > b.rank()
