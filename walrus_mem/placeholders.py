"""``${VAR}`` placeholder resolution for configuration values.

Every string in a config tree is scanned; ``${NAME}`` is replaced by the
environment variable ``NAME``. ``$${`` escapes a literal ``${``. An unset or
empty variable, or a malformed placeholder, is a :class:`PlaceholderError`
that names the variable and never shows any value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final

from .errors import PlaceholderError

__all__ = ["resolve_placeholders", "resolve_string"]

_NAME: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN: Final = re.compile(r"\$\$\{|\$\{(" + _NAME + r")\}|\$\{")


def resolve_string(value: str, environ: Mapping[str, str] | None = None, *, where: str = "") -> str:
    env = os.environ if environ is None else environ
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(value):
        out.append(value[pos : m.start()])
        pos = m.end()
        tok = m.group(0)
        if tok == "$${":
            out.append("${")
            continue
        name = m.group(1)
        loc = f" in {where}" if where else ""
        if name is None:
            raise PlaceholderError(
                f"malformed placeholder{loc}: use ${{NAME}} with NAME of [A-Za-z_][A-Za-z0-9_]*"
            )
        if name not in env:
            raise PlaceholderError(
                f"environment variable {name} is not set (referenced as ${{{name}}}{loc})",
                variable=name,
            )
        if env[name] == "":
            raise PlaceholderError(
                f"environment variable {name} is empty (referenced as ${{{name}}}{loc})",
                variable=name,
            )
        out.append(env[name])
    out.append(value[pos:])
    return "".join(out)


def resolve_placeholders(
    tree: Any, environ: Mapping[str, str] | None = None, *, path: str = ""
) -> Any:
    """Return a copy of ``tree`` with ``${VAR}`` resolved in every string value.

    Placeholders are not expanded recursively: a variable whose value itself
    contains ``${...}`` is inserted verbatim.
    """
    if isinstance(tree, str):
        return resolve_string(tree, environ, where=path or "config")
    if isinstance(tree, Mapping):
        return {
            k: resolve_placeholders(v, environ, path=f"{path}.{k}" if path else str(k))
            for k, v in tree.items()
        }
    if isinstance(tree, list | tuple):
        return [resolve_placeholders(v, environ, path=f"{path}[{i}]") for i, v in enumerate(tree)]
    return tree
