"""Pulls that follow a key rotation made on another machine.

The log (namespace_log.py, log_generation.py) tells when a head it met is sealed
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

from ..errors import WrongNamespace
from ..models import PullReport
from .rotation import RotationReport, follow_rotation

if TYPE_CHECKING:
    from .._log.heads import HeadRef
    from .parts import Parts

__all__ = ["pull_following"]

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
