"""``Memory.sync``: publish the outbox, finish what was interrupted, pull the heads
learned elsewhere (following a rotation or a network reset), renew what is about to
expire, then publish each namespace's manifest; and the periodic manifest of writes.
"""

from __future__ import annotations

import logging
import time

from .._catalog.outbox_poison import is_poisoned
from .._keys.generations import rotation_in_progress
from ..errors import (
    LocalStoreError,
    RestoreIncomplete,
    RotationIncomplete,
    StorageError,
    WalrusMemError,
)
from ..models import PullReport, SyncReport
from . import loss_pending
from .follow import pull_following
from .network_reset import check_served
from .network_reset import follow as follow_network_reset
from .parts import Parts
from .renewal import renew_due
from .repair import requeue_lost
from .rotation import finish_rotation

__all__ = ["known_namespaces", "maybe_manifest", "sync", "sync_epoch"]

log = logging.getLogger(__name__)


def sync(parts: Parts, ns: str | None) -> SyncReport:
    """Memory.sync of ``ns`` (validated; None: every namespace), as its doc says."""
    started = time.time()
    requeue_lost(parts.catalog, ns)  # queued memories whose outbox row was lost
    published, errors = parts.publisher.flush(ns)
    errors += parts.publisher.retry_deletions(ns)  # forgets killed before deleting their blobs
    epoch: tuple[int | None, bool] | None = None  # (current, known), asked once
    renewed = 0
    manifests: dict[str, str] = {}
    pulled: dict[str, PullReport] = {}
    skipped: list[str] = []
    names = [ns] if ns is not None else known_namespaces(parts)
    for name in names:
        try:
            # an idle machine sees no store answer showing a wipe: its head answers 404
            check_served(parts, name, errors)
            problem = parts.log.announce_pending(name)  # a sync killed before announcing
            if problem is not None:
                errors.append(f"announce for {name!r}: {problem}")
            state = parts.log.unfinished(name)
            if state == "running":
                errors.append(
                    f"pull for {name!r}: a pull or restore of it is running in another "
                    "process or thread; no manifest of it from this sync (the next "
                    "sync publishes one when that has finished)")
                continue
            if state == "interrupted":
                raise RestoreIncomplete(
                    f"restore of {name!r} was interrupted: run `walrus-mem restore "
                    f"--namespace {name}` to finish it; no manifest until then")
            if rotation_in_progress(parts.catalog, name):  # interrupted: finish it first
                finished = finish_rotation(parts, name)
                published += finished.published
                errors += [f"key rotation of {name!r}: {e}" for e in finished.errors]
                if finished.manifest_blob_id is not None:
                    manifests[name] = finished.manifest_blob_id
                if not finished.complete:
                    continue
            report, rotation = pull_following(parts, name, None)
            if not report.up_to_date and any(
                    not is_poisoned(b) for b in parts.catalog.outbox_batches(name)):
                more, failures = parts.publisher.flush(name)  # re-sealed by the pull (older.py)
                published += more
                errors += failures
            skipped += [f"{name} {line}" for line in report.skipped]
            if not report.up_to_date:
                pulled[name] = report
            if rotation is not None:  # followed one made elsewhere: its manifest is ours
                errors += [f"key rotation of {name!r}: {e}" for e in rotation.errors]
                if rotation.manifest_blob_id is not None:
                    manifests[name] = rotation.manifest_blob_id
        except WalrusMemError as exc:
            errors.append(f"pull for {name!r}: {type(exc).__name__}: {exc}")
            continue
        info = parts.catalog.namespace(name)
        if info is None:
            continue
        if any(not is_poisoned(b) for b in parts.catalog.outbox_batches(name)):
            continue  # a manifest now would miss facts about to be published
        if parts.catalog.has_end_epochs(name):
            if epoch is None:
                epoch = sync_epoch(parts, started, errors)
            if not epoch[1]:
                errors.append(f"manifest for {name!r}: the current Walrus epoch is unknown, "
                              "so a manifest could list expired blobs; not published")
                continue
            renewed += renew_due(parts, name, errors, epoch[0])  # ending soon
        info = parts.catalog.namespace(name)
        assert info is not None
        if info["manifest_blob_id"] is None:
            # no point in a first manifest that lists nothing
            due = parts.catalog.count(name) > 0
        else:
            due = int(info["writes_since_manifest"]) > 0
        if not due:
            continue
        try:
            manifests[name] = parts.log.publish(name)
        except WalrusMemError as exc:  # storage, or a key that cannot be resolved
            errors.append(f"manifest for {name!r}: {type(exc).__name__}: {exc}")
        if name in manifests and parts.log.tables.unannounced(name) is not None:
            errors.append(f"announce for {name!r}: head {manifests[name]} published but "
                          "not written to heads.sqlite3 / the heads file (logged why); "
                          "the next sync writes it")
    for name in names:  # a loss seen once, not followed yet: said even with no manifest due
        pending = loss_pending.describe(parts, name)
        if pending is not None and not any(pending in e for e in errors):
            errors.append(f"network check for {name!r}: NetworkResetPending: {pending}")
    with parts.lock:
        parts.indexes.save_all()
    return SyncReport(
        published=published,
        still_queued=parts.catalog.queued_count(ns),
        errors=errors,
        manifests=manifests,
        renewed=renewed,
        pulled=pulled,
        skipped_heads=skipped,
    )


