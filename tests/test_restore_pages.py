"""Issue 28 item 2: a restore reads its manifest pages in parallel, and opens each page
once (it was opened and parsed twice: by the read's check, then again), before the
first fact is fetched."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import walrus_mem._log.manifest as mf
from relayer_mock.embedded import EmbeddedRelayer
from tests.test_index_background import NS, open_mem, texts
from walrus_mem._log import namespace_log, pages


def test_manifest_pages_are_read_in_parallel_and_opened_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mf, "PAGE_TARGET", 5)
    monkeypatch.setattr(mf, "PAGE_MAX", 8)
    monkeypatch.setattr(mf, "INLINE_MAX", 3)
    monkeypatch.setattr(mf, "CHANGED_INLINE_MAX", 3)
    relayer = EmbeddedRelayer(tmp_path / "walrus")
    writer = open_mem(tmp_path / "writer", relayer)
    writer.remember_many(texts(80))
    assert not writer.sync().errors
    head = str(writer._parts.log.newest(NS)[0])
    writer.close()

    opened: list[str] = []
    real_open = pages.open_envelope

    def counted(keys, data, **kw):  # type: ignore[no-untyped-def]
        opened.append(kw.get("expected_id", ""))
        return real_open(keys, data, **kw)

    threads: set[str] = set()
    real_read = namespace_log.read_page

    def read(*args, **kw):  # type: ignore[no-untyped-def]
        threads.add(threading.current_thread().name)
        return real_read(*args, **kw)

    monkeypatch.setattr(pages, "open_envelope", counted)
    monkeypatch.setattr(namespace_log, "read_page", read)
    reader = open_mem(tmp_path / "reader", relayer)
    assert reader.restore(NS, head).restored == 80
    assert len(opened) >= 5  # a manifest of several pages
    assert len(opened) == len(set(opened))  # each page opened once
    assert any(name != threading.current_thread().name for name in threads)  # a pool read
    reader.close()
    relayer.close()
