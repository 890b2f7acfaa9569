"""Replay FeatureMachines steps (one ``state.x(...)`` per line of FILE) in this tree.

    cd <repo> && .venv/bin/python .ci/stateful_replay.py steps.txt

Runs the invariants after each step, as hypothesis does (they move the simulated clock).
Prints each step, then ``RESULT: passed`` or ``RESULT: failed <error>``.
"""

import functools
import sys
import traceback

from httpx import _config as httpx_default

sys.path.insert(0, ".")
import tests.test_log_features_stateful as T

try:
    import walrus_mem._log.merging as merging
except ImportError:  # a tree from before issue 24
    import walrus_mem.namespace_log as merging  # type: ignore[no-redef]
merging.RESTORE_CHUNK = 2  # as the test's fixture: a kill lands between chunks
try:  # as the test's fixture: the loss check's rounds count, not their seconds
    import walrus_mem._memory.network_reset as network_reset
    network_reset.LOST_CONFIRM_PAUSES = (0.01, 0.01)
except (ImportError, AttributeError):  # a tree from before issue 25 item 4
    pass
httpx_default.create_ssl_context = functools.lru_cache(maxsize=None)(
    httpx_default.create_ssl_context)
root = T._fast_tmp()
with T._machines_clock():
    T._WORLD = T.World(root)
    state = T.FeatureMachines()
    try:
        for line in open(sys.argv[1], encoding="utf-8"):
            line = line.strip()
            if line.startswith("state."):
                print(">>", line, flush=True)
                eval(line)
                if not line.startswith("state.teardown("):
                    # as hypothesis: the invariants after each step (they also move the
                    # simulated clock a second, so replays keep the run's timestamps apart)
                    state.machines_match_the_model()
        print("RESULT: passed")
    except BaseException as exc:
        traceback.print_exc(limit=int(__import__("os").environ.get("TB_LIMIT", "3")))
        print("RESULT: failed", type(exc).__name__, str(exc)[:300])
    finally:
        T._WORLD.close()
