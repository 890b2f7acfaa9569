"""Consolidation: merge near-duplicate memories and retire facts a newer fact contradicts.

``Memory.consolidate(namespace)`` and ``walrus-mem consolidate`` call
:func:`consolidate`. Two kinds of change:

* **merge**: two live memories whose stored embeddings (computed at remember
  time, never recomputed) have cosine similarity >= ``similarity`` (default
  0.92) and compatible categories. The newer one is kept, with the higher
  importance of the two; the older one is retired.
* **supersede**: two memories state the same *slot* of the same subject
  with different values -- where the user lives ("moved to Berlin" retires
  "lives in Lisbon"), works, works as, is called, eats (vegetarian / vegan),
  or a "favourite X" -- and the newer one wins. "User's sister lives in
  Lisbon" is another subject and is left alone. Beyond those six, any
  single-valued attribute stated as "<user>'s <attribute> is <Value>" with an
  entity-like value ("My dentist is Dr. Silva" retires "My dentist is Dr.
  Haddad"; relations such as "my sister is" are not single-valued).
* **explicit change**: a newer fact that names the value it replaces
  ("switched from tea to coffee", "uses Linear instead of Jira", "no longer
  drinks coffee") retires the older standing facts about the user that
  state that value (not episodes such as "drank tea in Kyoto last year", not
  other subjects such as "User's sister likes tea").

Gates: only a memory older than ``min_age`` (default one hour) is retired,
so a fact being corrected in the current conversation is not; nothing is
touched with ``dry_run=True``, which returns the same report.

Every change is an ordinary :meth:`Memory.update` -- a new version recorded in
the memory's history -- and is reversible: a retired memory carries
``superseded_by`` and a ``consolidation`` record (run id, reason, similarity,
the values it had before) in its metadata; the integrations leave retired
memories out of recall, search and list; :func:`undo` restores every memory a
run changed (another recorded version).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import numpy as np

from ..errors import InvalidInput

__all__ = [
    "NOT_RETIRED",
    "ConsolidationAction",
    "ConsolidationReport",
    "consolidate",
    "change_of",
    "slot_of",
    "undo",
]

#: Filter that leaves out retired memories (for recall, search and list).
NOT_RETIRED: Final[dict[str, Any]] = {"NOT": {"superseded_by": "*"}}
_PAGE: Final = 1000
_BLOCK: Final = 512

ActionKind = Literal["merge", "supersede"]


@dataclass(frozen=True)
class ConsolidationAction:
    """One planned or applied change: ``retire`` is retired in favour of ``keep``."""

    kind: ActionKind
    keep: str
    retire: str
    reason: str
    similarity: float
    keep_text: str = ""
    retire_text: str = ""


@dataclass
class ConsolidationReport:
    """What a run planned (``dry_run``) or did; ``run_id`` is what :func:`undo` takes."""

    namespace: str
    run_id: str
    dry_run: bool
    considered: int = 0
    actions: list[ConsolidationAction] = field(default_factory=list)
    too_young: int = 0
    applied: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (the CLI's ``--json``)."""
        out = asdict(self)
        out.update(merged=self.merged, superseded=self.superseded)
        return out

    @property
    def merged(self) -> int:
        return sum(1 for a in self.actions if a.kind == "merge")

    @property
    def superseded(self) -> int:
        return sum(1 for a in self.actions if a.kind == "supersede")


# ---------------------------------------------------------------------------
# slots: what a fact says about which subject
# ---------------------------------------------------------------------------

_NAME = r"[A-Z][\w'&.-]*(?:\s+(?:de\s+|la\s+|van\s+)?[A-Z][\w'&.-]*){0,2}"
_SLOTS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (slot, re.compile(rx)) for slot, rx in (
        ("residence", rf"^(?P<subj>.+?)\s+(?:now\s+|just\s+|recently\s+)?(?:lives?|is\s+living"
                      rf"|resides?|is\s+based|moved|has\s+moved|relocated|has\s+relocated"
                      rf"|is\s+moving)\s+(?:back\s+)?(?:in|to)\s+(?P<value>{_NAME})"),
        ("employer", rf"^(?P<subj>.+?)\s+(?:now\s+|just\s+|recently\s+)?(?:(?:works?|is\s+working"
                     rf"|is\s+employed|started\s+(?:a\s+new\s+job\s+)?)\s+(?:at|for)|joined"
                     rf"|has\s+joined)\s+(?P<value>{_NAME})"),
        ("job", r"^(?P<subj>.+?)\s+(?:now\s+)?works\s+as\s+an?\s+(?P<value>[a-z][\w -]{2,40}?)"
                r"(?:\s+(?:at|for|in)\b|[.,;]|$)"),
        ("name", rf"^(?P<subj>.+?)(?:'s)?\s+name\s+is\s+(?P<value>{_NAME})"),
        ("diet", r"^(?P<subj>.+?)\s+(?:is|became|has\s+become|went)\s+(?:now\s+)?(?:a\s+)?"
                 r"(?P<value>vegetarian|vegan|pescatarian|carnivore|omnivore)\b"),
    )
)
_FAVOURITE: Final = re.compile(
    r"^(?P<subj>.+?)'s\s+(?:new\s+)?favou?rite\s+(?P<what>[a-z][\w -]{1,30}?)\s+is\s+(?:now\s+)?"
    r"(?P<value>.+?)[.!]?$"
)


