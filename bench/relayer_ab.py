"""relayer_mock's store and read throughput through its HTTP API, between trees (issue 28).

Each round runs one child process per tree named on the command line (the tree on
PYTHONPATH, so each imports its own relayer_mock), alternating, on a fresh data dir.
A child drives an :class:`~relayer_mock.embedded.EmbeddedRelayer` (walrus_mem's
default store) through httpx, as walrus_mem does, and times each phase:

- ``put_quilt``: ``--quilts`` quilts of ``--patches`` patches (``--size`` random bytes,
  32-hex identifiers, as walrus_mem's facts), ``PUT /v1/quilts``;
- ``put_blob``: ``--blobs`` single blobs of ``--size`` bytes, ``PUT /v1/blobs``;
- ``by_patch_id``: every patch, in random order, ``GET /v1/blobs/by-quilt-patch-id/…``;
- ``by_identifier``: every patch, in random order, ``GET /v1/blobs/by-quilt-id/…/…``;
- ``whole_quilt``: every quilt, ``GET /v1/blobs/{quiltId}``; ``list``: ``GET
  /v1/quilts/{id}/patches``;
- ``get_blob``: every single blob;
- ``reopen_by_patch_id``: a new relayer on the same data dir (a cold cache), every
  patch of one quilt in random order.

Prints one JSON line per child: per phase, microseconds per call (wall and this process's
CPU; the relayer runs in-process), plus the relayer folder's bytes and the load average.
Make a tree of a commit with ``git archive <rev> relayer_mock | tar -x -C <dir>``::

    nice -n 10 python bench/relayer_ab.py /tmp/before /work/main --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def child(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    import httpx

    import relayer_mock
    from relayer_mock.embedded import EmbeddedRelayer

    rng = random.Random(7)
    quilts = [{os.urandom(16).hex(): rng.randbytes(args.size) for _ in range(args.patches)}
              for _ in range(args.quilts)]
    singles = [rng.randbytes(args.size) for _ in range(args.blobs)]
    timings: dict[str, tuple[float, float, int]] = {}

    def timed(name: str, calls: list[Any], run: Any) -> list[Any]:
        wall, cpu = time.perf_counter(), time.process_time()
        out = [run(call) for call in calls]
        timings[name] = (time.perf_counter() - wall, time.process_time() - cpu, len(calls))
        return out

    def ok(response: httpx.Response) -> httpx.Response:
        if response.status_code >= 300:
            raise SystemExit(f"{response.request.url}: {response.status_code} {response.text}")
        return response

    relayer = EmbeddedRelayer(data_dir, fsync=args.fsync)
    client = httpx.Client(transport=relayer.transport, base_url=relayer.base_url)
    stored = timed("put_quilt", quilts, lambda q: ok(client.put(
        "/v1/quilts?epochs=5", files={k: (k, v) for k, v in q.items()})).json())
    blob_ids = timed("put_blob", singles, lambda b: ok(client.put(
        "/v1/blobs?epochs=5", content=b)).json()["newlyCreated"]["blobObject"]["blobId"])
    patches = [(entry["quiltPatchId"], entry["identifier"], q[entry["identifier"]])
               for result, q in zip(stored, quilts, strict=True)
               for entry in result["storedQuiltBlobs"]]
    rng.shuffle(patches)

    def by_id(patch: tuple[str, str, bytes]) -> None:
        got = ok(client.get(f"/v1/blobs/by-quilt-patch-id/{patch[0]}")).content
        assert got == patch[2]

    def by_identifier(patch: tuple[str, str, bytes]) -> None:
        got = ok(client.get(f"/v1/blobs/by-quilt-id/{patch[0][:43]}/{patch[1]}")).content
        assert got == patch[2]

    timed("by_patch_id", patches, by_id)
    timed("by_identifier", patches, by_identifier)
    quilt_ids = [r["blobStoreResult"]["newlyCreated"]["blobObject"]["blobId"] for r in stored]
    wholes = timed("whole_quilt", quilt_ids,
                   lambda q: ok(client.get(f"/v1/blobs/{q}")).content)
    timed("list", quilt_ids, lambda q: ok(client.get(f"/v1/quilts/{q}/patches")).json())
    timed("get_blob", blob_ids, lambda b: ok(client.get(f"/v1/blobs/{b}")).content)
    client.close()
    relayer.close()
    relayer = EmbeddedRelayer(data_dir, fsync=args.fsync)
    client = httpx.Client(transport=relayer.transport, base_url=relayer.base_url)
    first = [p for p in patches if p[0][:43] == quilt_ids[0]]
    timed("reopen_by_patch_id", first, by_id)
    client.close()
    relayer.close()
    return {
        "tree": str(Path(relayer_mock.__file__).parent.parent),
        "us_per_call": {k: round(w / n * 1e6) for k, (w, c, n) in timings.items()},
        "cpu_us_per_call": {k: round(c / n * 1e6) for k, (w, c, n) in timings.items()},
        "whole_quilt_bytes": sum(len(w) for w in wholes),
        "relayer_bytes": _folder_bytes(data_dir),
        "load": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="*", default=[str(ROOT)])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quilts", type=int, default=6)
    parser.add_argument("--patches", type=int, default=300)
    parser.add_argument("--size", type=int, default=1410)
    parser.add_argument("--blobs", type=int, default=300)
    parser.add_argument("--fsync", action="store_true", help="fsync as the embedded default")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args, Path(args.child))))
        return 0
    passed = [a for a in (argv if argv is not None else sys.argv[1:]) if a not in args.trees]
    for _ in range(args.rounds):
        for tree in args.trees:
            with tempfile.TemporaryDirectory(prefix="relayer-ab-") as tmp:
                env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                out = subprocess.run([sys.executable, __file__, *passed, "--child",
                                      str(Path(tmp) / "relayer")], env=env, check=True,
                                     stdout=subprocess.PIPE, text=True)
                print(out.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
