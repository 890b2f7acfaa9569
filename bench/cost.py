"""Storage cost per 1,000 facts, in Walrus storage units, next to the minimum for the same
bytes (issue 25 item 1).

Usage::

    python bench/cost.py                # quick size (CI-like): 2,000 / 300 / 0.5 MB
    python bench/cost.py --full         # 10,000 remember_many, 10,000 remember, 5 MB chat
    python bench/cost.py --profile mainnet --epochs 26

Three ways of writing, each into a fresh data dir, over HTTP to relayer_mock with
``--profile testnet`` (10 MiB request cap, real QuiltV1 sizes and costs; its store
latency scaled by ``--time-scale``, default 0.01, since units do not depend on time):

* ``remember_many``: N facts (bench/ingest.py's ``make_texts``) in one call;
* ``remember + sync``: N single ``remember`` calls, ``sync`` every ``--sync-every``;
* ``chat import``: a chat history of ``--chat-mb`` MB (LoCoMo turns from
  ../shared/data/locomo-dev.json, one line per turn, repeated with a tag until the size
  is reached), imported as ``walrus-mem import`` does (remember_many of 666 queued,
  published pooled every ``POOLED_FACTS`` and at the end), then sync; and ``chat, 666 at
  once``, as the import did before (each remember_many of 666 publishing at once).

The last two run with ``publish_writes = "now"`` (the default: each call publishes at
once) and ``"sync"`` (writes wait for sync, which pools the outbox into the cheapest
quilts); ``--modes`` picks.

Units come from ``Memory.stats()`` (the catalog's ledger of store answers: storage units
of the encoded size x epochs). The minimum is
:func:`walrus_mem._walrus.cost.minimum_units` of the facts' sealed bytes: as few blobs as
the 10 MiB cap and 666 patches per quilt allow, the bytes split evenly, no quilt index
or padding: a floor no client can beat. ``ratio`` = fact units / minimum. Log units
(manifests and pages) are shown apart: they depend on how often a manifest is published,
not on how facts are packed.

Prints a table and writes ``.bench-results/cost-<size>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ingest import make_texts  # noqa: E402
from relayer_mock.server import RelayerServer  # noqa: E402
from walrus_mem._cli.cmd_import_export import POOLED_FACTS  # noqa: E402
from walrus_mem._walrus.cost import minimum_units  # noqa: E402
from walrus_mem.config import Settings  # noqa: E402
from walrus_mem.memory import Memory  # noqa: E402
from walrus_mem.testing import HashEmbedder  # noqa: E402

MASTER = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo-dev.json"  # --chat-source overrides


def chat_lines(megabytes: float, source: Path = LOCOMO) -> list[str]:
    """One line per chat turn, ``Speaker: text``, until ``megabytes`` of UTF-8."""
    turns: list[str] = []
    for sample in json.loads(source.read_text()):
        conv = sample["conversation"]
        for key in sorted(k for k in conv if k.startswith("session_") and
                          not k.endswith("date_time")):
            turns += [f"{t['speaker']}: {t['text']}" for t in conv[key]
                      if isinstance(t, dict) and t.get("text")]
    out: list[str] = []
    size, limit, rep = 0, int(megabytes * 1_000_000), 0
    while size < limit:
        for turn in turns:
            line = f"{turn} [#{rep}]" if rep else turn  # a repeated turn is a new fact
            out.append(line)
            size += len(line.encode()) + 1
            if size >= limit:
                break
        rep += 1
    return out


def run(scenario: str, texts: list[str], server: RelayerServer, args: argparse.Namespace,
        tmp: Path, publish_writes: str = "now") -> dict[str, Any]:
    settings = Settings(data_dir=tmp / f"{scenario}-{publish_writes}".replace(" ", "_"),
                        use_keyring=False, publisher_url=server.url,
                        aggregator_urls=[server.url], publish_deadline=120.0,
                        epochs=args.epochs, verify_publish="sample",
                        publish_writes=publish_writes)
    started = time.perf_counter()
    embedder = HashEmbedder(args.dim)
    if args.no_vector:  # an embedder naming no weights: facts sealed without their vector
        embedder.weights_digest = None  # type: ignore[assignment]
    with Memory(settings, embedder=embedder, master_key=MASTER) as memory:
        if scenario == "remember_many":
            memory.remember_many(texts)
        elif scenario == "remember + sync":
            for i, text in enumerate(texts, start=1):
                memory.remember(text)
                if i % args.sync_every == 0:
                    memory.sync()
        elif scenario == "chat import":  # as walrus-mem import does: queued, then pooled
            for start in range(0, len(texts), 666):
                memory.remember_many(texts[start:start + 666], publish=False)
                if (start + 666) % POOLED_FACTS < 666 or start + 666 >= len(texts):
                    memory.publish_pooled()
        else:  # "chat, 666 at once": each remember_many publishes (the import before)
            for start in range(0, len(texts), 666):
                memory.remember_many(texts[start:start + 666])
        memory.sync()
        stats = memory.stats()
        sealed = [len(bytes(r[0])) for r in memory._parts.catalog.query(
            "SELECT sealed FROM memories WHERE sealed IS NOT NULL")]
        per_store = [int(r[0]) for r in memory._parts.catalog.query(
            "SELECT units FROM store_costs WHERE purpose = 'facts'")]
    floor = minimum_units(sealed, args.epochs)
    return {
        "scenario": scenario, "publish_writes": publish_writes,
        "facts": stats.facts_stored, "sealed_bytes": sum(sealed),
        "fact_units": stats.fact_units, "log_units": stats.log_units,
        "stores": stats.stores, "fact_stores": len(per_store),
        "units_per_store_median": statistics.median(per_store) if per_store else 0,
        "units_per_1000": round(stats.fact_units * 1000 / max(stats.facts_stored, 1), 1),
        "total_per_1000": stats.units_per_1000_facts,
        "minimum": floor, "minimum_per_1000": round(floor * 1000 / max(len(sealed), 1), 1),
        "ratio": round(stats.fact_units / floor, 3) if floor else None,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="10k / 10k / 5 MB")
    parser.add_argument("--n", type=int, default=None, help="facts of remember_many")
    parser.add_argument("--singles", type=int, default=None, help="single remember calls")
    parser.add_argument("--chat-mb", type=float, default=None)
    parser.add_argument("--sync-every", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--profile", choices=["testnet", "mainnet"], default="testnet")
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--only", default=None, help="comma list: many,singles,chat")
    parser.add_argument("--modes", default="now,sync",
                        help="publish_writes settings the singles and the import run with")
    parser.add_argument("--chat-source", type=Path, default=LOCOMO,
                        help="LoCoMo JSON whose turns make the chat history")
    parser.add_argument("--dim", type=int, default=64,
                        help="vector dimension (384: MiniLM's; a fact carries its vector)")
    parser.add_argument("--no-vector", action="store_true",
                        help="seal facts without their vector (as before issue 28)")
    args = parser.parse_args(argv)
    n = args.n or (10_000 if args.full else 2_000)
    singles = args.singles or (10_000 if args.full else 300)
    chat_mb = args.chat_mb or (5.0 if args.full else 0.5)
    only = set((args.only or "many,singles,chat").split(","))
    rows = []
    with tempfile.TemporaryDirectory(prefix="walrus-mem-cost-") as tmp, \
            RelayerServer(Path(tmp) / "walrus", fsync=False, profile=args.profile,
                          time_scale=args.time_scale) as server:
        if "many" in only:
            rows.append(run("remember_many", make_texts(n, seed=3), server, args, Path(tmp)))
        for mode in args.modes.split(","):  # publish_writes: now (default), sync (pooled)
            if "singles" in only:
                rows.append(run("remember + sync", make_texts(singles, seed=4), server, args,
                                Path(tmp), mode))
            if "chat" in only:
                rows.append(run("chat import", chat_lines(chat_mb, args.chat_source), server,
                                args, Path(tmp), mode))
        if "chat" in only and "now" in args.modes.split(","):
            rows.append(run("chat, 666 at once", chat_lines(chat_mb, args.chat_source),
                            server, args, Path(tmp), "now"))
    header = ("scenario", "publish_writes", "facts", "sealed_bytes", "fact_stores", "fact_units",
              "units_per_1000", "minimum_per_1000", "ratio", "log_units", "total_per_1000",
              "seconds")
    print(f"profile {args.profile}, epochs {args.epochs} (units = storage units x epochs)")
    print("\t".join(header))
    for row in rows:
        print("\t".join(str(row[h]) for h in header))
    out = ROOT / ".bench-results"
    out.mkdir(exist_ok=True)
    name = "full" if args.full else "quick"
    (out / f"cost-{name}.json").write_text(json.dumps(
        {"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
