"""``${VAR}`` placeholder resolution for configuration values.

Every string in a config tree is scanned; ``${NAME}`` is replaced by the
environment variable ``NAME`` (``NAME`` matches ``[A-Za-z_][A-Za-z0-9_]*``).
``$${`` escapes a literal ``${``; a ``$`` not followed by ``{`` is literal.
An unset or empty variable, or a malformed placeholder (``${``, ``${}``,
``${1X}``, ``${A``), is a :class:`PlaceholderError` that names the variable
(or the position of the malformed placeholder) and never shows any value:
neither the variable's value nor the surrounding text, which may itself be a
secret.

Substitution is single-pass: a variable whose value contains ``${...}`` is
inserted verbatim, never expanded again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from ..errors import PlaceholderError

__all__ = [
    "check_placeholders",
    "placeholder_names",
    "resolve_path_variables",
    "resolve_placeholders",
    "resolve_string",
]

_NAME: Final = r"[A-Za-z_][A-Za-z0-9_]*"
# Alternatives in order: escape, well-formed placeholder, anything else after "${".
_TOKEN: Final = re.compile(r"\$\$\{|\$\{(" + _NAME + r")\}|\$\{")


def resolve_string(value: str, environ: Mapping[str, str] | None = None, *, where: str = "") -> str:
    """Resolve the placeholders of one string. ``where`` names it in error messages."""
    return _resolve(value, environ, where, _TOKEN)


def _resolve(value: str, environ: Mapping[str, str] | None, where: str,
             token: re.Pattern[str]) -> str:
    env = os.environ if environ is None else environ
    loc = f" in {where}" if where else ""
    out: list[str] = []
    pos = 0
    for m in token.finditer(value):
        out.append(value[pos : m.start()])
        pos = m.end()
        if m.lastindex == 2:  # a bare $NAME (paths only): as a shell, unset stays
            out.append(env.get(m.group(2), m.group(0)))
            continue
        if m.group(0) == "$${":
            out.append("${")
            continue
        name = m.group(1)
        if name is None:
            raise PlaceholderError(
                f"malformed placeholder at character {m.start()}{loc}: use ${{NAME}} with NAME "
                "of [A-Za-z_][A-Za-z0-9_]* (write $${ for a literal ${)"
            )
        resolved = env.get(name)
        if resolved is None:
            raise PlaceholderError(
                f"environment variable {name} is not set (referenced as ${{{name}}}{loc})",
                variable=name,
            )
        if resolved == "":
            raise PlaceholderError(
                f"environment variable {name} is empty (referenced as ${{{name}}}{loc})",
                variable=name,
            )
        out.append(resolved)
    out.append(value[pos:])
    return "".join(out)


_PATH_TOKEN: Final = re.compile(_TOKEN.pattern + r"|\$(" + _NAME + r")")


def resolve_path_variables(value: str, environ: Mapping[str, str] | None = None, *,
                           where: str = "") -> str:
    """A path setting of the config file, in one pass: ``${VAR}`` as everywhere in the
    file (unset or empty is an error), and ``$VAR`` as in a shell path (unset stays as
    written). What a variable brings in is inserted as it is (issue 23: a ``${TENANT}``
    holding ``$ALICE_KEY`` must not become the key)."""
    return _resolve(value, environ, where, _PATH_TOKEN)


def placeholder_names(value: str) -> list[str]:
    """The variable names ``value`` references (escapes and malformed ones excluded)."""
    return [m.group(1) for m in _TOKEN.finditer(value) if m.group(1) is not None]


def check_placeholders(value: str, *, where: str = "") -> str:
    """Check the placeholder syntax of ``value`` without reading any variable.

    For values resolved later (secrets resolved only when used): a malformed
    placeholder is still reported when the file is loaded. Returns ``value``.
    """
    resolve_string(value, _AnyValue(), where=where)
    return value


class _AnyValue(Mapping[str, str]):
    """An environment in which every variable is set (to a dummy)."""

    def __getitem__(self, key: str) -> str:
        return "x"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def get(self, key: str, default: Any = None) -> str:
        return "x"


def resolve_placeholders(
    tree: Any,
    environ: Mapping[str, str] | None = None,
    *,
    path: str = "",
    defer: Callable[[str], bool] | None = None,
) -> Any:
    """Return a copy of ``tree`` with ``${VAR}`` resolved in every string value.

    Mappings and lists/tuples are walked (tuples come back as lists); keys are
    not resolved; other values are returned unchanged. A string whose dotted
    path ``defer`` accepts is left as it is (only its syntax is checked): it is
    resolved when used, so a process needs only the variables of what it opens.
    """
    if isinstance(tree, str):
        where = path or "config"
        if defer is not None and defer(path):
            return check_placeholders(tree, where=where)
        return resolve_string(tree, environ, where=where)
    if isinstance(tree, Mapping):
        return {
            k: resolve_placeholders(
                v, environ, path=f"{path}.{k}" if path else str(k), defer=defer
            )
            for k, v in tree.items()
        }
    if isinstance(tree, list | tuple):
        return [
            resolve_placeholders(v, environ, path=f"{path}[{i}]", defer=defer)
            for i, v in enumerate(tree)
        ]
    return tree
