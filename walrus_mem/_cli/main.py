"""The ``walrus-mem`` command line: a thin shell over the library API.

Every command parses its arguments, calls the library, and prints the result:
a rich table or text for people, or plain JSON on stdout with ``--json``.
A :class:`~walrus_mem.errors.WalrusMemError` becomes one line on stderr and
exit code 1 (the traceback only with ``--verbose``); usage errors exit 2, Ctrl-C 130.
No command ever prints key material: only public fingerprints.

This module is the root group (global options, error handling, lazily mounted
commands), ``init`` and ``demo``; the other commands live in ``cmd_*`` modules by
group, and what they share (CliState, parsing, output) in ``common``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.markup import escape
from rich.table import Table

from .. import __version__
from .._keys.hardening import disable_core_dumps
from .._keys.keystore import key_file_in_use
from .._keys.replace import confirm_replacement, keep_old_keys, stored_keys
from .._local.private_dirs import make_private_dirs
from ..config import CONFIG_ENV, default_config_path, named_config_file
from ..errors import KeyringUnavailable, WalrusMemError
from ..keys import MASTER_KEY_ENV, generate_master_seed, keyring_store, write_key_file
from .cmd_doctor import doctor, repair
from .cmd_import_export import export, import_
from .cmd_keys import _master_or_none, _namespace_keys, keys
from .cmd_memory import (
    analyze,
    compact,
    consolidate_cmd,
    forget,
    forget_all,
    get,
    history,
    list_,
    recall,
    reindex,
    remember,
    stats,
    update,
)
from .cmd_share import accept, share
from .cmd_sync import expiring, extend, pull, restore, sync
from .common import CliState, pass_state
from .envelope import SERVER_COMMANDS, CommandFailed, cli_words, error_hint, print_envelope
from .global_options import GLOBAL_HELP, hoist_global_options

__all__ = ["cli", "main"]


#: Commands implemented elsewhere, imported only when used (keeps startup fast).
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "relayer": ("relayer_mock.cli", "relayer_command"),
    "mcp": ("walrus_mem.mcp_server", "mcp_command"),
}
#: What to install when a lazy command's module cannot be imported.
LAZY_EXTRAS = {"mcp": "pip install 'walrus-mem[mcp]'"}
#: Their one-line help, so `walrus-mem --help` imports neither (the MCP SDK takes a second).
LAZY_SHORT_HELP = {
    "mcp": "Serve the memory tools over MCP (stdio) for Claude Desktop-style hosts.",
    "relayer": "Serve a local, persistent, fault-injecting Walrus publisher and aggregator.",
}


class WalrusMemGroup(click.Group):
    """Turns library errors into one clear stderr line and exit code 1 (Ctrl-C: 130)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # global options may follow the subcommand (global_options.py); not while completing
        if not ctx.resilient_parsing:
            args = hoist_global_options(self, ctx, list(args))
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own listing, except that a lazy command's module is not imported for it
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            if name in LAZY_COMMANDS and name not in self.commands:
                command: click.Command | None = click.Command(name, help=LAZY_SHORT_HELP[name])
            else:
                command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
        formatter.write_paragraph()
        formatter.write_text(GLOBAL_HELP)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            module_name, attr = LAZY_COMMANDS[cmd_name]
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                return _unavailable(cmd_name, exc)
            command = getattr(module, attr)
            if not isinstance(command, click.Command):  # pragma: no cover - wiring bug
                raise TypeError(f"{module_name}.{attr} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        named = _command_named(ctx)  # before click consumes the arguments
        try:
            result = super().invoke(ctx)  # runs cli() first, which sets ctx.obj
        except WalrusMemError as exc:
            state = _state(ctx)
            if state is not None and state.verbose:
                traceback.print_exc(file=sys.stderr)
            message = cli_words(" ".join(str(exc).split()) or type(exc).__name__)
            click.echo(f"walrus-mem: error: {message} [{type(exc).__name__}]", err=True)
            _fail(ctx, named, type(exc).__name__, message,
                  error_hint(type(exc).__name__, type(exc).__mro__), 1)
        except CommandFailed as exc:  # the report is printed (or is the envelope's data)
            if not _json_mode(ctx) and exc.kind == "Interrupted":
                click.echo(f"walrus-mem: {exc.message}", err=True)
            _fail(ctx, named, exc.kind, exc.message, exc.hint or error_hint(exc.kind),
                  exc.exit_code)
        except click.ClickException as exc:
            if not _json_mode(ctx):
                raise
            exc.show()  # the usual usage text on stderr
            kind = "UsageError" if isinstance(exc, click.UsageError) else type(exc).__name__
            _fail(ctx, named, kind, cli_words(exc.format_message()), error_hint(kind),
                  exc.exit_code)
        except click.Abort:  # a declined confirmation
            if not _json_mode(ctx):
                raise
            click.echo("Aborted!", err=True)
            _fail(ctx, named, "Aborted", "not confirmed", None, 1)
        except KeyboardInterrupt:  # Ctrl-C: a shell's 130, not click's "Aborted!" and 1
            click.echo("walrus-mem: interrupted", err=True)
            _fail(ctx, named, "Interrupted", "interrupted", error_hint("Interrupted"), 130)
        state = _state(ctx)
        command = (state.command if state is not None else None) or named
        if state is not None and state.as_json and \
                command.partition(" ")[0] not in SERVER_COMMANDS:
            print_envelope(command, data=state.json_data, warnings=state.warnings)
        return result


def _state(ctx: click.Context) -> CliState | None:
    return ctx.obj if isinstance(ctx.obj, CliState) else None


def _json_mode(ctx: click.Context) -> bool:
    state = _state(ctx)
    if state is not None:
        return state.as_json
    return bool(ctx.params.get("as_json"))  # an unknown command fails before cli() runs


def _fail(ctx: click.Context, named: str, kind: str, message: str, hint: str | None,
          code: int) -> NoReturn:
    """Exit ``code``; with --json, after printing the error envelope on stdout."""
    if _json_mode(ctx):
        state = _state(ctx)
        command = state.command if state is not None else None
        if command is None or named.startswith(command):
            command = named  # it failed before (or while) parsing its own arguments
        if hint and "COMMAND" in hint:
            hint = (hint.replace("COMMAND", command) if command else
                    "`walrus-mem --help` lists the commands")
        if command.partition(" ")[0] not in SERVER_COMMANDS:
            print_envelope(command, data=state.json_data if state is not None else None,
                           warnings=state.warnings if state is not None else [],
                           error={"type": kind, "message": message, "hint": hint})
    ctx.exit(code)


def _command_named(ctx: click.Context) -> str:
    """The command the arguments name (``keys export``), for an error before its
    callback ran; "" when they name none."""
    args: list[str] = [*getattr(ctx, "_protected_args", []), *ctx.args]
    words = [a for a in args if not a.startswith("-")][:2]
    group = ctx.command
    if not words or not isinstance(group, click.Group) or \
            words[0] not in [*group.commands, *LAZY_COMMANDS]:
        return ""
    sub = group.commands.get(words[0])
    if isinstance(sub, click.Group) and len(words) == 2 and words[1] in sub.commands:
        return " ".join(words)
    return words[0]


def _unavailable(name: str, exc: ImportError) -> click.Command:
    """Stand-in for a lazy command whose optional dependency is missing."""
    hint = LAZY_EXTRAS.get(name, "reinstall walrus-mem")
    message = f"`walrus-mem {name}` needs a package that is not installed ({exc.name}): {hint}"

    def callback() -> None:
        raise click.ClickException(message)

    return click.Command(name, callback=callback, help=f"(unavailable: {hint})")


@click.group(cls=WalrusMemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar=CONFIG_ENV,
    help=f"TOML config file [env {CONFIG_ENV}; default {default_config_path()} if present].",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Data directory (catalog, index, embedded relayer) [env WALRUS_MEM_DATA_DIR].",
)
@click.option("-n", "--namespace", help="Namespace to work in [default: the configured default].")
@click.option("-a", "--agent", help="Act as this configured agent ([agents.<name>]): its namespace "
              "and key; only its ${VAR}s are resolved.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
@click.option("-v", "--verbose", count=True, help="Log more (-vv for debug); show tracebacks.")
@click.version_option(__version__, prog_name="walrus-mem")
@click.pass_context
def cli(
    ctx: click.Context,
    config: Path | None,
    data_dir: Path | None,
    namespace: str | None,
    agent: str | None,
    as_json: bool,
    verbose: int,
) -> None:
    """Encrypted long-term memory for AI agents, stored on Walrus.

    Facts are sealed on this machine with per-namespace keys; only ciphertext
    leaves it. Recall is local and by meaning.
    """
    disable_core_dumps()  # this process may hold keys and plaintext (hardening.py)
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG if verbose > 1 else logging.INFO,
            stream=sys.stderr,
            format="%(levelname)s %(name)s: %(message)s",
        )
    ctx.obj = CliState(
        config=config, data_dir=data_dir, namespace=namespace, as_json=as_json, verbose=verbose
    )
    if namespace is not None and not ctx.resilient_parsing:
        from ..keys import validate_namespace

        validate_namespace(namespace)  # -n "Bad Name!" fails every command, not only some
    ctx.obj.agent_option = agent


# -- init ------------------------------------------------------------------------


@cli.command()
@click.option(
    "--replace-key", "replace_key", metavar="FINGERPRINT",
    help="Replace the stored master key with this fingerprint (kept as "
         "master.key.<fingerprint>.bak next to the key file; back it up first).",
)
@click.option("--force", is_flag=True, hidden=True,
              help="No longer replaces a key: use --replace-key FINGERPRINT.")
@click.option(
    "--store",
    type=click.Choice(["auto", "keyring", "file"]),
    default="auto",
    show_default=True,
    help="Where to keep the master key: OS keyring, 0600 key file, or auto (keyring, else file).",
)
@pass_state
def init(state: CliState, replace_key: str | None, force: bool, store: str) -> None:
    """Create a master key and a starter config; print the public fingerprints.

    The key goes to the OS keyring, or to a 0600 key file when no keyring
    backend works. An existing key is replaced only with --replace-key and its
    fingerprint, and is kept next to the key file; an existing config file is
    never overwritten.
    """
    del force  # accepted so old scripts get the --replace-key advice, not a usage error
    # The starter config holds no secret, so writing it first is harmless and
    # lets the settings below (key file location, data dir) come from it.
    # where every later command will look (a file that is there is kept)
    config_path = state.config_option or named_config_file() or default_config_path()
    config_written = _write_starter_config(config_path, state.data_dir)
    settings = state.settings
    key_file = key_file_in_use(settings)
    old_keys = stored_keys(key_file, use_keyring=settings.use_keyring)
    confirm_replacement(old_keys, replace_key, retry="walrus-mem init")
    kept = keep_old_keys(key_file, old_keys)
    force = bool(old_keys)

    seed = generate_master_seed()
    stored_in, reason = "keyring", ""
    if store == "file" or not settings.use_keyring:
        stored_in = "key_file"
        reason = "requested with --store file" if store == "file" else "use_keyring is false"
    else:
        try:
            keyring_store(seed, force=force)
        except KeyringUnavailable as exc:
            if store == "keyring":
                raise
            stored_in, reason = "key_file", str(exc)
    if stored_in == "key_file":
        write_key_file(key_file, seed, force=force)

    fingerprints = {"master": seed.fingerprint}
    for row in _namespace_keys(settings, seed):
        fingerprints[row["namespace"]] = row["fingerprint"]

    # Whatever wins the key precedence is what every later command uses.
    active_seed, active_source = _master_or_none(settings)
    shadowed_by = active_source if active_seed != seed else None
    shadowed = (None if shadowed_by is None else
                f"the new key is not the active one: a master key from {shadowed_by} takes "
                f"precedence (config > {MASTER_KEY_ENV} > keyring > key file).")
    if state.as_json:
        if shadowed:
            state.warn(shadowed)
        state.emit_json(
            {
                "key_store": stored_in,
                "key_file": str(key_file) if stored_in == "key_file" else None,
                "reason": reason or None,
                "config_file": str(config_path),
                "config_written": config_written,
                "fingerprints": fingerprints,
                "shadowed_by": shadowed_by,
                "replaced_key_kept_at": [str(path) for path in kept],
            }
        )
        return
    out = state.out
    for path in kept:
        out.print(f"The replaced master key is kept in {escape(str(path))} (mode 0600).")
    if stored_in == "keyring":
        out.print("Master key stored in the OS keyring (service [bold]walrus-mem[/bold]).")
    else:
        out.print(f"Master key written to [bold]{escape(str(key_file))}[/bold] (mode 0600).")
        out.print(f"  why not the keyring: {escape(reason)}")
    if config_written:
        out.print(f"Starter config written to {escape(str(config_path))}")
    else:
        out.print(f"Kept the existing config {escape(str(config_path))}")
    table = Table("namespace", "fingerprint", box=None, title="Public key fingerprints",
                  title_justify="left")
    for name, fpr in fingerprints.items():
        table.add_row(name, fpr)
    out.print(table)
    out.print(
        "Back up the master key now: whoever has it can read every derived namespace, "
        "and without it nothing on Walrus can be restored."
    )
    if shadowed:
        state.warn(shadowed)


STARTER_CONFIG = """\
# walrus-mem configuration (TOML). Every string may use ${{VAR}} placeholders.
# Precedence: command-line options > WALRUS_MEM_* environment variables > this file > defaults.
# See docs/configuration.md for every setting.
{data_dir_line}
default_namespace = "default"

# No publisher/aggregator configured = an embedded local relayer in the data dir (offline).
# publisher_url = "https://publisher.walrus-testnet.walrus.space"
# aggregator_urls = ["https://aggregator.walrus-testnet.walrus.space"]
epochs = 5

# The master key is NOT stored here. It lives in the OS keyring or a 0600 key file
# (walrus-mem init), or comes from WALRUS_MEM_MASTER_KEY.

# One table per agent. Without `key`, the agent's namespace key is derived from
# the master key; with `key = "${{RESEARCHER_KEY}}"` it uses its own Ed25519 key.
# [agents.researcher]
# namespace = "researcher"
# max_recall_results = 5
"""


def _write_starter_config(path: Path, data_dir: Path | None) -> bool:
    if path.exists():
        return False
    data_dir_line = (
        f"data_dir = {json.dumps(str(data_dir))}" if data_dir is not None
        else "# data_dir = \"~/.local/share/walrus-mem\""
    )
    make_private_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # owner only, like keys
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(STARTER_CONFIG.format(data_dir_line=data_dir_line))
    return True


# -- tools: demo (relayer and mcp are LAZY_COMMANDS) ----------------------------


@cli.command()
@pass_state
def demo(state: CliState) -> None:
    """Run the offline end-to-end demo; exit 1 if any claim does not hold."""
    from .demo import run_demo

    # With --json the narration goes to stderr and stdout holds only the verdict.
    ok = run_demo(state.err if state.as_json else state.out)
    if state.as_json:
        state.emit_json({"claims_held": ok})
    if not ok:
        raise CommandFailed("a claim of the demo did not hold (see its narration on stderr)",
                            kind="ClaimFailed")


# The groups and commands of the cli_* modules (--help lists every command by name).
for _command in (keys, remember, recall, get, list_, update, forget, forget_all, consolidate_cmd,
                 history, stats, analyze, compact, reindex, import_, export, restore, pull,
                 sync, expiring, extend, share, accept, doctor, repair):
    _command.epilog = _command.epilog or GLOBAL_HELP  # each command's --help says it too
    cli.add_command(_command)


def main() -> NoReturn:
    """Console-script entry point."""
    cli.main(prog_name="walrus-mem")
    raise SystemExit(0)  # pragma: no cover - click.main always exits
