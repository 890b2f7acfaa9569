"""Ingest throughput: end-to-end remember_many vs raw embedding of the same texts.

Usage::

    python bench/ingest.py                   # 4,000 facts, real all-MiniLM-L6-v2
    python bench/ingest.py --facts 1000 --fake

relayer_mock runs as a child process on loopback (real HTTP, no faults), like a
publisher would: its request parsing and storage do not share this process's
GIL (``--in-process`` serves it from a thread instead). In one run:

* ``raw``: the embedder alone on the same texts in the same batches, each raw
  batch run right next to the engine's (see :class:`InterleavedEmbedder`);
* ``e2e``: ``Memory.remember_many(texts)`` through the publisher over HTTP:
  normalise, dedupe, embed, seal, one catalog transaction, one quilt per
  ≤ 666 facts, record blob ids, index (and the periodic manifest it triggers);
* publisher calls (``PUT /v1/blobs`` + ``PUT /v1/quilts``, counted by the
  mock's ``/_mock/stats``) per 1,000 facts, fact quilts and manifests apart.

With ``--rounds R`` the facts go in R ``remember_many`` calls.
``embed share`` is the time inside the embedder divided by the end-to-end
time: the throughput ratio the engine
would reach if the embedder ran at the same speed in both measurements (on a
shared machine it does not, which moves ``ratio`` by several percent).

Prints a table and writes ``.bench-results/ingest.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from relayer_mock.server import RelayerProcess, RelayerServer  # noqa: E402
from walrus_mem import Memory, Settings  # noqa: E402

RESULTS = ROOT / ".bench-results"
MASTER = "17" * 32

SUBJECTS = ["I", "My sister", "Our team", "The client", "My manager", "Ada", "The landlord",
            "My doctor", "The project", "Our CI pipeline"]
VERBS = ["prefers", "avoids", "needs", "recommended", "scheduled", "mentioned", "bought",
         "cancelled", "asked about", "is allergic to"]
OBJECTS = ["oat milk", "window seats", "the Lisbon office", "weekly reports", "Rust tooling",
           "green tea", "a standing desk", "PostgreSQL 16", "early meetings", "the blue notebook",
           "peanuts", "jazz concerts", "the staging cluster", "vegan restaurants", "night trains"]
WHEN = ["on Mondays", "since March", "for the Q3 launch", "after the move", "every morning",
        "before flights", "at the weekend", "during sprints", "when travelling", "this year"]


def make_texts(n: int, seed: int = 1) -> list[str]:
    """Distinct, sentence-like facts of realistic length (~50-80 characters)."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        text = (f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
                f"{rng.choice(WHEN)} (note {len(out) + 1})")
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


