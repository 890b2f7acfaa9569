"""AsyncMemory: the same engine as coroutines (worker threads), usable concurrently."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import AsyncMemory, Memory
from walrus_mem.errors import InvalidInput, MemoryNotFound
from walrus_mem.testing import HashEmbedder

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_async_round_trip(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "d")
    async with AsyncMemory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        rec = await mem.remember("async peanuts allergy", metadata={"via": "async"})
        assert rec.status == "published"
        batch = await mem.remember_many(["async one", "async two"], idempotency_key="t1")
        assert batch.stored == 2
        hits = await mem.recall("peanuts allergy", min_score=0)
        assert hits[0].id == rec.id and hits.candidates >= 1
        assert (await mem.get(rec.id, verify=True)).text == rec.text
        assert len(await mem.list(filters={"via": "async"})) == 1
        updated = await mem.update(rec.id, "async tree nut allergy")
        assert [h.version for h in await mem.history(rec.id)] == [1, 2]
        assert updated.version == 2
        report = await mem.sync()
        assert report.manifests
        stats = await mem.stats()
        assert stats.memories == 3 and stats.manifest_blob_id == report.manifests["default"]
        assert await mem.namespaces() == ["default"]
        assert (await mem.forget(rec.id)).forgotten == [rec.id]
        with pytest.raises(MemoryNotFound):
            await mem.get(rec.id)
        with pytest.raises(InvalidInput):
            await mem.forget_all()
        assert await mem.current_epoch() is not None
        assert await mem.expiring(0) == []
        assert (await mem.extend(namespace="default", epochs=10)).extended
        assert await mem.reindex() == 2
        await mem.compact()
        head = (await mem.stats()).manifest_blob_id
        assert head is not None
        assert (await mem.pull(head)).up_to_date
        assert (await mem.restore("default", head, allow_stale=True)).restored == 0
    assert isinstance(mem.sync_memory, Memory)


async def test_async_calls_run_concurrently_without_blocking_the_loop(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "d")
    mem = AsyncMemory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        async with anyio.create_task_group() as writers:
            for n in range(8):
                writers.start_soon(mem.remember, f"concurrent async fact {n}")
        tg.cancel_scope.cancel()
    assert (await mem.stats()).memories == 8
    assert ticks > 0
    await mem.close()


async def test_async_analyze_extracts_and_stores_facts(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "d")
    async with AsyncMemory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        result = await mem.analyze(
            [
                {"role": "user", "content": "I prefer dark mode in every editor I use."},
                {"role": "assistant", "content": "Noted!"},
            ],
            idempotency_key="turn-1",
        )
        assert result.stored >= 1
        texts = [r.text for r in await mem.list()]
        assert any("dark mode" in t for t in texts)
        before = len(await mem.list())
        again = await mem.analyze("I prefer dark mode in every editor I use.",
                                  idempotency_key="turn-1")
        assert again.replayed  # the earlier result, nothing stored twice
        assert len(await mem.list()) == before


async def test_async_share_accept_and_rotate_key(tmp_path: Path) -> None:
    """Issue 14's key operations exist on AsyncMemory too (they were missing)."""
    settings = make_settings(tmp_path / "d", config_file=None)
    async with AsyncMemory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        rec = await mem.remember("the shared plan is ready", namespace="alice")
        bob = mem.sync_memory.keys_for("bob").verify_key
        grant = await mem.share([rec.id], to=bob, namespace="alice")
        got = await mem.accept(grant.reference, namespace="bob")
        assert [r.text for r in got.records] == ["the shared plan is ready"]
        report = await mem.rotate_key("alice")
        assert report.complete and report.generation == 1
