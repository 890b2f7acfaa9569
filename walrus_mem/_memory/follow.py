"""Pulls that follow a key rotation made on another machine.

The log (namespace_log.py, _log/generation.py) tells when a head it met is sealed
under a newer, verified key generation of the namespace. A data dir holding nothing
of the namespace adopts that generation inside the pull. One holding memories under
an older generation cannot merge it as it is: its own copies would stay sealed under
the retired key and its next manifest would list them. So :func:`pull_following`
runs the rotation to that generation here (rotation.follow_rotation: re-seal,
publish, a manifest that merges the newer heads) once the pull has released the
namespace, then pulls again. Memory.sync, pull and restore go through it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, WrongNamespace
from ..models import PullReport, RestoreReport
from .network_reset import mark_restored
from .rotation import RotationReport, follow_rotation

if TYPE_CHECKING:
    from .._log.context import ProgressCallback
    from .._log.heads import HeadRef
    from .parts import Parts

__all__ = ["pull", "pull_following", "restore"]

log = logging.getLogger(__name__)


def pull_following(parts: Parts, ns: str, heads: Sequence[str | HeadRef] | None,
                   **kw: Any) -> tuple[PullReport, RotationReport | None]:
    """``NamespaceLog.pull(ns, heads, **kw)``, following a rotation it meets; the
    report, and the rotation's when one was followed."""
    nslog = parts.log
    try:
        report = nslog.pull(ns, heads, **kw)
    except WrongNamespace:
        if nslog.ahead.get(ns) is None:
            raise  # another key's head, not a rotation of this namespace
        report = None
    ahead = nslog.ahead.pop(ns, None)
    if ahead is not None and nslog.unfinished(ns) is not None:
        # A rotation never begins over an unfinished pull (issue 23, item 3): that pull
        # is resumed first (restore), and the pull after it follows.
        log.warning("the heads of %r include key generation %d, but a pull or restore of it "
                    "is unfinished: finish it (`walrus-mem restore -n %s`), then the rotation "
                    "is followed", ns, ahead.generation, ns)
        ahead = None
    if ahead is None:
        if report is None:
            raise WrongNamespace(f"a head of {ns!r} is sealed under a newer key generation, "
                                 "not followed while a pull or restore of it is unfinished: "
                                 f"`walrus-mem restore -n {ns}` finishes that first")
        return report, None
    nslog.merged_on_publish.pop(ns, None)
    rotation = follow_rotation(parts, ns, ahead.generation)
    merged = nslog.merged_on_publish.pop(ns, None)  # what the rotation's manifest merged
    if not rotation.complete:
        log.warning("following the rotation of %r to key generation %d is not complete (%s); "
                    "the next sync (or `walrus-mem keys rotate -n %s`) finishes it", ns,
                    ahead.generation, "; ".join(rotation.errors) or "interrupted", ns)
    # Again, under the new generation: an explicit head merges now (quiet: the
    # rotation's manifest may contain it already), the heads file's are up to date.
    again = nslog.pull(ns, heads, **{**kw, "quiet": True})
    base = merged if again.up_to_date and merged is not None else again
    if report is not None and base.up_to_date:
        base = report
    return base.model_copy(update={"key_generation": ahead.generation,
                                   "skipped": again.skipped, "up_to_date": False}), rotation


def restore(parts: Parts, ns: str, manifest_blob_id: str | Sequence[str] | None,
            progress: ProgressCallback | None, *, allow_stale: bool, allow_unrelated: bool,
            allow_legacy: bool) -> RestoreReport:
    """Memory.restore of ``ns`` (validated), as its doc says."""
    # The access check first: a restore into a namespace this catalog holds under
    # another key (even an empty one) must write nothing (issue 23, item 14).
    parts.keys.authorize(ns)
    if isinstance(manifest_blob_id, str) or manifest_blob_id is None:
        heads = None if manifest_blob_id is None else [manifest_blob_id]
    else:
        heads = list(manifest_blob_id)
        if not heads:
            raise InvalidInput("restore needs at least one head reference, or None")
    if heads is None and parts.log.tables.restoring(ns) is None and not parts.log.newest(ns):
        raise InvalidInput(
            f"no head of namespace {ns!r} is known here: pass manifest_blob_id, the head "
            "reference `walrus-mem sync` printed where it was written (or configure "
            "heads_file)")
    # A head of another key generation (a rotation made elsewhere) is adopted or
    # followed only once it verifies under it (_log/generation.py, follow.py).
    report, _ = pull_following(parts, ns, heads, allow_stale=allow_stale,
                               allow_unrelated=allow_unrelated, progress=progress,
                               recheck=True, allow_legacy=allow_legacy)
    parts.publisher.retry_deletions(ns)  # e.g. a pulled forget killed before its deletions
    if report.complete:
        mark_restored(parts, ns)  # the head the per-sync network check reads (N8)
    head = report.heads[0] if report.heads else (
        report.legacy or _manifest_of(parts, ns) or "")
    return RestoreReport(
        namespace=ns, manifest_blob_id=head, total=report.total,
        restored=report.added + report.updated,
        skipped=report.total - report.added - report.updated - len(report.failed)
        - len(report.unreadable),
        failed=report.failed, missing=report.missing, expired=report.expired,
        unreadable=report.unreadable,
        forgotten=report.forgotten, conflicts=report.conflicts,
        equivocations=report.equivocations, reembedded=report.reembedded,
        reembedded_because=report.reembedded_because,
        complete=report.complete, resumed=report.resumed,
        key_generation=report.key_generation, skipped_heads=report.skipped)


def pull(parts: Parts, ns: str, heads: str | Sequence[str] | None, *, allow_stale: bool,
         allow_unrelated: bool, progress: ProgressCallback | None,
         allow_legacy: bool) -> PullReport:
    """Memory.pull into ``ns`` (validated), as its doc says."""
    parts.keys.authorize(ns)  # as in restore: nothing is written under another key
    if isinstance(heads, str):
        heads = [heads]
    elif heads is not None:
        heads = list(heads)
        if not heads:
            raise InvalidInput("pull needs at least one head reference")
    report, _ = pull_following(parts, ns, heads, allow_stale=allow_stale,
                               allow_unrelated=allow_unrelated, progress=progress,
                               allow_legacy=allow_legacy)
    parts.publisher.retry_deletions(ns)  # e.g. a pulled forget killed before its deletions
    return report


def _manifest_of(parts: Parts, ns: str) -> str | None:
    info = parts.catalog.namespace(ns)
    return None if info is None else info["manifest_blob_id"]
