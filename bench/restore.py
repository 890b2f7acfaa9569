"""Restore and pull without re-embedding (issue 28 items 1 and 2), in one run.

Usage::

    nice -n 10 python bench/restore.py                       # 5,000 restored, 10,000 pulled
    nice -n 10 python bench/restore.py --n 100000 --writer given

relayer_mock runs as a child process on loopback (real HTTP, no faults). A writer
stores ``--n`` memories (``remember_many`` in batches of 2,000) and syncs; then, each
on a fresh data dir:

* **old path**: a reader whose embedder names no weights digest, so no sealed vector
  can be used and every text is embedded again with the real all-MiniLM-L6-v2 (what
  every restore did before issue 28). With ``--n`` above ``--old-n`` it restores a
  namespace of the first ``--old-n`` texts (the old path is embedder-bound, linear in
  n: its rate does not depend on n);
* **new path**: a reader with the real model (the same model id and weights digest as
  the writer): the vectors sealed in the facts are inserted as they are; ``--reps``
  fresh data dirs, median / min / max.

Then the writer stores ``--pull-n`` more memories and syncs, and two readers that
restored the first head pull the new one: one re-embedding (old path), one not. With
``--pull-every-page`` a third one pulls on the new path reading every manifest page
and the local versions of every memory, as pulls did before they skipped the pages
merged already (_log/page_memory.py): that change's before and after in one run.

After the first new-path restore (and after the new-path pull) a new Memory on that data
dir (what a fresh process finds) answers its first recall: the restore leaves the HNSW
graph to the background builder (``_recall/index_builder.py``), so that recall scans the
pending vectors exactly instead of building the graph first; then ``--recalls`` more
recalls while the builder runs (p50 / max), and with ``--wait-build`` the time the
builder takes to finish.

``--writer minilm`` (default) embeds with the real model; ``--writer given`` hands the
writer vectors (seeded random unit vectors under the real model's identity: a restore
does the same work whatever the vector holds) so 100k memories need no hour of
embedding. Request counts come from the mock's ``/_mock/stats``; storage units per
1,000 facts are computed with relayer_mock's Walrus cost formula for the facts as
sealed, with and without their vector, and for the vector-pages alternative.

Prints a table and writes ``.bench-results/restore.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
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
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

from ingest import make_texts  # noqa: E402

from relayer_mock._cost import encoded_length, storage_units  # noqa: E402
from relayer_mock._quilt_size import encoded_quilt_size  # noqa: E402
from relayer_mock.server import RelayerProcess  # noqa: E402
from walrus_mem import Memory, Settings  # noqa: E402
from walrus_mem._log import merging  # noqa: E402
from walrus_mem._recall.carried import FIELD  # noqa: E402
from walrus_mem._recall.embeddings import SentenceTransformerEmbedder  # noqa: E402
from walrus_mem.envelope import bucket_size, canonical_json, open_envelope  # noqa: E402
from walrus_mem.errors import InvalidInput  # noqa: E402

RESULTS = ROOT / ".bench-results"
MASTER = "17" * 32
BATCH = 2000
READ_ROUTES = ("get_by_quilt_patch_id", "get_blob", "get_by_quilt_id")


class NoDigest:
    """The real model without its weights digest: no sealed vector matches it, so every
    restored text is embedded again (the path before issue 28)."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed(texts)


