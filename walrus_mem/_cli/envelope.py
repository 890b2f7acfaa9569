"""The one ``--json`` envelope every ``walrus-mem`` command prints (docs/cli.md).

With ``--json``, stdout holds exactly one JSON object, whatever happened::

    {"ok": true,  "command": "recall", "data": {...}, "warnings": [], "error": null}
    {"ok": false, "command": "restore", "data": null, "warnings": [],
     "error": {"type": "InvalidHead", "message": "...", "hint": "..."}}

``ok`` is true exactly when the exit code is 0. ``data`` is the command's result
(an object or a list); a command that produced a report before failing (``doctor``
with failed checks, ``import`` with failed items, ``sync`` with errors) keeps it in
``data`` next to the ``error``. ``warnings`` are the warning lines also printed on
stderr. The servers (``mcp``, ``relayer``) print no envelope: their stdout is theirs.

Errors keep their human line on stderr as well. Their messages are in CLI words:
library errors that name a Python parameter (``manifest_blob_id``) are rewritten
with the option a user types (:func:`cli_words`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import click

__all__ = ["SERVER_COMMANDS", "CommandFailed", "cli_words", "envelope", "error_hint",
           "print_envelope"]

#: Commands whose stdout is a protocol or a log, never an envelope.
SERVER_COMMANDS: Final = frozenset({"mcp", "relayer"})


class CommandFailed(Exception):
    """A command ends with a nonzero exit after printing its report (human mode) or
    storing it as the envelope's ``data`` (--json): ``doctor``'s failed checks,
    ``import``'s failed items, an incomplete ``rotate``."""

    def __init__(self, message: str, *, kind: str = "Incomplete", exit_code: int = 1,
                 hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.exit_code = exit_code
        self.hint = hint


#: Library parameter names as a user of the CLI writes them. Applied to error
#: messages only (whole words), so a message never asks for ``manifest_blob_id``.
_CLI_WORDS: Final = {
    "manifest_blob_id": "HEAD (or --manifest)",
    "allow_stale": "--allow-stale",
    "allow_unrelated": "--allow-unrelated",
    "allow_legacy": "--legacy",
    "min_score": "--min-score",
    "include_expired": "--include-expired",
    "expires_at": "--expires-at",
    "delete_old": "--delete-old",
    "min_age": "--min-age",
    "within_epochs": "--within",
    "memory_id": "MEMORY_ID",
    "memory_ids": "MEMORY_IDS",
    "config_file": "--config",
    "confirm=True": "--yes",
    "forget_all": "forget-all",
}
_CLI_WORD_RE: Final = re.compile(
    r"(?<![\w-])(" + "|".join(re.escape(w) for w in sorted(_CLI_WORDS, key=len, reverse=True))
    + r")(?:=True)?(?![\w-])")
# the library's messages often name both: "allow_stale=True (`--allow-stale`)"
_TWICE: Final = re.compile(r"(--[a-z][a-z-]*)(?: / \1| \(`\1`\))(?![\w-])")


def cli_words(message: str) -> str:
    """``message`` with the library's parameter names replaced by the CLI's words."""
    return _TWICE.sub(r"\1", _CLI_WORD_RE.sub(lambda m: _CLI_WORDS[m.group(1)], message))


#: What to try next, by error type (the envelope's ``hint``; null when none applies).
_HINTS: Final = {
    "KeyNotFound": "run `walrus-mem init`, or set WALRUS_MEM_MASTER_KEY",
    "AccessDenied": "run `walrus-mem doctor`: the configured key is not this namespace's",
    "KeyExists": "back the key up with `walrus-mem keys export` before replacing it",
    "MemoryNotFound": "`walrus-mem list` shows the namespace's memory ids",
    "UnknownAgent": "agents are the [agents.NAME] tables of the config (`walrus-mem doctor`)",
    "PlaceholderError": "set the variable in this process's environment",
    "ConfigError": "`walrus-mem doctor` checks the config",
    "InvalidHead": "`walrus-mem sync` prints the namespace's head reference",
    "PublisherUnavailable": "`walrus-mem sync` publishes what is queued once it answers",
    "AggregatorUnavailable": "check aggregator_urls (`walrus-mem doctor`)",
    "BlobNotFound": "the blob is not on this Walrus (docs/walrus.md)",
    "RestoreIncomplete": "run `walrus-mem restore` again to resume",
    "UsageError": "`walrus-mem COMMAND --help` lists the arguments and options",
    "Interrupted": "run the command again; `walrus-mem sync` publishes what is queued",
}


def error_hint(kind: str, mro: tuple[type, ...] = ()) -> str | None:
    """The hint for an error type, or for the nearest base type that has one."""
    for name in (kind, *(cls.__name__ for cls in mro)):
        if name in _HINTS:
            return _HINTS[name]
    return None


def envelope(command: str, *, data: Any = None, warnings: list[str] | None = None,
             error: dict[str, Any] | None = None) -> dict[str, Any]:
    """The envelope as a dict (keys always present, in this order)."""
    return {"ok": error is None, "command": command, "data": data,
            "warnings": list(warnings or []), "error": error}


def print_envelope(command: str, **kwargs: Any) -> None:
    """Print the envelope on stdout: the only thing there in --json mode."""
    click.echo(json.dumps(envelope(command, **kwargs), indent=2, ensure_ascii=False,
                          default=str))
