"""Cold processes: what a user waits for when a CLI command, the MCP server or a hook starts.

Usage::

    python bench/cold.py                       # 10k memories, 7 runs of each
    python bench/cold.py --memories 2000 --runs 3
    python bench/cold.py --no-torch --baseline /tmp/old-checkout   # A/B, one run

``--baseline DIR`` also runs the walrus_mem cases with ``PYTHONPATH=DIR`` (another
checkout of the repository), interleaved with this tree's in every round, so a
change is measured against the code before it under the same load.

One data dir holds ``--memories`` memories in the ``default`` namespace under
the real model's id (bulk-loaded like bench/recall.py, with clustered vectors:
latency does not depend on what the vectors mean). Each case then runs in a
*fresh* process, round-robin (one run of every case, then the next round), so
the machine's drifting load hits every case alike:

* ``import torch + sentence_transformers``: ``python -c "import torch,
  sentence_transformers"``, the cost the query path no longer pays;
* ``cli recall``: ``python -m walrus_mem recall "food allergies"`` (the default numpy
  backend), and the same with ``WALRUS_MEM_EMBEDDING_BACKEND=torch`` (the
  reference path, as it was before);
* ``cli remember``: ``walrus-mem remember <new fact>`` (sealed and published to
  the embedded relayer_mock, indexed);
* ``mcp first answer``: ``walrus-mem mcp`` started, ``initialize`` and one
  ``memory_search`` call over stdio: from spawn to the search's answer;
* ``hooks first recall``: a fresh Python that opens ``Memory`` and calls
  ``MemoryHooks.before_prompt_build`` once;
* ``resident: client start`` + ``resident: warm answer``: the two parts of the
  other design the issue names (a resident process the CLI talks to): the
  start of a thin client process (``python -c "import json, socket"``) and a
  warm server's answer (the second ``memory_search`` of the MCP process above).

Wall time, user+system CPU (``os.wait4``; for the MCP server also ``cpu_first_s``, its CPU
up to the first answer, read from /proc) and peak RSS (GNU time) per process. Prints a
table with n, median, min-max and the load average; writes
``.bench-results/cold.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.recall import DIM, MASTER, bulk_load, make_corpus  # noqa: E402
from walrus_mem import Memory, Settings  # noqa: E402
from walrus_mem._recall.embeddings import DEFAULT_MODEL_ID  # noqa: E402
from walrus_mem._recall.minilm import MiniLM  # noqa: E402

RESULTS = ROOT / ".bench-results"
NAMESPACE = "default"


class _NoModel:
    """Stands in for the embedder while the data dir is bulk-loaded (never called)."""

    model_id = DEFAULT_MODEL_ID
    dim = DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("the bulk load embeds nothing")


def build(data_dir: Path, n: int) -> None:
    settings = Settings(config_file=None, data_dir=data_dir, use_keyring=False)
    mem = Memory(settings, embedder=_NoModel(), master_key=MASTER)
    texts, vectors, _ = make_corpus(n, np.random.default_rng(7))
    # A few real facts with the real model's vectors, so the recalls find something.
    facts = ["User is allergic to peanuts and shellfish.", "User prefers oat milk in coffee.",
             "User's sister Ana lives in Lisbon.", "User runs 10 km every Saturday."]
    texts[: len(facts)] = facts
    vectors[: len(facts)] = MiniLM().encode(facts)
    bulk_load(mem, texts, vectors, namespace=NAMESPACE, model_id=DEFAULT_MODEL_ID)
    mem._indexes.get(NAMESPACE, DEFAULT_MODEL_ID, DIM)  # the index file, as a user has it
    mem.close()


def _walrus_mem() -> list[str]:
    # ``python -m walrus_mem``, not the installed ``walrus-mem`` script: the script names
    # this tree's entry point, which a --baseline checkout may not have.
    return [sys.executable, "-m", "walrus_mem"]


TIME = Path("/usr/bin/time")


def _wrapped(cmd: list[str], rss_file: Path) -> list[str]:
    """``cmd`` under GNU time, which writes the child's own peak RSS to ``rss_file``.

    The bench's own ``wait4`` cannot tell it: a child forked from this (large)
    process starts its life with the parent's resident pages counted.
    """
    return [str(TIME), "-f", "%M", "-o", str(rss_file), *cmd] if TIME.exists() else cmd


def _sample(wall: float, usage: Any, rss_file: Path) -> dict[str, float]:
    sample = {"wall_s": wall}
    if usage is not None:
        sample["cpu_s"] = usage.ru_utime + usage.ru_stime
    try:
        sample["rss_mb"] = int(rss_file.read_text().split()[-1]) / 1024
        rss_file.unlink()
    except (OSError, ValueError, IndexError):
        pass
    return sample


_RSS = Path(tempfile.gettempdir()) / f"walrus-mem-cold-{os.getpid()}.rss"


# Children run in the bench's temp dir: ``python -c`` puts its working dir first on sys.path,
# which would import the walrus_mem of wherever the bench was started, whatever PYTHONPATH says.
_CWD = tempfile.gettempdir()


def _run_reaped(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run ``cmd`` in a fresh process, reaped with ``wait4``: wall s, CPU s, peak RSS MB."""
    started = time.perf_counter()
    proc = subprocess.Popen(_wrapped(cmd, _RSS), env=env, cwd=_CWD, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}): {err[-2000:]!r} {out[-500:]!r}")
    return _sample(wall, usage, _RSS)