class GivenVectors:
    """Vectors given (not computed), under the real model's identity (model id, weights
    digest, dim): seeded random unit vectors."""

    def __init__(self, inner: SentenceTransformerEmbedder, seed: int = 7) -> None:
        self.model_id = inner.model_id
        self.weights_digest = inner.weights_digest
        self.dim = inner.dim
        self.rng = np.random.default_rng(seed)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = self.rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Clock:
    """Wall time, and CPU time of this process and of the relayer's (the wall time on a
    shared machine mostly measures the neighbours; the CPU time does not)."""

    def __init__(self, relayer_pid: int) -> None:
        self.pid = relayer_pid
        self.wall, self.cpu, self.relayer = (time.perf_counter(), time.process_time(),
                                             cpu_seconds(relayer_pid))

    def done(self, n: int) -> dict[str, float]:
        wall = time.perf_counter() - self.wall
        cpu = time.process_time() - self.cpu
        relayer = cpu_seconds(self.pid) - self.relayer
        return {"s": round(wall, 2), "per_s": round(n / wall, 1), "cpu_s": round(cpu, 2),
                "relayer_cpu_s": round(relayer, 2),
                "per_cpu_s": round(n / (cpu + relayer), 1)}


def reads(url: str, headers: dict[str, str]) -> int:
    counters = httpx.get(f"{url}/_mock/stats", headers=headers, timeout=10).json()["counters"]
    return sum(int(counters.get(f"requests.{route}", 0)) for route in READ_ROUTES)


