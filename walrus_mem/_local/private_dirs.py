"""Paths: configured ones expanded, created directories private (0700, parents too).

``Path.mkdir(parents=True, mode=0o700)`` applies the mode to the last component
only (parents get the umask's default, typically 0755) and even that mode is
filtered by the umask. So a data dir ``~/agents/shared`` or a config dir whose
``~/.config`` did not exist yet left world-readable directories behind. As the
XDG base directory spec asks, every directory created here is 0700; an existing
one keeps its mode (a home directory is never chmod-ed).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["expand_path", "make_private_dirs"]


def expand_path(value: Any, variables: Callable[[str], str] = os.path.expandvars) -> Any:
    """``~`` and ``$VAR`` / ``${VAR}`` expanded in a configured path (unknown variables
    stay as written), so a path means the same file from every working directory.

    Each once, as a shell does: a leading ``~`` (``~user``) first, then the variables
    of the rest in one pass (``variables``). What a variable brings in is never expanded
    again, so a ``$KEY`` inside ``${TENANT}`` stays ``$KEY``, not the key.
    """
    if not isinstance(value, str | os.PathLike):
        return value
    text = str(os.fspath(value))
    if text.startswith("~"):
        user, sep, rest = text.partition("/")
        return Path(os.path.expanduser(user) + sep + variables(rest))
    return Path(variables(text))


def make_private_dirs(directory: str | os.PathLike[str]) -> list[Path]:
    """Create ``directory`` and its missing parents with mode 0700; the ones created."""
    missing: list[Path] = []
    d = Path(directory)
    while not d.exists() and d != d.parent:
        missing.append(d)
        d = d.parent
    created = []
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:  # another process made it: its mode is its own
            continue
        os.chmod(d, 0o700)  # mkdir's mode is filtered by the umask
        created.append(d)
    return created