def _cpu_so_far(pid: int) -> float | None:
    """User+system CPU seconds ``pid`` and its children have used so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, IndexError):
        return None
    own = (int(fields[11]) + int(fields[12])) / tick
    return own + sum(_cpu_so_far(int(child)) or 0.0 for child in children)


def mcp_first_answer(env: dict[str, str]) -> tuple[dict[str, float], float]:
    """Spawn ``walrus-mem mcp``; time to the first search answer, then a warm second one."""
    started = time.perf_counter()
    proc = subprocess.Popen(_wrapped([*_walrus_mem(), "mcp"], _RSS), env=env, cwd=_CWD,
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdin is not None and proc.stdout is not None

    def call(msg_id: int | None, method: str, params: dict[str, Any]) -> Any:
        assert proc.stdin is not None and proc.stdout is not None
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if msg_id is not None:
            msg["id"] = msg_id
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        if msg_id is None:
            return None
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("mcp server exited: " + (proc.stderr.read() if proc.stderr
                                                            else ""))
            reply = json.loads(line)
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"mcp error: {reply['error']}")
                return reply["result"]

    call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "0"}})
    call(None, "notifications/initialized", {})
    search = {"name": "memory_search", "arguments": {"query": "food allergies", "limit": 5}}
    result = call(2, "tools/call", search)
    first = time.perf_counter() - started
    cpu_first = _cpu_so_far(proc.pid)  # the process's total below also counts its exit
    if result.get("isError"):
        raise RuntimeError(f"memory_search failed: {result}")
    t0 = time.perf_counter()
    call(3, "tools/call", {"name": "memory_search",
                           "arguments": {"query": "what does the user eat", "limit": 5}})
    warm = time.perf_counter() - t0
    proc.stdin.close()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    sample = _sample(first, usage, _RSS)
    if cpu_first is not None:
        sample["cpu_first_s"] = cpu_first
    return sample, warm


HOOK = """
from walrus_mem import Memory
from walrus_mem.hooks import MemoryHooks
hooks = MemoryHooks(Memory())
ctx = hooks.before_prompt_build("Remind me which foods I am allergic to?", "agent:main:main")
assert "peanuts" in ctx.prepend_context, ctx
hooks.close()
"""


def summary(samples: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(samples)}
    for key in ("wall_s", "cpu_s", "cpu_first_s", "rss_mb"):
        values = [s[key] for s in samples if key in s]
        if values:
            out[key] = {"median": round(statistics.median(values), 3),
                        "min": round(min(values), 3), "max": round(max(values), 3)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout: its walrus_mem runs the same cases, interleaved")
    parser.add_argument("--no-torch", action="store_true", help="skip the two torch cases")
    args = parser.parse_args(argv)
    global _CWD
    with tempfile.TemporaryDirectory(prefix="walrus-mem-cold-") as tmp:
        data_dir = Path(tmp) / "data"
        _CWD = str(Path(tmp))
        print(f"… building {args.memories:,} memories", file=sys.stderr, flush=True)
        build(data_dir, args.memories)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WALRUS_MEM_")}
        env.update(WALRUS_MEM_DATA_DIR=str(data_dir), WALRUS_MEM_MASTER_KEY=MASTER,
                   WALRUS_MEM_USE_KEYRING="false", WALRUS_MEM_CONFIG="",
                   PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="")
        cli = _walrus_mem()
        py = sys.executable
        # each case runs with the env it is given: this tree's, or --baseline's
        cases: dict[str, Any] = {
            "import torch + sentence_transformers":
                lambda i, e: _run_reaped([py, "-c", "import torch, sentence_transformers"], e),
            "cli recall": lambda i, e: _run_reaped([*cli, "recall", "food allergies"], e),
            "cli recall (torch backend)": lambda i, e: _run_reaped(
                [*cli, "recall", "food allergies"], {**e, "WALRUS_MEM_EMBEDDING_BACKEND": "torch"}),
            "cli remember": lambda i, e: _run_reaped(
                [*cli, "remember", f"User noted cold-start fact number {i} at {time.time()}"], e),
            "hooks first recall": lambda i, e: _run_reaped([py, "-c", HOOK], e),
            "resident: client start":
                lambda i, e: _run_reaped([py, "-c", "import json, socket"], e),
        }
        if args.no_torch:
            del cases["import torch + sentence_transformers"], cases["cli recall (torch backend)"]
        envs = {name: env for name in cases}
        mcp_envs = {"mcp first answer": env}
        if args.baseline:  # each case of walrus_mem's right after this tree's run of it
            base_env = {**env, "PYTHONPATH": str(args.baseline.resolve())}
            paired: dict[str, Any] = {}
            for name, run in cases.items():
                paired[name] = run
                if name in ("cli recall", "cli remember", "hooks first recall"):
                    paired[f"{name} (baseline)"] = run
                    envs[f"{name} (baseline)"] = base_env
            cases = paired
            mcp_envs["mcp first answer (baseline)"] = base_env
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
        for name in mcp_envs:
            samples[name] = []
        samples["resident: warm answer"] = []
        loads = []
        for i in range(args.runs + 1):  # round 0 warms the OS file cache, not reported
            print(f"… round {i}/{args.runs}", file=sys.stderr, flush=True)
            loads.append(os.getloadavg()[0])
            for name, run in cases.items():
                sample = run(i, envs[name])
                if i:
                    samples[name].append(sample)
            for name, mcp_env in mcp_envs.items():
                first, warm = mcp_first_answer(mcp_env)
                if i:
                    samples[name].append(first)
                    if mcp_env is env:
                        samples["resident: warm answer"].append({"wall_s": warm})
    results = {name: summary(s) for name, s in samples.items()}
    print(f"{args.memories:,} memories, {args.runs} runs per case, load average (1 min) "
          f"{min(loads):.2f}-{max(loads):.2f}")
    print(f"{'case':<38} {'n':>3} {'wall median':>12} {'min-max':>14} {'cpu':>7} {'RSS':>8}")
    for name, r in results.items():
        wall = r["wall_s"]
        cpu = f"{r['cpu_s']['median']:.2f}s" if "cpu_s" in r else "-"
        if "cpu_first_s" in r:  # the MCP server: CPU up to the answer (its total adds the exit)
            cpu = f"{r['cpu_first_s']['median']:.2f}s"
        rss = f"{r['rss_mb']['median']:.0f}MB" if "rss_mb" in r else "-"
        print(f"{name:<38} {r['n']:>3} {wall['median']:>11.3f}s "
              f"{wall['min']:>6.2f}-{wall['max']:<6.2f}s {cpu:>7} {rss:>8}")
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": "cold",
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "load_avg_1min": loads[1:]},
        "memories": args.memories,
        "results": results,
    }
    (RESULTS / "cold.json").write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