class InterleavedEmbedder:
    """The engine's embedder, with a raw twin run on every batch.

    Each batch the engine embeds is embedded a second time, right before or
    right after (alternating), and that run is timed as the *raw* throughput.
    Raw and in-engine embedding of the same texts thus run back to back, so a
    busy neighbour or CPU-frequency drift affects both alike. The twin's time
    is subtracted from the end-to-end wall time.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.seconds = 0.0  # in the engine's call
        self.raw_seconds = 0.0  # the twin
        self.calls = 0

    def _twin(self, texts: list[str]) -> None:
        started = time.perf_counter()
        self.inner.embed(texts)
        self.raw_seconds += time.perf_counter() - started

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        if self.calls % 2:
            self._twin(texts)
        started = time.perf_counter()
        result: np.ndarray = self.inner.embed(texts)
        self.seconds += time.perf_counter() - started
        if not self.calls % 2:
            self._twin(texts)
        return result


def publisher_calls(server: RelayerServer | RelayerProcess) -> dict[str, int]:
    counters = httpx.get(f"{server.url}/_mock/stats", headers=server.admin_headers,
                         timeout=10).json()["counters"]
    return {route: int(counters.get(f"requests.{route}", 0)) for route in ("put_blob", "put_quilt")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=4000)
    parser.add_argument("--fake", action="store_true", help="HashEmbedder instead of the model")
    parser.add_argument("--in-process", action="store_true",
                        help="serve relayer_mock from a thread of this process (RelayerServer) "
                             "instead of a child process")
    parser.add_argument("--rounds", type=int, default=1,
                        help="split the facts into this many remember_many calls")
    parser.add_argument("--backend", default="auto", choices=["auto", "numpy", "torch"],
                        help="the model's runtime (embedding_backend)")
    parser.add_argument("--threads", type=int, default=1, help="embedding_threads (0: defaults)")
    args = parser.parse_args(argv)
    if args.fake:
        from walrus_mem.testing import HashEmbedder

        inner: Any = HashEmbedder(384)
    else:
        from walrus_mem._recall.embeddings import SentenceTransformerEmbedder

        inner = SentenceTransformerEmbedder(backend=args.backend, threads=args.threads)
    texts = make_texts(args.facts)
    inner.embed(texts[:64])  # load and warm up the model
    rounds = max(1, args.rounds)
    size = -(-args.facts // rounds)
    chunks = [texts[i:i + size] for i in range(0, len(texts), size)]
    server_class = RelayerServer if args.in_process else RelayerProcess
    with tempfile.TemporaryDirectory(prefix="walrus-mem-ingest-") as tmp, \
            server_class(Path(tmp) / "walrus") as server:
        settings = Settings(config_file=None, data_dir=Path(tmp) / "data", use_keyring=False,
                            publisher_url=server.url, aggregator_urls=server.url,
                            mock_admin_token=server.admin_token)
        timed = InterleavedEmbedder(inner)
        mem = Memory(settings, embedder=timed, master_key=MASTER)
        e2e = 0.0
        fact_quilts: set[str | None] = set()
        calls_before = publisher_calls(server)
        stored = queued = failed = 0
        for chunk in chunks:
            started = time.perf_counter()
            result = mem.remember_many(chunk)
            e2e += time.perf_counter() - started
            stored += result.stored
            queued += result.queued
            failed += len(result.failed)
            fact_quilts.update(r.blob_id for r in result.records)
        e2e -= timed.raw_seconds  # the twin runs are not part of the engine's work
        raw = timed.raw_seconds
        calls_after = publisher_calls(server)
        sync_started = time.perf_counter()
        mem.sync()
        sync_s = time.perf_counter() - sync_started
        mem.close()
    assert stored == args.facts and queued == 0 and not failed
    calls = {k: calls_after[k] - calls_before[k] for k in calls_after}
    total_calls = sum(calls.values())
    per_k = 1000 / args.facts
    out: dict[str, Any] = {
        "benchmark": "ingest",
        "embedder": inner.model_id,
        "facts": args.facts,
        "rounds": len(chunks),
        "raw_embed_s": round(raw, 3),
        "raw_facts_per_s": round(args.facts / raw, 1),
        "e2e_s": round(e2e, 3),
        "e2e_facts_per_s": round(args.facts / e2e, 1),
        "e2e_embed_s": round(timed.seconds, 3),
        "e2e_overhead_s": round(e2e - timed.seconds, 3),
        "overhead_ms_per_fact": round((e2e - timed.seconds) / args.facts * 1000, 3),
        "ratio": round(raw / e2e, 3),
        "ratio_excluding_embed_noise": round(timed.seconds / e2e, 3),
        "publisher_calls": calls,
        "fact_quilts": len(fact_quilts),
        "publisher_calls_per_1000": round(total_calls * per_k, 2),
        "fact_publisher_calls_per_1000": round(len(fact_quilts) * per_k, 2),
        "sync_s": round(sync_s, 3),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
    }
    print(f"{'facts':>6} {'calls':>5} {'raw embed/s':>12} {'e2e facts/s':>12} {'ratio':>6} "
          f"{'embed share':>12} {'overhead ms/fact':>17} {'calls/1000':>11} "
          f"{'fact calls/1000':>16}")
    print(f"{args.facts:>6} {out['rounds']:>5} {out['raw_facts_per_s']:>12.1f} "
          f"{out['e2e_facts_per_s']:>12.1f} {out['ratio']:>6.3f} "
          f"{out['ratio_excluding_embed_noise']:>12.3f} {out['overhead_ms_per_fact']:>17.3f} "
          f"{out['publisher_calls_per_1000']:>11.2f} {out['fact_publisher_calls_per_1000']:>16.2f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ingest.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