# Any single-valued attribute stated as "<subject>'s <attribute> is <Value>": the value
# must look like an entity (capital, digit, "+"), so descriptions ("my sister is a
# nurse", "my manager is very nice") are not slots. Relations and things people have
# several of are left out: "my sister is Ana" and "my sister is Marta" can both hold.
_ATTRIBUTE: Final = re.compile(
    r"^(?P<subj>(?:[Tt]he\s+)?[Uu]ser|[Mm]y)(?:'s)?\s+(?:current\s+|new\s+|main\s+)?"
    r"(?P<attr>[a-z][a-z-]*(?:\s+[a-z][a-z-]*){0,2}?)\s+is\s+(?:now\s+)?"
    r"(?P<value>(?:(?:a|an|the)\s+)?[A-Z0-9+][^!?;\n]*?)\s*[.!]?$"
)
_MANY: Final = frozenset(
    "sister brother son daughter child kid friend cousin colleague coworker co-worker "
    "neighbour neighbor aunt uncle grandchild grandson granddaughter nephew niece parent pet "
    "cat dog hobby allergy goal plan project idea hero".split()
)
# An explicit change names the old value: "switched from tea to coffee", "uses Linear
# instead of Jira", "no longer drinks coffee". Older facts of the same subject that
# state the old value are retired, whatever the attribute.
_CHANGE: Final = tuple(re.compile(rx, re.IGNORECASE) for rx in (
    r"^(?P<subj>(?:the\s+)?user|i)\b.*?\b(?:switched|changed|moved|went|upgraded|converted"
    r"|migrated)\s+from\s+(?P<old>[^.,;]+?)\s+to\s+(?P<new>[^.,;]+)",
    r"^(?P<subj>(?:the\s+)?user|i)\b.*?\s(?P<new>\w[^.,;]*?)\s+instead\s+of\s+"
    r"(?P<old>[^.,;]+)",
    r"^(?P<subj>(?:the\s+)?user|i)\s+(?:no\s+longer\s+|doesn't\s+|does\s+not\s+|don't\s+)"
    r"(?P<verb>[a-z]+)\s+(?P<old>[^.,;]+?)(?:\s+(?:any\s*more|anymore))?\s*[.!]?$",
))


def _norm_subject(subject: str) -> str:
    s = subject.strip().lower()
    s = re.sub(r"^(?:the\s+)?user\b|^(?:my|i)$", "user", s)
    return re.sub(r"\s+", " ", s)


def change_of(text: str) -> tuple[str, str] | None:
    """``(subject, old value)`` a fact explicitly says changed, or ``None``.

    >>> change_of("User switched from tea to coffee.")
    ('user', 'tea')
    """
    sentence = text.strip()
    for pattern in _CHANGE:
        match = pattern.search(sentence)
        if match:
            old = re.sub(r"^(?:a|an|the|my)\s+", "", match.group("old").strip().lower())
            if "verb" in match.groupdict() and match.group("verb"):
                old = f"{match.group('verb').rstrip('s')} {old}"
            return _norm_subject(match.group("subj")), old
    return None


_OWNER: Final = re.compile(r"^(?:(?:the\s+)?user(?:'s\s+(?P<of>[\w-]+))?|i|my\s+(?P<my>[\w-]+))\b")
# an episode ("drank tea in Kyoto last year") is history, not a standing fact to retire
_EPISODE: Final = re.compile(
    r"\b(?:yesterday|ago|last\s+(?:week|month|year|night|summer|winter)|in\s+\d{4}|was|were"
    r"|did|had|went|used\s+to)\b|\b\w+ed\s+(?:with|at|in|on)\b",
    re.IGNORECASE,
)