def sync_epoch(parts: Parts, started: float, errors: list[str]) -> tuple[int | None, bool]:
    """The epoch sync renews against: trusted as in Memory.epoch_estimate, a store
    answer of this sync counting as fresh, else probed. A wiped or reset network
    (epochs gone backwards, our blobs lost) is followed first (network_reset.py)."""
    try:
        follow_network_reset(parts, errors)
        epoch = parts.epochs.epoch_estimate(probe=True, fresh_since=started)
        if follow_network_reset(parts, errors):  # the probe's answer told it
            epoch = parts.epochs.epoch_estimate(probe=True, fresh_since=started)
        return epoch
    except WalrusMemError as exc:
        errors.append(f"epoch probe: {type(exc).__name__}: {exc}")
        return parts.epochs.clock.current(), False


def known_namespaces(parts: Parts) -> list[str]:
    """Namespaces of the catalog, plus this configuration's own namespaces (the
    default one, the agents') that only the heads file names yet. A shared heads
    file may list other people's namespaces: those are not ours to sync."""
    names = parts.catalog.namespaces()
    heads_file = parts.log.heads_file()
    if heads_file is not None:
        own = {parts.settings.default_namespace, *(
            agent.namespace or name for name, agent in parts.settings.agents.items())}
        try:
            names += [n for n, _ in heads_file.read() if n in own]
        except LocalStoreError as exc:  # each namespace's pull reports it
            log.warning("%s", exc)
    return list(dict.fromkeys(names))

def publish_pooled(parts: Parts, ns: str) -> tuple[int, list[str]]:
    """Memory.publish_pooled: the outbox pooled into the cheapest quilts and published
    (an import's queued chunks), then the periodic manifest if it is due."""
    started = time.time()
    published = parts.publisher.flush(ns, pool=True)
    maybe_manifest(parts, ns, started)
    return published


def maybe_manifest(parts: Parts, ns: str, since: float) -> None:
    """A periodic manifest after a write, when ``manifest_every`` writes are due and
    nothing holds it back (outage, queued facts, unknown epoch, another publisher)."""
    info = parts.catalog.namespace(ns)
    if info is None or int(info["writes_since_manifest"]) < parts.settings.manifest_every:
        return
    if parts.publisher.breaker_open():
        return
    if parts.catalog.outbox_count(ns) > 0:
        return
    if not parts.epochs.ok_for_manifest(ns, since):
        return
    try:
        with parts.log.turn(ns, wait=False) as ours:
            if ours:  # else another thread or process is publishing one right now
                parts.log.publish_now(ns)
    except (StorageError, RestoreIncomplete, RotationIncomplete) as exc:
        # The write is stored: an interrupted restore or key rotation (or an outage)
        # defers only the manifest, which the next sync reports (and the rotation
        # finishes); raising here failed a good remember.
        log.info("periodic manifest for %r deferred: %s", ns, exc)
