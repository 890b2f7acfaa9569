"""Which versions of a memory a version descends from (docs/sync.md, conflicts).

Version numbers alone cannot tell a concurrent update from a later one: A
updating twice (v3) and B once (v2) from the same v1 are concurrent, although
3 > 2. Each sealed fact therefore carries ``lineage``: short digests of the
sealed versions it was updated from (the newest last, at most
:data:`LINEAGE_MAX`). An older version is an ancestor of a newer one exactly
when its digest is in the newer one's lineage; otherwise the two are
concurrent and the merge rule keeps the loser in history as CONFLICT. Facts
sealed before lineage existed carry none: they are taken as ancestors (the
rule before lineage). A version older than the window is indistinguishable
from a concurrent one and is taken as concurrent (see :data:`LINEAGE_MAX`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["LINEAGE_MAX", "is_ancestor", "next_lineage", "short"]

LINEAGE_MAX: Final = 64
"""Ancestors kept per version (16 bytes each as hex). Beyond them ancestry cannot be
told from the record: such a pair is taken as concurrent (a CONFLICT kept in history,
never a version dropped unseen), unless the machine holding the newer version still
has the older one in its own history (namespace_log.py)."""


def short(digest: str) -> str:
    return digest[:32]


def next_lineage(previous: Mapping[str, Any] | None, previous_digest: str | None) -> list[str]:
    """The lineage of the version updated from ``previous`` (its record and digest)."""
    lineage = [str(d) for d in (previous or {}).get("lineage") or [] if isinstance(d, str)]
    if previous_digest:
        lineage.append(short(previous_digest))
    return lineage[-LINEAGE_MAX:]


def is_ancestor(older_digest: str | None, newer: Mapping[str, Any]) -> bool:
    """Whether the version of ``older_digest`` is an ancestor of the ``newer`` record."""
    lineage = newer.get("lineage")
    if older_digest is None or not isinstance(lineage, list) or not lineage:
        return True  # no information: the rule before lineage (higher version descends)
    # Not in the window: concurrent, or an ancestor older than the window. Taking it as
    # concurrent can only add a CONFLICT entry to history; taking it as an ancestor
    # could drop a concurrent version without a trace.
    return short(older_digest) in lineage
