"""The ``walrus-mem`` command line: a thin shell over the library API.

Every command parses its arguments, calls the library, and prints the result:
a rich table or text for people, or plain JSON on stdout with ``--json``.
A :class:`~walrus_mem.errors.WalrusMemError` becomes one line on stderr and
exit code 1 (the traceback only with ``--verbose``); usage errors exit 2.
No command ever prints key material: only public fingerprints.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

import click
import platformdirs
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__
from .config import Settings
from .errors import ConfigError, KeyExists, KeyNotFound, KeyringUnavailable, WalrusMemError
from .keys import (
    MASTER_KEY_ENV,
    MasterSeed,
    NamespaceKeys,
    generate_master_seed,
    keyring_load,
    keyring_store,
    parse_ed25519_key,
    resolve_master_seed,
    write_key_file,
)

__all__ = ["cli", "main"]

CONFIG_ENV = "WALRUS_MEM_CONFIG"


def default_config_path() -> Path:
    """Where ``init`` writes the starter config and the CLI looks for one."""
    return Path(platformdirs.user_config_dir("walrus-mem", appauthor=False)) / "config.toml"


# -- state shared by all commands ---------------------------------------------


class CliState:
    """Global options, plus the settings built from them on first use."""

    def __init__(
        self,
        *,
        config: Path | None,
        data_dir: Path | None,
        namespace: str | None,
        as_json: bool,
        verbose: int,
    ) -> None:
        self.config_option = config
        self.data_dir = data_dir
        self.namespace_option = namespace
        self.as_json = as_json
        self.verbose = verbose
        self.out = make_console()
        self.err = make_console(stderr=True)
        self._settings: Settings | None = None

    @property
    def config_path(self) -> Path | None:
        """--config / WALRUS_MEM_CONFIG, else the default path if a file is there."""
        if self.config_option is not None:
            return self.config_option
        default = default_config_path()
        return default if default.is_file() else None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_path, self.data_dir)
        return self._settings

    @property
    def namespace(self) -> str:
        return self.namespace_option or self.settings.default_namespace

    def emit_json(self, data: Any) -> None:
        """Plain JSON on stdout: nothing else is printed there in --json mode."""
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))

    def note(self, text: str) -> None:
        """Human-oriented remark on stderr (keeps stdout clean for pipes and --json)."""
        self.err.print(text)


def make_console(*, stderr: bool = False) -> Console:
    """A rich console that degrades to plain, unwrapped text when not on a terminal."""
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        # Pipes and files: no colour codes (rich's default), no hard wrapping of
        # paths and ids, and tables wide enough not to squeeze columns.
        console = Console(stderr=stderr, highlight=False, soft_wrap=True,
                          width=max(console.width, 160))
    return console


def load_settings(config: Path | None, data_dir: Path | None) -> Settings:
    """Build Settings from the CLI's options (which win over env and file)."""
    kwargs: dict[str, Any] = {}
    if config is not None:
        kwargs["config_file"] = config
    if data_dir is not None:
        kwargs["data_dir"] = data_dir
    try:
        return Settings.load(**kwargs)
    except ConfigError as exc:
        if type(exc) is not ConfigError or config is None or str(config) in str(exc):
            raise  # subclasses (PlaceholderError, ...) already say where
        raise ConfigError(f"{exc} (config file {config})") from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{text} [{type(exc).__name__}]"


