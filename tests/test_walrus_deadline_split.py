"""Issue 25 leftover: the probe store, a share's grant blob and a manifest's root budget
their store and their read-back apart (``publish_deadline`` / ``read_back_deadline``),
as fact batches do. Against relayer_mock over loopback HTTP whose stores take 0.3 s and
whose fresh blobs answer 404 for 0.5 s more (a CDN-fronted aggregator's cached 404):
each fits its own budget, not one ``publish_deadline`` for both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import machine

STORE_MS = "300"
NOT_FOUND_AFTER_STORE = 0.5


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False, store_latency=STORE_MS,
                       not_found_after_store=NOT_FOUND_AFTER_STORE) as srv:
        yield srv


def test_probe_epoch_reads_back_under_its_own_budget(tmp_path: Path,
                                                     slow: RelayerServer) -> None:
    """Before: the probe's store and read-back shared publish_deadline (0.6 s): 0.3 s of
    store left 0.3 s for 0.5 s of 404s, and the probe failed."""
    with machine(tmp_path / "a", slow.url, publish_deadline=0.6, read_back_deadline=3.0) as a:
        assert a.probe_epoch() == 1


def test_share_reads_back_under_its_own_budget(tmp_path: Path, slow: RelayerServer) -> None:
    """Before: the grant blob's store and read-back shared publish_deadline."""
    with machine(tmp_path / "a", slow.url, publish_deadline=0.6, read_back_deadline=3.0) as a:
        rec = a.remember("a fact to share")
        grant = a.share([rec.id], to=a.keys_for("default").verify_key.hex())
        assert grant.count == 1


def test_a_manifest_root_reads_back_under_read_back_deadline(tmp_path: Path,
                                                             slow: RelayerServer) -> None:
    """Before: the root's read-back ran under read_deadline (0.3 s here), shorter than the
    aggregator's 404 window: no manifest was recorded."""
    with machine(tmp_path / "a", slow.url, publish_deadline=0.6, read_back_deadline=3.0,
                 read_deadline=0.3, verify_publish="none", epoch_seconds=3600.0) as a:
        a.remember("a fact")
        report = a.sync()
        assert report.errors == [] and "default" in report.manifests, report
