"""Load order of the native libraries that share a walrus_mem process.

USearch's Python wheel links libstdc++ statically and exports its symbols;
once it is loaded, importing onnxruntime (which uses the system libstdc++)
crashes the process with SIGSEGV inside onnxruntime's module init (seen with
usearch 2.26 and onnxruntime 1.24-1.32; importing onnxruntime *first* works).
Making the system libstdc++ global before USearch loads lets both resolve
the same C++ runtime, and then either import order works.

:func:`before_usearch` does that (Linux only, and only when onnxruntime is
installed: nothing changes for a process that can never load it);
:func:`onnxruntime_safe` says whether importing onnxruntime now is safe.
"""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec

__all__ = ["before_usearch", "onnxruntime_safe"]

_USEARCH = "usearch.compiled"
_shared_runtime = False  # libstdc++ was made global before USearch loaded


def before_usearch() -> None:
    """Call before the first ``import usearch``: share the C++ runtime with onnxruntime."""
    global _shared_runtime
    if _shared_runtime or _USEARCH in sys.modules or not sys.platform.startswith("linux"):
        return
    if "onnxruntime" in sys.modules or find_spec("onnxruntime") is None:
        return
    import ctypes

    try:
        ctypes.CDLL("libstdc++.so.6", mode=os.RTLD_GLOBAL)
    except OSError:
        return
    _shared_runtime = True


def onnxruntime_safe() -> bool:
    """Whether onnxruntime can be imported into this process without the crash above."""
    return ("onnxruntime" in sys.modules or _USEARCH not in sys.modules or _shared_runtime
            or not sys.platform.startswith("linux"))