class WalrusMemGroup(click.Group):
    """Turns library errors into one clear stderr line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except WalrusMemError as exc:
            state = ctx.obj if isinstance(ctx.obj, CliState) else None
            if state is not None and state.verbose:
                traceback.print_exc(file=sys.stderr)
            click.echo(f"walrus-mem: error: {_one_line(exc)}", err=True)
            ctx.exit(1)


pass_state = click.make_pass_decorator(CliState)


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
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
@click.option("-v", "--verbose", count=True, help="Log more (-vv for debug); show tracebacks.")
@click.version_option(__version__, prog_name="walrus-mem")
@click.pass_context
def cli(
    ctx: click.Context,
    config: Path | None,
    data_dir: Path | None,
    namespace: str | None,
    as_json: bool,
    verbose: int,
) -> None:
    """Encrypted long-term memory for AI agents, stored on Walrus.

    Facts are sealed on this machine with per-namespace keys; only ciphertext
    leaves it. Recall is local and by meaning.
    """
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG if verbose > 1 else logging.INFO,
            stream=sys.stderr,
            format="%(levelname)s %(name)s: %(message)s",
        )
    ctx.obj = CliState(
        config=config, data_dir=data_dir, namespace=namespace, as_json=as_json, verbose=verbose
    )


# -- keys ----------------------------------------------------------------------


def _resolve_master(settings: Settings) -> tuple[MasterSeed, str]:
    config_value = settings.master_key.get_secret_value() if settings.master_key else None
    return resolve_master_seed(
        config_value=config_value,
        key_file=settings.resolved_key_file,
        use_keyring=settings.use_keyring,
    )


def _namespace_keys(settings: Settings, master: MasterSeed | None) -> list[dict[str, Any]]:
    """Public identity of the default namespace and every configured agent."""
    rows: list[dict[str, Any]] = []
    if master is not None:
        ns = settings.default_namespace
        rows.append(_key_row(None, NamespaceKeys.derive(master, ns)))
    for name, agent in sorted(settings.agents.items()):
        ns = agent.namespace or name
        if agent.key is not None:
            seed = parse_ed25519_key(agent.key.get_secret_value())
            rows.append(_key_row(name, NamespaceKeys.from_agent_key(seed, ns)))
        elif master is not None:
            rows.append(_key_row(name, NamespaceKeys.derive(master, ns)))
        else:
            rows.append({"agent": name, "namespace": ns, "mode": "derived", "fingerprint": None,
                         "verify_key": None})
    return rows


def _key_row(agent: str | None, keys: NamespaceKeys) -> dict[str, Any]:
    return {
        "agent": agent,
        "namespace": keys.namespace,
        "mode": "independent" if keys.independent else "derived",
        "fingerprint": keys.fingerprint,
        "verify_key": keys.verify_key.hex(),  # public
    }


@cli.command()
@click.option(
    "--force", is_flag=True, help="Replace an existing master key (its memories become unreadable)."
)
@click.option(
    "--store",
    type=click.Choice(["auto", "keyring", "file"]),
    default="auto",
    show_default=True,
    help="Where to keep the master key: OS keyring, 0600 key file, or auto (keyring, else file).",
)
@pass_state
def init(state: CliState, force: bool, store: str) -> None:
    """Create a master key and a starter config; print the public fingerprints.

    The key goes to the OS keyring, or to a 0600 key file when no keyring
    backend works. An existing key is never replaced without --force; an
    existing config file is never overwritten.
    """
    # The starter config holds no secret, so writing it first is harmless and
    # lets the settings below (key file location, data dir) come from it.
    config_path = state.config_option or default_config_path()
    config_written = _write_starter_config(config_path, state.data_dir)
    settings = state.settings
    key_file = settings.resolved_key_file
    _refuse_existing_key(settings, force=force)

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
    if state.as_json:
        state.emit_json(
            {
                "key_store": stored_in,
                "key_file": str(key_file) if stored_in == "key_file" else None,
                "reason": reason or None,
                "config_file": str(config_path),
                "config_written": config_written,
                "fingerprints": fingerprints,
                "shadowed_by": shadowed_by,
            }
        )
        return
    out = state.out
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
    if shadowed_by is not None:
        state.note(
            f"[yellow]warning:[/yellow] the new key is not the active one: a master key from "
            f"{shadowed_by} takes precedence (config > {MASTER_KEY_ENV} > keyring > key file)."
        )


def _refuse_existing_key(settings: Settings, *, force: bool) -> None:
    if force:
        return
    key_file = settings.resolved_key_file
    if key_file.exists():
        raise KeyExists(f"a key file already exists at {key_file}; pass --force to replace it")
    if settings.use_keyring:
        try:
            existing = keyring_load()
        except KeyringUnavailable:
            existing = None
        if existing is not None:
            raise KeyExists(
                "a master key is already stored in the OS keyring "
                f"(fingerprint {existing.fingerprint}); pass --force to replace it"
            )


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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STARTER_CONFIG.format(data_dir_line=data_dir_line), encoding="utf-8")
    return True


@cli.group(invoke_without_command=True)
@pass_state
@click.pass_context
def keys(ctx: click.Context, state: CliState) -> None:
    """List namespaces and agents with their public key fingerprints."""
    if ctx.invoked_subcommand is not None:
        return
    settings = state.settings
    master, source = _master_or_none(settings)
    rows = _namespace_keys(settings, master)
    if state.as_json:
        state.emit_json({"master_key_source": source, "namespaces": rows})
        return
    state.out.print(f"master key source: {source or 'none found'}")
    table = Table("namespace", "agent", "mode", "fingerprint")
    for row in rows:
        table.add_row(row["namespace"], row["agent"] or "", row["mode"], row["fingerprint"] or "-")
    state.out.print(table)


def _master_or_none(settings: Settings) -> tuple[MasterSeed | None, str | None]:
    try:
        return _resolve_master(settings)
    except KeyNotFound:
        return None, None


@keys.command("export-public")
@pass_state
def keys_export_public(state: CliState) -> None:
    """Print every namespace's public verify key and fingerprint as JSON."""
    master, _ = _master_or_none(state.settings)
    rows = _namespace_keys(state.settings, master)
    state.emit_json({"namespaces": rows})


