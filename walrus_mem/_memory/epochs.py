"""What a Memory knows of the current Walrus epoch: the mock's exact clock, else the
epoch clock learned from store answers, else a probe store. A manifest published
outside ``sync`` waits for a known epoch: it could list an expired blob otherwise."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from .._walrus.expiry import NETWORK_EPOCH_SECONDS, EpochClock, network_of
from .._walrus.network_info import run_info_command
from .._walrus.publish_check import require_read_back, verify_published
from .._walrus.retry import call_deadline
from ..errors import WalrusMemError

if TYPE_CHECKING:
    from .._catalog.catalog import Catalog
    from ..config import Settings
    from .publisher import Publisher

__all__ = ["Epochs"]

log = logging.getLogger(__name__)


class Epochs:
    """The current epoch, as well as one Memory can tell it."""

    def __init__(self, settings: Settings, catalog: Catalog, publisher: Publisher) -> None:
        self.settings = settings
        self.catalog = catalog
        self.publisher = publisher

    @property
    def clock(self) -> EpochClock:
        """The epoch clock learned from store responses (see :mod:`walrus_mem._walrus.expiry`);
        its epoch length is ``epoch_seconds``, else the network's the endpoints name."""
        s = self.settings
        network = network_of([s.publisher_url, *s.publisher_urls, *s.aggregator_urls])
        return EpochClock(self.catalog, epoch_seconds=s.epoch_seconds,
                          network_seconds=NETWORK_EPOCH_SECONDS.get(network or ""))

    def current_epoch(self) -> int | None:
        """The mock's clock if it has one, else the epoch clock's lagging estimate."""
        backend_epoch = self.publisher.backend().current_epoch()
        if backend_epoch is not None:
            self.catalog.note_epoch(backend_epoch, trusted=True)
            return self.catalog.current_epoch()
        return self.clock.current()

    def probe_epoch(self) -> int | None:
        """Store 32 random bytes for one epoch and note the epoch the answer names; with
        ``network_info_command`` its epoch instead (no store; network_info.py), the probe
        store only when the command fails."""
        if self.settings.network_info_command:
            info = run_info_command(self.settings.network_info_command)
            if info is not None:
                self.catalog.note_epoch(info.current_epoch)
                return info.current_epoch
        policy = self.settings.verify_publish
        client = self.publisher.client
        if policy != "none":
            require_read_back(client, f"verify_publish = {policy!r}")
        probe = os.urandom(32)
        s = self.settings  # the store and its read-back, budgeted apart (as fact batches)
        with call_deadline(s.publish_deadline + s.read_back_deadline):
            stored = client.store_blob(probe, epochs=1, deadline=s.publish_deadline)
            # the epoch of an answer that did not store anything is not the network's
            verify_published(client, policy, stored, {"probe": probe},
                             deadline=s.read_back_deadline)
        if stored.registered_epoch is None:
            return None
        self.catalog.note_epoch(stored.registered_epoch)
        return int(stored.registered_epoch)

    def epoch_estimate(
        self, *, probe: bool = False, fresh_since: float | None = None
    ) -> tuple[int | None, bool]:
        """(current epoch, known), as :meth:`walrus_mem.Memory.epoch_estimate` says."""
        exact = self.publisher.backend().current_epoch()
        if exact is not None:
            self.catalog.note_epoch(exact, trusted=True)
            return self.catalog.current_epoch(), True
        reading = self.clock.reading()
        if reading.known or (fresh_since is not None and reading.last_seen is not None
                             and reading.last_seen >= fresh_since):
            return reading.current, True
        if probe:
            epoch = self.probe_epoch()
            if epoch is not None:
                return max(epoch, reading.current or epoch), True
        return reading.current, False

    def ok_for_manifest(self, ns: str, since: float) -> bool:
        """A manifest published outside ``sync`` (periodic, after forget or extend) only
        when the epoch is known or a store answer since ``since`` told it: else it
        could list an expired blob, and the next ``sync`` (which probes) publishes it."""
        if not self.catalog.has_end_epochs(ns):
            return True
        try:
            known = self.epoch_estimate(fresh_since=since)[1]
        except WalrusMemError:
            known = False
        if not known:
            log.info("manifest of %r deferred to the next sync: the current epoch is unknown",
                     ns)
        return known
