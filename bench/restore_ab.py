"""A/B of a restore's rate between two trees of walrus_mem in one run (issue 28).

One relayer_mock and one namespace of ``--n`` memories (vectors given, under the real
model's identity, as ``restore.py --writer given``), then fresh restores alternating
between the trees named on the command line, each in its own process (so each imports
its own tree). Prints one JSON line per restore: wall time, the restoring process's CPU
(not the relayer's), its rate per wall and per CPU second, and the load average.

Make a tree of a commit with ``git archive <rev> walrus_mem | tar -x -C <dir>``:

    nice -n 10 python bench/restore_ab.py --n 20000 /tmp/before /tmp/after --pairs 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(cfg: dict[str, str | int], data: str, profile: str) -> None:
    """One restore (the tree on PYTHONPATH), timed; cProfile to ``profile`` if given."""
    import cProfile

    import walrus_mem
    from walrus_mem import Memory, Settings
    from walrus_mem._recall.embeddings import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder()
    model.embed(["warm up"])
    url = str(cfg["url"])
    settings = Settings(config_file=None, data_dir=Path(data), use_keyring=False,
                        publisher_url=url, aggregator_urls=url,
                        mock_admin_token=str(cfg["token"]))
    mem = Memory(settings, embedder=model, master_key=str(cfg["master"]))
    prof = cProfile.Profile() if profile else None
    wall, cpu = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    report = mem.restore("main", str(cfg["head"]))
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n = int(cfg["n"])
    assert report.complete and not report.failed and report.reembedded == 0, report
    assert report.restored == n, report
    mem.close()
    print(json.dumps({"tree": str(Path(walrus_mem.__file__).parent.parent), "s": round(wall, 2),
                      "per_s": round(n / wall, 1), "cpu_s": round(cpu, 2),
                      "per_cpu_s": round(n / cpu, 1)}))


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(json.loads(sys.argv[2]), sys.argv[3], sys.argv[4])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="+", help="directories holding a walrus_mem/")
    parser.add_argument("--n", type=int, default=20000, help="memories restored")
    parser.add_argument("--pairs", type=int, default=3, help="restores per tree")
    parser.add_argument("--profile", default="", help="cProfile files' prefix")
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    from restore import BATCH, MASTER, GivenVectors, make_texts

    from relayer_mock.server import RelayerProcess
    from walrus_mem import Memory, Settings
    from walrus_mem._recall.embeddings import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder()
    with tempfile.TemporaryDirectory(prefix="walrus-mem-ab-") as tmp, \
            RelayerProcess(Path(tmp) / "walrus") as server:
        settings = Settings(config_file=None, data_dir=Path(tmp) / "writer", use_keyring=False,
                            publisher_url=server.url, aggregator_urls=server.url,
                            mock_admin_token=server.admin_token)
        writer = Memory(settings, embedder=GivenVectors(model), master_key=MASTER)
        texts = make_texts(args.n)
        for start in range(0, args.n, BATCH):
            assert writer.remember_many(texts[start:start + BATCH], namespace="main").stored
        assert not writer.sync("main").errors
        cfg = {"url": server.url, "token": server.admin_token, "master": MASTER, "n": args.n,
               "head": str(writer._parts.log.newest("main")[0])}
        writer.close()
        for i in range(args.pairs * len(args.trees)):
            tree = args.trees[i % len(args.trees)]
            profile = f"{args.profile}.{i}" if args.profile else ""
            out = subprocess.run(
                [sys.executable, __file__, "--child", json.dumps(cfg), str(Path(tmp) / f"r{i}"),
                 profile], env=dict(os.environ, PYTHONPATH=str(Path(tree).resolve())),
                capture_output=True, text=True, check=False)
            if out.returncode:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            result = json.loads(out.stdout.strip().splitlines()[-1])
            result["load"] = round(os.getloadavg()[0], 1)
            print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
