"""Crash-test worker: ingest facts into a Memory and optionally SIGKILL itself mid-way.

    python -m tests.stress.ingest_worker --data-dir D --facts F.json [--publisher URL]
        [--crash-phase PHASE --crash-at N] [--count-phases]

Ingest order (the same on every run, so a re-run is "the same ingest"): the first
``--single`` facts one by one with ``remember``, the rest with ``remember_many``
in batches of ``--batch``; ``sync()`` after every ``--sync-every`` operations
(publishes the outbox and manifests, saves the index). After each call returns,
one line ``ID <fact index> <memory id>`` per fact is printed and flushed: those
memories were acknowledged to the caller and must survive any later crash. A
``recall`` follows every call (as an agent would), which loads the index so
that syncs save it.

``--crash-phase`` arms a hook that sends SIGKILL to this process at the N-th
call of that phase (a real SIGKILL at that exact point, not an exception):

=============  ==========================================================
``embed``      inside the embedder, before the vectors exist
``seal``       just before an envelope is sealed
``commit``     inside a catalog write transaction, before its COMMIT
``committed``  right after a catalog COMMIT returned
``publish``    just before a store request (blob or quilt) is sent
``published``  after the publisher stored the bytes, before the catalog knows
``index_tmp``  index saved to its temp file, before it replaces the old file
``index_save`` index file replaced, its metadata file not yet (a torn pair)
=============  ==========================================================

``--count-phases`` runs without crashing and prints ``COUNTS {json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PHASES = ("embed", "seal", "commit", "committed", "publish", "published", "index_tmp",
          "index_save")


class CrashHooks:
    """Counts phase calls and kills the process at the armed one."""

    def __init__(self, phase: str | None, at: int) -> None:
        self.phase = phase
        self.at = at
        self.counts: Counter[str] = Counter()

    def hit(self, phase: str) -> None:
        self.counts[phase] += 1
        if phase == self.phase and self.counts[phase] == self.at:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def install(self) -> None:
        import walrus_mem._memory.writer as writer_mod
        import walrus_mem._recall.index as index_mod
        from walrus_mem._catalog.catalog import Catalog
        from walrus_mem.testing import HashEmbedder
        from walrus_mem.walrus import WalrusClient

        hooks = self

        embed = HashEmbedder.embed

        def embed_hook(self: HashEmbedder, texts: list[str]) -> Any:
            hooks.hit("embed")
            return embed(self, texts)

        HashEmbedder.embed = embed_hook  # type: ignore[method-assign]

        seal = writer_mod.seal_fact  # the write path seals facts there (records.seal_fact)

        def seal_hook(*args: Any, **kwargs: Any) -> bytes:
            hooks.hit("seal")
            return seal(*args, **kwargs)

        writer_mod.seal_fact = seal_hook

        write = Catalog.write

        @contextmanager
        def write_hook(self: Catalog) -> Iterator[Any]:
            outer = self._depth == 0
            with write(self) as conn:
                yield conn
                if outer:
                    hooks.hit("commit")  # still inside BEGIN IMMEDIATE
            if outer:
                hooks.hit("committed")

        Catalog.write = write_hook  # type: ignore[method-assign]

        def around(method: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                hooks.hit("publish")
                result = method(*args, **kwargs)
                hooks.hit("published")
                return result
            return wrapper

        WalrusClient.store_blob = around(WalrusClient.store_blob)  # type: ignore[method-assign]
        WalrusClient.store_quilt = around(WalrusClient.store_quilt)  # type: ignore[method-assign]

        real_replace = os.replace

        class _Os:
            """walrus_mem._recall.index's view of ``os``: replace() with the index-save hooks."""

            def __getattr__(self, name: str) -> Any:
                return getattr(os, name)

            @staticmethod
            def replace(src: Any, dst: Any) -> None:
                is_index = str(dst).endswith(".usearch")
                if is_index:
                    hooks.hit("index_tmp")
                real_replace(src, dst)
                if is_index:
                    hooks.hit("index_save")

        index_mod.os = _Os()  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--facts", required=True, type=Path)
    parser.add_argument("--namespace", default="crash")
    parser.add_argument("--publisher")
    parser.add_argument("--single", type=int, default=30)
    parser.add_argument("--batch", type=int, default=15)
    parser.add_argument("--sync-every", type=int, default=10)
    parser.add_argument("--crash-phase", choices=PHASES)
    parser.add_argument("--crash-at", type=int, default=1)
    parser.add_argument("--count-phases", action="store_true")
    args = parser.parse_args(argv)

    hooks = CrashHooks(args.crash_phase, args.crash_at)
    hooks.install()
    from tests.stress.helpers import open_memory

    facts: list[str] = json.loads(args.facts.read_text())
    overrides: dict[str, Any] = {"manifest_every": 25}
    if args.publisher:
        overrides.update(publisher_url=args.publisher, aggregator_urls=[args.publisher])
    mem = open_memory(args.data_dir, **overrides)
    print("READY", flush=True)
    ops = 0
    ns = args.namespace
    for i in range(min(args.single, len(facts))):
        rec = mem.remember(facts[i], namespace=ns)
        print(f"ID {i} {rec.id}", flush=True)
        mem.recall(facts[i], namespace=ns, k=3)  # loads the index, so syncs save it
        ops += 1
        if ops % args.sync_every == 0:
            mem.sync()
    for start in range(args.single, len(facts), args.batch):
        chunk = facts[start : start + args.batch]
        result = mem.remember_many(chunk, namespace=ns)
        if result.failed:
            print(f"FAILED {result.failed}", flush=True)
            return 2
        for offset, rec in enumerate(result.records):
            print(f"ID {start + offset} {rec.id}", flush=True)
        mem.recall(chunk[-1], namespace=ns, k=3)
        ops += 1
        if ops % args.sync_every == 0:
            mem.sync()
    report = mem.sync()
    mem.close()
    print(f"SYNC {report.still_queued} {len(report.errors)}", flush=True)
    if args.count_phases:
        print("COUNTS " + json.dumps(dict(hooks.counts)), flush=True)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
