"""Replay FeatureMachines steps (one `state.x(...)` per line of FILE) in this tree."""
import sys, functools, traceback
sys.path.insert(0, ".")
import tests.test_log_features_stateful as T
from httpx import _config as httpx_default
try:
    import walrus_mem._log.merging as M
except ImportError:
    import walrus_mem.namespace_log as M
M.RESTORE_CHUNK = 2
httpx_default.create_ssl_context = functools.lru_cache(maxsize=None)(httpx_default.create_ssl_context)
root = T._fast_tmp()
with T._machines_clock():
    T._WORLD = T.World(root)
    state = T.FeatureMachines()
    try:
        for line in open(sys.argv[1]):
            line = line.strip()
            if line.startswith("state."):
                print(">>", line, flush=True)
                eval(line)
        print("RESULT: passed")
    except BaseException as e:
        traceback.print_exc(limit=3)
        print("RESULT: failed", type(e).__name__, str(e)[:300])
    finally:
        T._WORLD.close()
