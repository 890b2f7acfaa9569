"""Issue 25 leftover of item 6: a blob the network marked invalid is refused for good
(outbox_poison.py): its quilt is split at once, each fact tried alone and, refused
again, on its way to poisoned, instead of retried as a transient failure forever.
Against relayer_mock over HTTP injecting markedInvalid on every store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from relayer_mock import FaultConfig
from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem._catalog.outbox_poison import REFUSED
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder


def test_marked_invalid_is_refused_for_good(tmp_path: Path) -> None:
    faults = FaultConfig.model_validate({"probabilities": {"marked_invalid": 1.0},
                                         "scope": "writes", "seed": 1})
    with RelayerServer(tmp_path / "walrus", fsync=False, faults=faults) as server:
        settings = make_settings(tmp_path / "m", publisher_url=server.url,
                                 aggregator_urls=[server.url], publish_deadline=5.0)
        with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as memory:
            result = memory.remember_many(["Ana lives in Lisbon", "Ben plays the cello"])
            assert result.queued == 2
            # the quilt was split at once (it was a transient failure, kept whole, before)
            assert len(memory._parts.catalog.outbox_batches("default")) == 2
            memory.sync()  # each fact tried alone: refused again, for good
            batches = memory._parts.catalog.outbox_batches("default")
    assert len(batches) == 2
    assert all(str(b["last_error"]).startswith(REFUSED) for b in batches)



def test_manifest_pages_are_stored_under_the_request_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25 item 2 leftover: a manifest's pages were batched up to 96 MiB, a 413 on a
    capped publisher: no manifest of a large namespace. Small pages here (manifest.py's
    sizes lowered: pages from 100 changed entries, about 50 entries each, at most 200),
    so 1,000 facts make about 0.4 MB of pages under a 256 KiB cap."""
    from walrus_mem._log import manifest

    monkeypatch.setattr(manifest, "CHANGED_INLINE_MAX", 100)
    monkeypatch.setattr(manifest, "PAGE_TARGET", 50)
    monkeypatch.setattr(manifest, "PAGE_MAX", 200)
    cap = 256 * 1024
    with RelayerServer(tmp_path / "walrus", fsync=False, max_request_bytes=cap) as server:
        settings = make_settings(tmp_path / "m", publisher_url=server.url,
                                 aggregator_urls=[server.url], publish_writes="sync",
                                 publisher_max_request_bytes=cap, verify_publish="none")
        with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as memory:
            memory.remember_many([f"fact {i}: item {i * 3} sits on shelf {i % 40}"
                                  for i in range(1000)])
            report = memory.sync()
    assert report.errors == [] and report.manifests