def storage(records: list[dict[str, Any]], quilts: list[int]) -> dict[str, Any]:
    """Walrus storage units (1 MiB of encoded length) per 1,000 facts, by relayer_mock's
    cost formula, for the facts as sealed in this run with and without their vector
    (the median fact): in the run's own quilts (``quilts``: facts per quilt, as
    remember_many grouped them), in quilts of 300, and one fact per quilt (remember);
    and the alternative of sealed vector pages (a page of 1,000 vectors as one more
    blob per 1,000 facts)."""
    assert all(FIELD in r for r in records)

    def sealed_size(record: dict[str, Any]) -> int:
        return bucket_size(4 + len(canonical_json(record))) + 126

    after = sorted(sealed_size(r) for r in records)[len(records) // 2]
    before = sorted(sealed_size({k: v for k, v in r.items() if k != FIELD})
                    for r in records)[len(records) // 2]
    vec_json = len(canonical_json({"id": "", "kind": "", FIELD: records[0][FIELD]})) - len(
        canonical_json({"id": "", "kind": ""}))

    def per_k(size: int, groups: list[int]) -> float:
        units = sum(storage_units(encoded_length(encoded_quilt_size(
            [(f"{i:032x}", size) for i in range(facts)]))) for facts in groups)
        return round(units * 1000 / sum(groups), 1)

    page = bucket_size(4 + 1000 * (vec_json + 40)) + 126  # 1,000 {memory id, version, vec}
    page_units = storage_units(encoded_length(page))
    out: dict[str, Any] = {"fact_bytes_before": before, "fact_bytes_after": after,
                           "vec_json_bytes": vec_json,
                           "pages_bytes_per_fact": round(page / 1000, 1),
                           "page_units_per_1000": page_units}
    for name, groups in (("run_quilts", quilts), ("quilts_of_300", [300] * 10),
                         ("single", [1])):
        b, a = per_k(before, groups), per_k(after, groups)
        out[name] = {"before": b, "after": a, "growth_pct": round((a / b - 1) * 100, 1),
                     "pages": round(b + page_units, 1),
                     "pages_growth_pct": round(page_units / b * 100, 1)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="memories restored")
    parser.add_argument("--pull-n", type=int, default=10000, help="new memories pulled")
    parser.add_argument("--old-n", type=int, default=5000,
                        help="memories restored on the old (re-embedding) path at most")
    parser.add_argument("--reps", type=int, default=3, help="fresh restores on the new path")
    parser.add_argument("--writer", choices=["minilm", "given"], default="minilm")
    parser.add_argument("--recalls", type=int, default=20,
                        help="recalls timed after the first one, while the builder runs")
    parser.add_argument("--wait-build", action="store_true",
                        help="time the background index build to its end")
    parser.add_argument("--pull-every-page", action="store_true",
                        help="a third reader pulls reading every manifest page (as before "
                             "pulls skipped the pages merged already)")
    args = parser.parse_args(argv)
    model = SentenceTransformerEmbedder()
    model.embed(["warm up"])
    writer_embedder: Any = model if args.writer == "minilm" else GivenVectors(model)
    texts = make_texts(args.n + args.pull_n)
    old_n = min(args.n, args.old_n)
    out: dict[str, Any] = {"benchmark": "restore", "n": args.n, "pull_n": args.pull_n,
                           "old_n": old_n, "writer": args.writer, "reps": args.reps,
                           "load_start": [round(x, 1) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="walrus-mem-restore-") as tmp, \
            RelayerProcess(Path(tmp) / "walrus") as server:
        def memory(name: str, embedder: Any) -> Memory:
            settings = Settings(config_file=None, data_dir=Path(tmp) / name, use_keyring=False,
                                publisher_url=server.url, aggregator_urls=server.url,
                                mock_admin_token=server.admin_token)
            return Memory(settings, embedder=embedder, master_key=MASTER)

        def write(mem: Memory, ns: str, items: list[str]) -> str:
            for start in range(0, len(items), BATCH):
                result = mem.remember_many(items[start:start + BATCH], namespace=ns)
                assert result.stored == len(items[start:start + BATCH]) and not result.failed
            report = mem.sync(ns)
            assert not report.errors, report.errors
            return str(mem._parts.log.newest(ns)[0])  # the head reference sync published

        started = time.perf_counter()
        writer = memory("writer", writer_embedder)
        head = write(writer, "main", texts[:args.n])
        old_ns = "main" if old_n == args.n else "old"
        old_head = head if old_ns == "main" else write(writer, "old", texts[:old_n])
        out["write_s"] = round(time.perf_counter() - started, 1)
        keys = writer.keys_for("main")
        records = [open_envelope(keys, bytes(r[0])) for r in writer._parts.catalog.query(
            "SELECT sealed FROM memories WHERE namespace = 'main' LIMIT 2000")]
        quilts = [int(r[0]) for r in writer._parts.catalog.query(
            "SELECT count(*) FROM memories WHERE namespace = 'main' GROUP BY blob_id")]
        try:
            out["storage"] = storage(records, quilts)
        except (InvalidInput, TypeError, ValueError) as exc:  # an envelope format in flux
            out["storage"] = {"error": f"{type(exc).__name__}: {exc}"}

        def restore(name: str, embedder: Any, ns: str, ref: str,
                    n: int) -> tuple[dict[str, float], Any]:
            mem = memory(name, embedder)
            before = reads(server.url, server.admin_headers)
            clock = Clock(server.pid)
            report = mem.restore(ns, ref)
            timing = clock.done(n)
            timing["reads_per_1000"] = round(
                (reads(server.url, server.admin_headers) - before) * 1000 / n, 1)
            mem.close()
            assert report.complete and not report.failed, report
            return timing, report

        def first_recalls(name: str, ns: str) -> dict[str, Any]:
            """A new Memory on a restored data dir: open + first recall, more recalls while
            the background builder runs, and (--wait-build) the build's time."""
            queries = [f"{w} notebook" for w in ("blue", "red", "green", "quiet", "garden")]
            model.embed(queries)  # the model warm: the figures are the index's
            started = time.perf_counter()
            mem = memory(name, model)
            hits = mem.recall(queries[0], namespace=ns, k=10)
            first = time.perf_counter() - started
            assert len(hits) > 0
            progress = mem._parts.indexes.build_progress(ns)
            t = time.perf_counter()
            for query in queries:  # the query vectors cached: the recalls below time the index
                mem._parts.embedding.embed_query(query)
            embed_ms = (time.perf_counter() - t) * 1000 / len(queries)
            times = []
            for i in range(args.recalls):
                t = time.perf_counter()
                mem.recall(queries[i % len(queries)], namespace=ns, k=10)
                times.append(time.perf_counter() - t)
            out: dict[str, Any] = {"open_and_first_recall_s": round(first, 3),
                                   "query_embedding_ms": round(embed_ms, 1),
                                   "at_first_recall": progress}
            if times:
                out["recall_ms_p50"] = round(statistics.median(times) * 1000, 1)
                out["recall_ms_max"] = round(max(times) * 1000, 1)
                out["recalls"] = len(times)
            if args.wait_build:
                t = time.perf_counter()
                assert mem._parts.indexes.wait_built(ns)
                out["build_s"] = round(time.perf_counter() - t, 1)
                t = time.perf_counter()
                mem.recall(queries[1], namespace=ns, k=10)
                out["recall_after_build_ms"] = round((time.perf_counter() - t) * 1000, 1)
            out["after"] = mem._parts.indexes.build_progress(ns)
            mem.close()
            return out

        timing, report = restore("old", NoDigest(model), old_ns, old_head, old_n)
        assert report.reembedded == report.restored == old_n, report
        out["restore_old"] = {"n": old_n, **timing}
        rates = []
        for rep in range(args.reps):
            timing, report = restore(f"new{rep}", model, "main", head, args.n)
            assert report.reembedded == 0 and report.restored == args.n, report
            rates.append(timing["per_s"])
            out.setdefault("restore_new_runs", []).append(timing)
        out["first_recall_after_restore"] = first_recalls("new0", "main")
        out["restore_new"] = {"n": args.n, "median_per_s": round(statistics.median(rates), 1),
                              "min_per_s": round(min(rates), 1),
                              "max_per_s": round(max(rates), 1)}
        out["restore_ratio"] = round(statistics.median(rates) / out["restore_old"]["per_s"], 1)
        out["restore_cpu_ratio"] = round(statistics.median(
            r["per_cpu_s"] for r in out["restore_new_runs"]) / out["restore_old"]["per_cpu_s"], 1)

        if args.pull_n:
            # two readers hold the first head (restored on the new path), then pull
            pullers = [("pull_old", NoDigest(model)), ("pull_new", model)]
            if args.pull_every_page:
                pullers.append(("pull_every_page", model))
            for name, _ in pullers:
                restore(name, model, "main", head, args.n)
            writer_started = time.perf_counter()
            head2 = write(writer, "main", texts[args.n:])
            out["write_pull_s"] = round(time.perf_counter() - writer_started, 1)
            for name, embedder in pullers:
                mem = memory(name, embedder)
                before = reads(server.url, server.admin_headers)
                clock = Clock(server.pid)
                held = vars(merging)["held_pages"]
                if name == "pull_every_page":  # no page is taken as merged already
                    vars(merging)["held_pages"] = lambda *a: {}
                try:
                    pulled = mem.pull(head2, namespace="main")
                finally:
                    vars(merging)["held_pages"] = held
                timing = clock.done(args.pull_n)
                timing["reads_per_1000"] = round(
                    (reads(server.url, server.admin_headers) - before) * 1000 / args.pull_n, 1)
                mem.close()
                assert pulled.added == args.pull_n and pulled.complete, pulled
                assert pulled.reembedded == (args.pull_n if name == "pull_old" else 0), pulled
                out[name] = {"n": args.pull_n, **timing}
            out["first_recall_after_pull"] = first_recalls("pull_new", "main")
            out["pull_ratio"] = round(out["pull_new"]["per_s"] / out["pull_old"]["per_s"], 1)
            out["pull_cpu_ratio"] = round(
                out["pull_new"]["per_cpu_s"] / out["pull_old"]["per_cpu_s"], 1)
            if args.pull_every_page:
                every = out["pull_every_page"]
                out["pull_every_page_ratio"] = round(every["per_s"] / out["pull_old"]["per_s"], 1)
                out["pull_every_page_cpu_ratio"] = round(
                    every["per_cpu_s"] / out["pull_old"]["per_cpu_s"], 1)
        writer.close()
    out["load_end"] = [round(x, 1) for x in os.getloadavg()]
    out["machine"] = {"python": platform.python_version(), "platform": platform.platform()}
    print(json.dumps(out, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "restore.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
