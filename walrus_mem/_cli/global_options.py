"""Global options after the subcommand: ``walrus-mem recall "x" -n ops --json``.

click reads a group's options only before the subcommand's name; llm, gh and
kubectl take them anywhere. :func:`hoist_global_options` moves each global
option found after the subcommand (``-n/--namespace``, ``-a/--agent``,
``--json``, ``--data-dir``, ``--config``, ``-v/--verbose``) to the front, so
click parses it as if it came first. An option the subcommand defines itself
(``keys add --agent``, ``relayer --data-dir``, ``mcp --agent``) stays the
subcommand's; nothing after ``--`` moves. A value given twice, differently
(``-n a recall x -n b``), is a usage error rather than "the last one wins".
"""

from __future__ import annotations

from typing import Final

import click

__all__ = ["GLOBAL_HELP", "hoist_global_options"]

#: The global options that take a value, by every spelling, and the flags.
_VALUED: Final = {"-n": "--namespace", "--namespace": "--namespace", "-a": "--agent",
                  "--agent": "--agent", "--data-dir": "--data-dir", "--config": "--config"}
_FLAGS: Final = {"--json": "--json", "--verbose": "--verbose", "-v": "--verbose"}

GLOBAL_HELP: Final = ("Global options (-n/--namespace, -a/--agent, --json, --data-dir, "
                      "--config, -v) go before or after the command.")


def _split(token: str) -> tuple[str, str | None]:
    """``--namespace=ops`` -> (``--namespace``, ``ops``); ``-nops`` -> (``-n``, ``ops``)."""
    if token.startswith("--"):
        name, sep, value = token.partition("=")
        return name, value if sep else None
    if len(token) > 2 and token[:2] in _VALUED:
        return token[:2], token[2:]
    return token, None


def _claimed(command: click.Command, ctx: click.Context) -> dict[str, bool]:
    """Option spellings the subcommand (and its parent groups) define themselves, each
    with whether it takes a value (which is then never read as a global option)."""
    names: dict[str, bool] = {}
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            valued = not (param.is_flag or param.count)
            names.update(dict.fromkeys(param.opts, valued))
            names.update(dict.fromkeys(param.secondary_opts, False))
    return names


def _command_chain(group: click.Group, ctx: click.Context, rest: list[str]
                   ) -> tuple[dict[str, bool], int, list[str], list[tuple[str, str | None]]] | None:
    """The option spellings the invoked command chain claims, where its tokens start,
    ``rest`` without the global options found between a group and its subcommand
    (``keys --agent x export``), and those options as (canonical name, value)."""
    claimed: dict[str, bool] = {}
    between: list[tuple[str, str | None]] = []
    kept: list[str] = []
    command: click.Command = group
    i = 0
    while isinstance(command, click.Group):
        start, found = i, len(between)
        mark = len(kept)
        while i < len(rest) and rest[i].startswith("-") and rest[i] != "-":
            name, value = _split(rest[i])
            token, i = rest[i], i + 1  # a (sub)group's own flags: none of ours take values
            if name in _VALUED and value is None and name not in claimed and i < len(rest):
                value, i = rest[i], i + 1  # a global option's value, not a command
            if name in _VALUED and name not in claimed:
                between.append((_VALUED[name], value))
            elif token in _FLAGS and token not in claimed:
                between.append((_FLAGS[token], None))
            else:
                kept.append(token)
        if i >= len(rest) or rest[i] == "--":
            if command is not group and command.invoke_without_command:
                del between[found:]  # `keys -a coder`: the subgroup runs itself
                return claimed, mark, [*kept[:mark], *rest[start:]], between
            return None
        sub = command.get_command(ctx, rest[i])
        if sub is None:
            return None  # click reports the unknown command
        command = sub
        claimed.update(_claimed(command, ctx))
        kept.append(rest[i])
        i += 1
    return claimed, len(kept), [*kept, *rest[i:]], between


def hoist_global_options(group: click.Group, ctx: click.Context, args: list[str]) -> list[str]:
    """``args`` with the global options after the subcommand moved before it.

    Raises :class:`click.UsageError` when one global option is given two different
    values (before and after the subcommand, or twice after it).
    """
    seen: dict[str, str] = {}
    front: list[str] = []
    i = 0
    while i < len(args):  # the group's own options, before the subcommand
        name, value = _split(args[i])
        if name in _VALUED:
            if value is None and i + 1 < len(args):
                value, i = args[i + 1], i + 1
            if value is not None:
                _remember(seen, _VALUED[name], value)
        elif not args[i].startswith("-") or args[i] in ("-", "--"):
            break
        i += 1
    if i >= len(args) or args[i] == "--":
        return args
    front, rest = args[:i], args[i:]
    chain = _command_chain(group, ctx, rest)
    if chain is None:
        return args
    claimed, start, rest, between = chain
    moved: list[str] = []
    kept = rest[:start]
    tail: list[str] = []  # options the subcommand reads itself, given before its name
    for option, value in between:
        if option in claimed and value is not None:
            tail.extend([option, value])
        elif value is None:
            moved.append(option)
        elif _remember(seen, option, value):
            moved.extend([option, value])
    j = start
    while j < len(rest):
        token = rest[j]
        if token == "--":
            kept.extend(rest[j:])
            break
        name, value = _split(token)
        if token in claimed:
            kept.append(token)
            if claimed[token] and j + 1 < len(rest):  # its value, whatever it looks like
                kept.append(rest[j + 1])
                j += 1
        elif name in claimed or not token.startswith("-"):
            kept.append(token)
        elif name in _VALUED:
            if value is None:
                if j + 1 >= len(rest):
                    kept.append(token)  # click says the option needs a value
                    break
                value, j = rest[j + 1], j + 1
            if _remember(seen, _VALUED[name], value):
                moved.extend([_VALUED[name], value])
        elif token in _FLAGS:
            moved.append(_FLAGS[token])
        elif token.startswith("-v") and set(token[1:]) == {"v"}:  # -vv
            moved.extend(["--verbose"] * (len(token) - 1))
        else:
            kept.append(token)
        j += 1
    return [*front, *moved, *kept, *tail]


def _remember(seen: dict[str, str], option: str, value: str) -> bool:
    """Record ``option``'s value; False when it repeats the same value (nothing to move)."""
    before = seen.get(option)
    if before is None:
        seen[option] = value
        return True
    if before != value:
        raise click.UsageError(f"{option} is given twice with different values "
                               f"({before!r} and {value!r}); give it once")
    return False
