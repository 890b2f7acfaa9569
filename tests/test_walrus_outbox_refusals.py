"""Issue 25 leftover of item 6: a blob the network marked invalid is refused for good
(outbox_poison.py): its quilt is split at once, each fact tried alone and, refused
again, on its way to poisoned, instead of retried as a transient failure forever.
Against relayer_mock over HTTP injecting markedInvalid on every store.
"""

from __future__ import annotations

from pathlib import Path

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