def _states(text: str, subject: str, old: str) -> bool:
    """The fact is a standing statement about ``subject`` that mentions ``old``."""
    low = text.strip().lower()
    owner = _OWNER.match(low)
    if owner is None or subject != "user" or _EPISODE.search(low):
        return False
    if (owner.group("of") or owner.group("my") or "") in _MANY:
        return False  # about the user's sister, pet, ...: another subject
    verb, _, obj = old.partition(" ")
    if obj and re.search(rf"\b{re.escape(verb)}", low):
        return bool(re.search(rf"\b{re.escape(verb)}\w*\s+(?:\w+\s+)?{re.escape(obj)}\b", low))
    return bool(re.search(rf"\b{re.escape(old)}\b", low))


def slot_of(text: str) -> tuple[str, str, str] | None:
    """``(subject, slot, value)`` a fact states, or ``None``.

    >>> slot_of("User moved to Berlin.")
    ('user', 'residence', 'berlin')
    """
    sentence = text.strip()
    for slot, pattern in _SLOTS:
        match = pattern.search(sentence)
        if match:
            return (_norm_subject(match.group("subj")), slot,
                    match.group("value").strip().rstrip(".,;!").lower())
    match = _FAVOURITE.search(sentence)
    if match:
        return (_norm_subject(match.group("subj")), "favourite " + match.group("what").lower(),
                match.group("value").strip().lower())
    match = _ATTRIBUTE.search(sentence)
    if match and match.group("attr").split()[-1] not in _MANY:
        attr = re.sub(r"^favou?rite\b", "favourite", match.group("attr"))
        if attr == "name":
            attr = "name"
        slot = attr if attr.startswith("favourite ") or attr == "name" else "attribute " + attr
        return (_norm_subject(match.group("subj")), slot,
                re.sub(r"^(?:a|an|the)\s+", "", match.group("value").strip().lower()))
    return None


# ---------------------------------------------------------------------------
# planning and applying
# ---------------------------------------------------------------------------


def _live(memory: Any, namespace: str) -> list[Any]:
    out: list[Any] = []
    offset = 0
    while True:
        page = memory.list(namespace, filters=NOT_RETIRED, limit=_PAGE, offset=offset)
        out.extend(page)
        if len(page) < _PAGE:
            return out
        offset += _PAGE


def _compatible(a: Any, b: Any) -> bool:
    return a.category is None or b.category is None or a.category == b.category


def _newer(a: Any, b: Any) -> tuple[Any, Any]:
    """(newer, older) by creation time, then id for a stable order."""
    return (a, b) if (a.created_at, a.id) >= (b.created_at, b.id) else (b, a)


def _plan(records: Sequence[Any], vectors: dict[str, Any], *, similarity: float,
          min_age: timedelta, now: datetime, focus: set[str] | None = None
          ) -> tuple[list[ConsolidationAction], int]:
    actions: list[ConsolidationAction] = []
    retired: set[str] = set()
    too_young = 0
    cutoff = now - min_age

    def retire(kind: ActionKind, keep: Any, old: Any, reason: str, sim: float) -> None:
        nonlocal too_young
        if old.created_at > cutoff:
            too_young += 1
            return
        retired.add(old.id)
        actions.append(ConsolidationAction(kind, keep.id, old.id, reason, round(sim, 4),
                                           keep.text, old.text))

    with_vec = [r for r in records if r.id in vectors]
    if len(with_vec) > 1:
        matrix = np.stack([np.asarray(vectors[r.id], dtype=np.float32) for r in with_vec])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit = (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)
        rows = [i for i, r in enumerate(with_vec) if focus is None or r.id in focus]
        pairs: list[tuple[float, int, int]] = []
        for start in range(0, len(rows), _BLOCK):  # blockwise: memory O(block x n)
            block = rows[start:start + _BLOCK]
            sims = unit[block] @ unit.T
            for bi, j in np.argwhere(sims >= similarity).tolist():
                i = block[bi]
                if i != j and (focus is not None or i < j):
                    pairs.append((float(sims[bi, j]), min(i, j), max(i, j)))
        for sim, i, j in sorted(set(pairs), key=lambda f: -f[0]):
            a, b = with_vec[i], with_vec[j]
            if a.id in retired or b.id in retired or not _compatible(a, b):
                continue
            keep, old = _newer(a, b)
            retire("merge", keep, old, "near-duplicate", sim)
    by_slot: dict[tuple[str, str], list[tuple[Any, str]]] = {}
    for record in records:
        if record.id in retired:
            continue
        found = slot_of(record.text)
        if found is not None:
            subject, slot, value = found
            by_slot.setdefault((subject, slot), []).append((record, value))
    for (_subject, slot), items in by_slot.items():
        items.sort(key=lambda rv: (rv[0].created_at, rv[0].id))
        newest, newest_value = items[-1]
        if focus is not None and newest.id not in focus:
            continue
        for record, value in items[:-1]:
            if value != newest_value and record.id not in retired:
                retire("supersede", newest, record, f"{slot}: {value} -> {newest_value}", 0.0)
    # explicit changes: the newer fact names the value it replaces
    for newer in records:
        change = change_of(newer.text) if newer.id not in retired else None
        if change is None or focus is not None and newer.id not in focus:
            continue
        subject, old_value = change
        for record in records:
            if (record.id in retired or record.id == newer.id
                    or (record.created_at, record.id) >= (newer.created_at, newer.id)
                    or change_of(record.text) is not None):
                continue
            if _states(record.text, subject, old_value):
                retire("supersede", newer, record, f"changed: {old_value}", 0.0)
    return actions, too_young


