"""No core dumps from a process that holds keys: the CLI and the MCP server call this.

A core file is the process's memory: master seed, derived keys, the plaintext of
recalled memories, written to disk (or handed to systemd-coredump / apport) where
the data dir's 0700 does not protect it. So the programs walrus-mem starts set
``RLIMIT_CORE`` to 0 and, on Linux, ``PR_SET_DUMPABLE`` to 0, which also keeps
other processes of the same user from attaching a debugger (ptrace) to read them.

Importing the library changes nothing: the host application owns its process
(its own crash reporting, its debugger). It can call :func:`disable_core_dumps`.
"""

from __future__ import annotations

import ctypes
import logging
import sys

__all__ = ["disable_core_dumps"]

log = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4


def disable_core_dumps() -> None:
    """Best effort, idempotent: the soft core limit to 0 (the hard one is left, so a
    child may raise it again), and the process not dumpable on Linux."""
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    except (ImportError, ValueError, OSError) as exc:  # Windows: no resource module
        log.debug("core dump limit left as it is: %s", exc)
    if sys.platform.startswith("linux"):
        try:
            if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
                log.debug("prctl(PR_SET_DUMPABLE, 0) failed: errno %d", ctypes.get_errno())
        except (OSError, AttributeError) as exc:  # no libc symbol (static builds)
            log.debug("prctl unavailable: %s", exc)
