"""Every public call against slow-drip servers: seconds past its deadline (issue 11).

Usage: ``python bench/hostile_calls.py [--deadline 1.0] [--json]``

Each call runs against loopback servers that drip one body byte every 0.1 s
(``tests/helpers_hostile.py``) with ``publish_deadline = read_deadline = D``:

* ``drip``: publisher and aggregator both drip;
* ``readback``: an honest publisher (relayer_mock) and a dripping aggregator, so every
  store succeeds and its read-back is what hangs.

Printed per call: wall seconds, seconds over D, and the outcome (returned, or the typed
error). The bound the issue asks for is D + 2 s. Speed figures go here, not in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relayer_mock.server import RelayerServer
from tests.helpers_hostile import HostileServer
from tests.helpers_memory import MASTER_HEX, make_settings
from tests.helpers_walrus import BLOB_ID, PATCH_A, QUILT_ID
from walrus_mem._memory.async_memory import AsyncMemory
from walrus_mem.errors import WalrusMemError
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import AsyncWalrusClient, WalrusClient

Row = dict[str, Any]
MODE = "drip_body"  # --mode: drip_headers drips the status line and headers instead


def _timed(name: str, call: Callable[[], object], deadline: float) -> Row:
    started = time.monotonic()
    try:
        call()
        outcome = "returned"
    except WalrusMemError as exc:
        outcome = f"{type(exc).__name__}({getattr(exc, 'reason', None) or ''})"
    except Exception as exc:  # untyped: a finding
        outcome = f"UNTYPED {type(exc).__name__}: {exc}"
    elapsed = time.monotonic() - started
    return {"call": name, "s": round(elapsed, 3), "over": round(elapsed - deadline, 3),
            "outcome": outcome}


async def _atimed(name: str, make: Callable[[], Awaitable[object]], deadline: float) -> Row:
    started = time.monotonic()
    try:
        await make()
        outcome = "returned"
    except WalrusMemError as exc:
        outcome = f"{type(exc).__name__}({getattr(exc, 'reason', None) or ''})"
    elapsed = time.monotonic() - started
    return {"call": name, "s": round(elapsed, 3), "over": round(elapsed - deadline, 3),
            "outcome": outcome}


def _client_calls(d: float) -> list[tuple[str, Callable[[Any], Any]]]:
    return [
        ("store_blob", lambda c: c.store_blob(b"fact", deadline=d)),
        ("store_quilt", lambda c: c.store_quilt({"a": b"1", "b": b"2"}, deadline=d)),
        ("read_blob", lambda c: c.read_blob(BLOB_ID, deadline=d)),
        ("read_byte_range", lambda c: c.read_byte_range(BLOB_ID, 0, 4, deadline=d)),
        ("read_quilt_patch", lambda c: c.read_quilt_patch(PATCH_A, deadline=d)),
        ("read_quilt_patch_by_identifier",
         lambda c: c.read_quilt_patch_by_identifier(QUILT_ID, "a", deadline=d)),
        ("list_quilt_patches", lambda c: c.list_quilt_patches(QUILT_ID, deadline=d)),
        ("read_back", lambda c: c.read_back(b"fact", blob_id=BLOB_ID, deadline=d)),
    ]


def _walrus_rows(d: float) -> list[Row]:
    rows: list[Row] = []
    with HostileServer(MODE, interval=0.1) as drip:
        with WalrusClient(drip.url, [drip.url], timeout=5.0) as client:
            for name, call in _client_calls(d):
                rows.append(_timed(f"WalrusClient.{name}", lambda c=call: c(client), d))  # type: ignore[misc]
            rows.append(_timed("WalrusClient.status (5 s/endpoint)", client.status, 5.0))

        async def run_async() -> list[Row]:
            out: list[Row] = []
            async with AsyncWalrusClient(drip.url, [drip.url], timeout=5.0) as ac:
                for name, call in _client_calls(d):
                    out.append(await _atimed(f"AsyncWalrusClient.{name}",
                                             lambda c=call: c(ac), d))  # type: ignore[misc]
            return out

        rows += asyncio.run(run_async())
    return rows


def _memory_rows(root: Path, d: float, scenario: str) -> list[Row]:
    embedder = HashEmbedder(dim=64)
    rows: list[Row] = []
    with RelayerServer(root / "walrus", fsync=False) as honest, \
            HostileServer(MODE, interval=0.1) as drip:
        good = make_settings(root / "good", publisher_url=honest.url,
                             aggregator_urls=[honest.url])
        with Memory(good, embedder=embedder, master_key=MASTER_HEX) as memory:
            first = memory.remember("the user likes tea")
            memory.remember_many([f"fact {i}" for i in range(3)])
            head = memory.sync().manifests["default"]
        other = make_settings(root / "other", publisher_url=honest.url,
                              aggregator_urls=[honest.url])
        with Memory(other, embedder=embedder, master_key=MASTER_HEX) as memory:
            memory.restore("default", head)
            memory.remember("written on another machine")
            head2 = memory.sync().manifests["default"]  # a head "good" has not merged
        publisher = drip.url if scenario == "drip" else honest.url
        bad = make_settings(root / "good", publisher_url=publisher, aggregator_urls=[drip.url],
                            publish_deadline=d, read_deadline=d)
        with Memory(bad, embedder=embedder, master_key=MASTER_HEX) as memory:
            rows.append(_timed("Memory.remember", lambda: memory.remember("coffee too"), d))
            rows.append(_timed("Memory.remember_many",
                               lambda: memory.remember_many(["a", "b", "c"]), d))
            for i in range(3):  # more queued batches (the breaker keeps these local)
                memory.remember(f"queued fact {i}")
            rows.append(_timed("Memory.sync (queued batches)", memory.sync, d))
            rows.append(_timed("Memory.get(verify=True)",
                               lambda: memory.get(first.id, verify=True), d))
            rows.append(_timed("Memory.extend(all)", lambda: memory.extend(None), d))
            rows.append(_timed("Memory.probe_epoch", memory.probe_epoch, d))
            rows.append(_timed("Memory.pull(head)", lambda: memory.pull([head2]), d))
            friend = memory.keys_for("friend").verify_key.hex()
            rows.append(_timed("Memory.share", lambda: memory.share([first.id], to=friend), d))
        shutil.rmtree(root / "fresh", ignore_errors=True)
        fresh = make_settings(root / "fresh", publisher_url=publisher,
                              aggregator_urls=[drip.url], publish_deadline=d, read_deadline=d)
        with Memory(fresh, embedder=embedder, master_key=MASTER_HEX) as memory:
            rows.append(_timed("Memory.restore(head) fresh dir",
                               lambda: memory.restore("default", head), d))

        async def run_async() -> list[Row]:
            out: list[Row] = []
            async with AsyncMemory(bad, embedder=embedder, master_key=MASTER_HEX) as am:
                calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
                    ("remember", lambda: am.remember("async fact")),
                    ("sync", lambda: am.sync()),
                    ("get(verify=True)", lambda: am.get(first.id, verify=True)),
                    ("extend(all)", lambda: am.extend(None)),
                    ("pull(head)", lambda: am.pull([head2])),
                ]
                for name, make in calls:
                    out.append(await _atimed(f"AsyncMemory.{name}", make, d))
            return out

        rows += asyncio.run(run_async())
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--mode", choices=["drip_body", "drip_headers"], default="drip_body")
    args = parser.parse_args()
    global MODE
    MODE = args.mode
    d = args.deadline
    report: dict[str, list[Row]] = {"walrus_client_drip": _walrus_rows(d)}
    for scenario in ("drip", "readback"):
        with tempfile.TemporaryDirectory() as tmp:
            report[f"memory_{scenario}"] = _memory_rows(Path(tmp), d, scenario)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    worst = 0.0
    for section, rows in report.items():
        print(f"\n{section} ({MODE}, deadline {d:g} s; bound deadline + 2 s)")
        for row in rows:
            worst = max(worst, row["over"])
            flag = "  OVER" if row["over"] > 2.0 else ""
            print(f"  {row['call']:<38} {row['s']:7.3f} s  {row['over']:+7.3f}  "
                  f"{row['outcome']}{flag}")
    print(f"\nworst: {worst:+.3f} s past the deadline")


if __name__ == "__main__":
    main()
