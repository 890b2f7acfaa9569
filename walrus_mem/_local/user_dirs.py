"""Where walrus_mem keeps its per-user files, and ``WALRUS_MEM_HOME`` that moves them all.

By default each kind goes where the platform keeps it (platformdirs; on Linux
``~/.config/walrus-mem``, ``~/.local/share/walrus-mem``,
``~/.local/state/walrus-mem``, ``~/.cache/walrus-mem``). ``WALRUS_MEM_HOME=DIR``
puts every one of them under DIR instead (``config.toml`` and ``keys/`` at its
top, then ``data/``, ``state/``, ``cache/``), as ``LLM_USER_PATH`` does for
llm: a test, a demo or a second identity then touches nothing else in the home
directory. Settings that name a path themselves (``data_dir``, ``state_dir``,
``key_file``, ``WALRUS_MEM_MODEL_CACHE``, ...) still win. The OS keyring is not
a directory: set ``use_keyring = false`` to keep the key in DIR too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, Literal

from .private_dirs import expand_path

__all__ = ["HOME_ENV", "home_dir"]

HOME_ENV: Final = "WALRUS_MEM_HOME"


def home_dir(kind: Literal["config", "data", "state", "cache"]) -> Path | None:
    """Where ``WALRUS_MEM_HOME`` puts the files of ``kind``; None when it is not set (the
    caller's platform directory applies)."""
    home = os.environ.get(HOME_ENV)
    if not home:
        return None
    root = Path(expand_path(home))
    return root if kind == "config" else root / kind
