"""Concurrency worker: one of several processes sharing one data dir (and relayer dir).

    python -m tests.stress.concurrent_worker write  --data-dir D --facts F.json --worker I
        --workers N --go FILE
    python -m tests.stress.concurrent_worker read   --data-dir D --facts F.json --go FILE
        --stop FILE
    python -m tests.stress.concurrent_worker verify --data-dir D --facts F.json

``write``: waits for the ``--go`` file, then remembers its share of the facts
(``facts[I::N]``) one ``remember`` at a time, printing ``ID <index> <id>`` after
each, and recalls its own latest fact every 5 calls (it must be found).
``read``: recalls random facts until the ``--stop`` file exists; prints
``READS <n> FOUND <m>``. ``slowsync``: remembers ``facts[I]``, then syncs with
every store held 1.5 s (printing ``HELD`` first). ``verify``: a fresh process recalls every fact and
prints ``MISSING <n>``. Every process uses the embedded relayer (its own
in-process relayer_mock on ``D/relayer``), the hardest sharing case. Any
exception ends the process with a traceback and a non-zero exit.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from tests.stress.helpers import open_memory
from walrus_mem.memory import Memory

NS = "shared"


def _wait_for(path: Path, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.005)


def _slow_sync(mem: Memory, text: str) -> None:
    """Remember ``text``, then sync with every store held 1.5 s (prints HELD first)."""
    rec = mem.remember(text, namespace=NS)
    print(f"ID -1 {rec.id}", flush=True)
    client = mem.walrus
    store = client.store_blob

    def slow_store(data: bytes, **kwargs: Any) -> Any:
        print("HELD", flush=True)
        time.sleep(1.5)
        return store(data, **kwargs)

    client.store_blob = slow_store  # type: ignore[method-assign]
    mem.sync()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["write", "read", "verify", "slowsync"])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--facts", required=True, type=Path)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--go", type=Path)
    parser.add_argument("--stop", type=Path)
    args = parser.parse_args(argv)
    facts: list[str] = json.loads(args.facts.read_text())
    # Frequent periodic manifests: several processes publish them concurrently.
    mem = open_memory(args.data_dir, manifest_every=25)
    try:
        print("READY", flush=True)
        if args.mode == "write":
            assert args.go is not None
            _wait_for(args.go)
            mine = list(range(args.worker, len(facts), args.workers))
            for n, index in enumerate(mine, 1):
                rec = mem.remember(facts[index], namespace=NS)
                print(f"ID {index} {rec.id}", flush=True)
                if n % 5 == 0:
                    hits = mem.recall(facts[index], namespace=NS, k=5)
                    if rec.id not in [h.id for h in hits]:
                        raise AssertionError(f"own fact {index} not recalled right after remember")
        elif args.mode == "read":
            assert args.go is not None and args.stop is not None
            _wait_for(args.go)
            rng = random.Random(args.worker)
            reads = found = 0
            while not args.stop.exists():
                text = rng.choice(facts)
                hits = mem.recall(text, namespace=NS, k=5)
                reads += 1
                found += text in [h.text for h in hits]
            print(f"READS {reads} FOUND {found}", flush=True)
        elif args.mode == "slowsync":
            _slow_sync(mem, facts[args.worker])
        else:
            missing = [i for i, text in enumerate(facts)
                       if text not in [h.text for h in mem.recall(text, namespace=NS, k=5)]]
            print(f"MISSING {len(missing)} {missing[:20]}", flush=True)
            sync = mem.sync()
            print(f"SYNC {sync.published} {sync.still_queued} {len(sync.errors)}", flush=True)
    finally:
        mem.close()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