def consolidate(
    memory: Any,
    namespace: str | None = None,
    *,
    similarity: float = 0.92,
    min_age: timedelta = timedelta(hours=1),
    dry_run: bool = False,
    now: datetime | None = None,
    focus: Sequence[str] | None = None,
) -> ConsolidationReport:
    """Merge near-duplicates and retire superseded facts of one namespace (see module doc).

    ``focus`` limits the run to changes involving those memory ids (what
    auto-capture just stored), so it costs O(len(focus) x n), not O(n^2).
    """
    if not 0.0 < similarity <= 1.0:
        raise InvalidInput("similarity must be in (0, 1]")
    if min_age < timedelta(0):
        raise InvalidInput("min_age must not be negative")
    ns = namespace or memory.settings.default_namespace
    now = now or datetime.now(UTC)
    records = _live(memory, ns)
    vectors = memory.stored_vectors([r.id for r in records], namespace=ns) if records else {}
    actions, too_young = _plan(records, vectors, similarity=similarity, min_age=min_age, now=now,
                               focus=set(focus) if focus is not None else None)
    report = ConsolidationReport(ns, uuid.uuid4().hex[:16], dry_run, len(records), actions,
                                 too_young)
    if dry_run:
        return report
    by_id = {r.id: r for r in records}
    stamp = now.isoformat()
    for action in actions:
        old = by_id[action.retire]
        meta = dict(old.metadata)
        meta["superseded_by"] = action.keep
        meta["consolidation"] = {"run": report.run_id, "kind": action.kind,
                                 "reason": action.reason, "similarity": action.similarity,
                                 "at": stamp}
        memory.update(old.id, namespace=ns, metadata=meta)
        if action.kind == "merge":
            keep = by_id[action.keep]
            if old.importance > keep.importance:
                keep_meta = dict(keep.metadata)
                keep_meta["consolidation_merged"] = {"run": report.run_id,
                                                     "importance_before": keep.importance}
                by_id[keep.id] = memory.update(keep.id, namespace=ns, metadata=keep_meta,
                                               importance=old.importance)
        report.applied += 1
    return report


def _changed_by(memory: Any, namespace: str, run_id: str) -> Iterator[Any]:
    offset = 0
    while True:
        page = memory.list(namespace, limit=_PAGE, offset=offset)
        for record in page:
            meta = record.metadata
            if (meta.get("consolidation") or {}).get("run") == run_id or \
                    (meta.get("consolidation_merged") or {}).get("run") == run_id:
                yield record
        if len(page) < _PAGE:
            return
        offset += _PAGE


def undo(memory: Any, run_id: str, namespace: str | None = None) -> int:
    """Reverse every change of run ``run_id``; returns how many memories were restored."""
    ns = namespace or memory.settings.default_namespace
    restored = 0
    for record in list(_changed_by(memory, ns, run_id)):
        meta = dict(record.metadata)
        importance = None
        if (meta.get("consolidation") or {}).get("run") == run_id:
            meta.pop("superseded_by", None)
            meta.pop("consolidation", None)
        merged = meta.get("consolidation_merged") or {}
        if merged.get("run") == run_id:
            importance = float(merged["importance_before"])
            meta.pop("consolidation_merged", None)
        memory.update(record.id, namespace=ns, metadata=meta, importance=importance)
        restored += 1
    return restored
