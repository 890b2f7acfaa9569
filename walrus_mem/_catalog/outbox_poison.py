"""Outbox batches a publisher refuses for good ("poisoned").

A publisher may refuse a batch permanently: a body over its size cap (413,
:class:`~walrus_mem.errors.BodyTooLarge`) or a request it will never accept
(400, :class:`~walrus_mem.errors.BadRequest`). Retried as is, such a batch
failed on every sync and, since sync published no manifest while the outbox
was non-empty, blocked every later manifest of the namespace (red team f20).

A refusal is: 413 (:class:`~walrus_mem.errors.BodyTooLarge`), 400
(:class:`~walrus_mem.errors.BadRequest`), or a blob marked invalid (reason
``MARKED_INVALID``: the network will refuse that blob id again).

* A refused quilt is **split** into one batch per memory at once (the cap may
  be the quilt's total size), so its other members publish on their own.
* A single-memory batch refused :data:`POISON_AFTER` times in a row is
  **poisoned**: reported in every ``sync``'s errors and by ``doctor``, still
  retried (a publisher whose limit is raised heals it), and no longer holds
  back manifests: the namespace's manifest lists what is published. A memory
  left out of a manifest is not deleted by it (docs/sync.md, union rule).
"""

from __future__ import annotations

from typing import Any, Final

from ..errors import BadRequest, BodyTooLarge, StorageError

__all__ = ["POISON_AFTER", "REFUSED", "describe", "is_poisoned", "refused_for_good"]

POISON_AFTER: Final = 3
"""Permanent refusals in a row after which a single-memory batch is poisoned."""
REFUSED: Final = "refused for good: "
"""Prefix of an outbox batch's ``last_error`` when the refusal was permanent."""


def refused_for_good(exc: StorageError) -> bool:
    """A refusal the same publisher will repeat for the same bytes: too large, a bad
    request, or a blob the network marked invalid (final for that blob id, issue 25)."""
    return isinstance(exc, BodyTooLarge | BadRequest) or exc.reason == "MARKED_INVALID"


def is_poisoned(batch: Any) -> bool:
    """An outbox row (``attempts``, ``last_error``) refused for good often enough."""
    return int(batch["attempts"]) >= POISON_AFTER \
        and str(batch["last_error"] or "").startswith(REFUSED)


def describe(batch: Any, members: list[str]) -> str:
    """One line for sync errors and doctor (no memory text: ids only)."""
    shown = ", ".join(members[:3]) + (f" and {len(members) - 3} more" if len(members) > 3
                                      else "")
    return (f"poisoned after {int(batch['attempts'])} permanent refusals "
            f"({str(batch['last_error'])[len(REFUSED):]}): memory {shown or '?'} stays queued, "
            "left out of manifests (nothing is deleted); forget it, shorten it, or use a "
            "publisher that accepts it (retried at every sync)")