# -- doctor ------------------------------------------------------------------------


@cli.command()
@click.option("--no-model", is_flag=True, help="Skip loading the embedding model (saves ~7 s).")
@pass_state
def doctor(state: CliState, no_model: bool) -> None:
    """Check config, ${VAR}s, keys, the model, storage and the local index; say how to fix.

    Exit code 1 when any check fails.
    """
    from .doctor import run_checks

    checks = run_checks(state.config_path, data_dir=state.data_dir, model=not no_model)
    failed = [c for c in checks if not c.ok]
    if state.as_json:
        state.emit_json({"ok": not failed, "checks": [c.as_dict() for c in checks]})
    else:
        styles = {"ok": "[green] OK [/green]", "warn": "[yellow]WARN[/yellow]",
                  "fail": "[red]FAIL[/red]"}
        for check in checks:
            state.out.print(f"{styles[check.status]}  {escape(check.name)}: {escape(check.detail)}")
            if check.fix and check.status != "ok":
                state.out.print(f"      fix: {escape(check.fix)}")
        state.out.print(
            f"{len(failed)} problem(s) found." if failed else "Everything looks fine."
        )
    if failed:
        sys.exit(1)


# -- tools: demo, relayer ----------------------------------------------------------


@cli.command()
@pass_state
def demo(state: CliState) -> None:
    """Run the offline end-to-end demo; exit 1 if any claim does not hold."""
    from .demo import run_demo

    if not run_demo(state.out):
        sys.exit(1)


@cli.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                      "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def relayer(args: tuple[str, ...]) -> None:
    """Run relayer_mock, a local Walrus publisher/aggregator (see docs/relayer-mock.md).

    All arguments go to relayer_mock (try `walrus-mem relayer --help`).
    """
    code = subprocess.call([sys.executable, "-m", "relayer_mock", *args])
    sys.exit(code)


def main() -> NoReturn:
    """Console-script entry point."""
    cli.main(prog_name="walrus-mem")
    raise SystemExit(0)  # pragma: no cover - click.main always exits
