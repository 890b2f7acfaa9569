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

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["LINEAGE_MAX", "content_digest", "descends", "is_ancestor", "next_lineage",
           "short"]

CONTENT_PERSON: Final = b"walrusmem.cline"
_NOT_CONTENT: Final = frozenset({"lineage", "content_lineage", "vec"})

LINEAGE_MAX: Final = 64
"""Ancestors kept per version (16 bytes each as hex). Beyond them ancestry cannot be
told from the record: such a pair is taken as concurrent (a CONFLICT kept in history,
never a version dropped unseen), unless the machine holding the newer version still
has the older one in its own history (_log/apply.py)."""


def short(digest: str) -> str:
    return digest[:32]


def content_digest(record: Mapping[str, Any]) -> str:
    """A digest of a version's content (the fact record less its lineage and its
    carried vector, which is derived from the text): unlike the sealed bytes' digest
    it survives resealing under a rotated key, with or without the vector. It only
    ever travels inside sealed facts (``content_lineage``), never to the server."""
    body = {k: v for k, v in record.items() if k not in _NOT_CONTENT}
    data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(data.encode("utf-8"), digest_size=16,
                           person=CONTENT_PERSON).hexdigest()


def _strings(record: Mapping[str, Any] | None, key: str) -> list[str]:
    return [str(d) for d in (record or {}).get(key) or [] if isinstance(d, str)]


def next_lineage(previous: Mapping[str, Any] | None,
                 previous_digest: str | None) -> dict[str, list[str]]:
    """The lineage fields of the version updated from ``previous`` (its record and the
    digest of its sealed bytes): ``lineage`` (sealed digests) and ``content_lineage``
    (:func:`content_digest` of each, which a key rotation's resealing keeps)."""
    lineage = _strings(previous, "lineage")
    if previous_digest:
        lineage.append(short(previous_digest))
    content = _strings(previous, "content_lineage")
    if previous is not None:
        content.append(content_digest(previous))
    return {"lineage": lineage[-LINEAGE_MAX:], "content_lineage": content[-LINEAGE_MAX:]}


def is_ancestor(older_digest: str | None, newer: Mapping[str, Any]) -> bool:
    """Whether the version of ``older_digest`` is an ancestor of the ``newer`` record."""
    lineage = newer.get("lineage")
    if older_digest is None or not isinstance(lineage, list) or not lineage:
        return True  # no information: the rule before lineage (higher version descends)
    # Not in the window: concurrent, or an ancestor older than the window. Taking it as
    # concurrent can only add a CONFLICT entry to history; taking it as an ancestor
    # could drop a concurrent version without a trace.
    return short(older_digest) in lineage


def descends(older_digest: str | None, older: Mapping[str, Any] | None,
             newer: Mapping[str, Any]) -> bool:
    """:func:`is_ancestor`, or the older version's content in the newer one's
    ``content_lineage`` (when the older record is at hand): after both machines
    rotated the key, their copies of one version differ in sealed digest only."""
    if older is not None and content_digest(older) in _strings(newer, "content_lineage"):
        return True
    return is_ancestor(older_digest, newer)
