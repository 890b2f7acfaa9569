"""What every ``walrus-mem`` command shares: the global options' state, the parsing of
TEXT, metadata and filter arguments, and the output (tables, JSON, progress bars)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .._recall.embeddings import Embedder
from ..config import Settings, resolve_config_file
from ..errors import ConfigError

if TYPE_CHECKING:
    from ..memory import Memory


# -- state shared by all commands ---------------------------------------------

#: Top-level commands that only read memories: they never create a data dir (a
#: mistyped --data-dir must not leave a fresh tree behind). `keys export` is not one.
READ_COMMANDS = frozenset({"recall", "list", "get", "stats", "history", "expiring", "export"})


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
        self.agent_option: str | None = None
        #: the command being run ("recall", "keys export"), its --json data, its warnings
        self.command: str | None = None
        self.json_data: Any = None
        self.warnings: list[str] = []
        self._settings: Settings | None = None
        self._memory: Memory | None = None

    @property
    def config_path(self) -> Path | None:
        """The library's rule (config.resolve_config_file): --config / WALRUS_MEM_CONFIG
        > WALRUS_MEM_CONFIG_FILE > the default path if something is there > none."""
        return resolve_config_file(self.config_option)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_path, self.data_dir)
        return self._settings

    @property
    def namespace(self) -> str:
        if self.agent_option is not None:  # an unknown name lists the known ones
            agent = self.settings.agent(self.agent_option)
            ns = agent.namespace or self.agent_option
            if self.namespace_option not in (None, ns):
                raise click.UsageError(
                    f"--agent {self.agent_option} works in namespace {ns}, not "
                    f"{self.namespace_option}; give one of -n / --agent"
                )
            return ns
        return self.namespace_option or self.settings.default_namespace

    @property
    def scope(self) -> str | None:
        """The namespace -n or --agent names, None for every namespace: an agent's process
        (one process per agent) syncs, repairs and lists expiry of its own namespace only,
        never failing on the other agents' namespaces whose keys it does not hold."""
        if self.agent_option is not None or self.namespace_option is not None:
            return self.namespace
        return None

    @property
    def memory(self) -> Memory:
        """The Memory for these settings, opened once and closed when the command ends."""
        if self._memory is None:
            from ..memory import Memory

            context = click.get_current_context()
            top_level = context.parent is not None and context.parent.parent is None
            if top_level and context.command.name in READ_COMMANDS:
                self.namespace  # noqa: B018 - a wrong --agent / -n is the error to show first
                self.require_data_dir()
            self._memory = Memory(self.settings, embedder=embedder_override(self.settings))
            click.get_current_context().find_root().call_on_close(self._memory.close)
        return self._memory

    def require_data_dir(self) -> None:
        """Raise unless the data dir exists: what a read command checks before opening
        a Memory (which would create it)."""
        data_dir = self.settings.data_dir
        if not data_dir.is_dir():
            raise ConfigError(
                f"no data dir at {data_dir}: nothing was remembered there, and a read command "
                "creates none (check --data-dir, WALRUS_MEM_DATA_DIR or data_dir in the config)"
            )

    @property
    def piped(self) -> bool:
        """stdout is not a terminal: print plain lines (TSV), not tables."""
        return not self.out.is_terminal

    def emit_lines(self, lines: list[str]) -> None:
        """Plain lines on stdout, as they are (no rich markup, wrapping or colour)."""
        for line in lines:
            click.echo(line)

    def emit_json(self, data: Any) -> None:
        """The command's result. With --json it becomes the envelope's ``data``, printed
        when the command ends (envelope.py); without (``keys export-public``, which
        always prints JSON), plain JSON on stdout now."""
        if self.as_json:
            self.json_data = data
        else:
            click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))

    def note(self, text: str) -> None:
        """Human-oriented remark on stderr (keeps stdout clean for pipes and --json)."""
        self.err.print(text)

    def warn(self, text: str) -> None:
        """A warning: on stderr, and in the --json envelope's ``warnings``. ``text`` is
        plain (no rich markup)."""
        from .envelope import cli_words

        text = cli_words(text)
        self.warnings.append(text)
        self.err.print(f"[yellow]warning:[/yellow] {escape(text)}")


def said(text: str) -> str:
    """A library message for a rich console: in CLI words (envelope.cli_words), escaped."""
    from .envelope import cli_words

    return escape(cli_words(text))


def embedder_override(settings: Settings) -> Embedder | None:
    """Hidden test switch: ``embedding_model = "test-hash"`` (or ``test-hash-DIM``) uses
    the deterministic :class:`~walrus_mem.testing.HashEmbedder` instead of a real model."""
    from .._recall.embeddings import make_embedder, test_embedder_dim

    if test_embedder_dim(settings.embedding_model) is None:
        return None
    return make_embedder(settings.embedding_model)


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



def pass_state(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Pass the CliState as the first argument, and record which command runs (the
    envelope's ``command``: ``recall``, ``keys export``)."""
    from functools import update_wrapper

    def new_func(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        state = ctx.find_object(CliState)
        if state is None:  # pragma: no cover - the root group always sets it
            raise RuntimeError("walrus-mem: no CLI state")
        names, at = [], ctx
        while at.parent is not None:
            names.append(at.info_name or at.command.name or "")
            at = at.parent
        state.command = " ".join(reversed(names))
        return ctx.invoke(fn, state, *args, **kwargs)

    return update_wrapper(new_func, fn)



# -- parsing helpers ---------------------------------------------------------------


def _read_text_args(words: tuple[str, ...]) -> str:
    """TEXT words joined by spaces, or all of stdin for a single ``-``."""
    if words == ("-",):
        return sys.stdin.read()
    return " ".join(words)


def _parse_pairs(pairs: tuple[str, ...], what: str) -> dict[str, Any]:
    """``KEY=VALUE`` (a string) or ``KEY:=JSON`` (a typed value), like httpie."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if pair.partition("=")[0].endswith(":"):  # KEY:=JSON
            key, _, raw = pair.partition(":=")
            try:
                value: Any = json.loads(raw)
            except ValueError as exc:
                raise click.BadParameter(f"{pair!r}: the value after := is not JSON",
                                         param_hint=what) from exc
        else:
            key, sep, value = pair.partition("=")
            if not sep:
                raise click.BadParameter(f"{pair!r}: expected KEY=VALUE or KEY:=JSON",
                                         param_hint=what)
        if not key:
            raise click.BadParameter(f"{pair!r}: empty key", param_hint=what)
        out[key] = value
    return out


def _metadata(pairs: tuple[str, ...], as_json: str | None) -> dict[str, Any] | None:
    data: dict[str, Any] = {}
    if as_json is not None:
        try:
            loaded = json.loads(as_json)
        except ValueError as exc:
            raise click.BadParameter("not valid JSON", param_hint="--metadata-json") from exc
        if not isinstance(loaded, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--metadata-json")
        data.update(loaded)
    data.update(_parse_pairs(pairs, "--meta"))
    return data or None


def _filters(specs: tuple[str, ...]) -> dict[str, Any] | None:
    """Each --filter is a JSON object (mem0 operators) or KEY=VALUE / KEY:=JSON; all ANDed."""
    parts: list[dict[str, Any]] = []
    for spec in specs:
        if spec.lstrip().startswith("{"):
            try:
                loaded = json.loads(spec)
            except ValueError as exc:
                raise click.BadParameter(f"{spec!r} is not valid JSON",
                                         param_hint="--filter") from exc
            if not isinstance(loaded, dict):
                raise click.BadParameter("a JSON filter must be an object", param_hint="--filter")
            parts.append(loaded)
        else:
            parts.append(_parse_pairs((spec,), "--filter"))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"AND": parts}


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json")


_META_OPTIONS = [
    click.option("-m", "--meta", "meta", multiple=True, metavar="KEY=VALUE",
                 help="Metadata entry (repeatable); KEY:=JSON for a typed value."),
    click.option("--metadata-json", metavar="JSON", help="Metadata as one JSON object."),
    click.option("-c", "--category", help="Category, e.g. identity, preference, decision."),
    click.option("-i", "--importance", type=click.FloatRange(0.0, 1.0),
                 help="Importance 0-1 (default: by category, else 0.5)."),
]


def _meta_options(fn: Any) -> Any:
    for option in reversed(_META_OPTIONS):
        fn = option(fn)
    return fn


_FILTER_OPTION = click.option(
    "-f", "--filter", "filters", multiple=True, metavar="FILTER",
    help='KEY=VALUE, KEY:=JSON, or a JSON filter like \'{"created_at": {"gte": "2026-01-01"}}\' '
         "(repeatable; all must match).",
)


# -- printing helpers --------------------------------------------------------------


def _short_time(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else ""


_TSV_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_TSV_SPECIAL = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029]")


def tsv_line(*fields: Any) -> str:
    """One tab-separated line for pipes (``cut -f2``, ``awk -F'\\t'``). Backslash, tab
    and line breaks are escaped (``\\\\ \\t \\n \\r``), other control characters (a
    stored terminal escape) as ``\\xNN`` / ``\\uNNNN``: each record is one line."""
    def escape_char(match: re.Match[str]) -> str:
        ch = match.group()
        return _TSV_ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 256
                                        else f"\\u{ord(ch):04x}")

    return "\t".join(_TSV_SPECIAL.sub(escape_char, "" if v is None else str(v))
                     for v in fields)


def _records_tsv(records: list[Any]) -> list[str]:
    """``_records_table``'s columns as TSV lines, without the header."""
    return [tsv_line(rec.id, rec.text, rec.category or "", rec.status,
                     _short_time(rec.created_at)) for rec in records]


def _records_table(records: list[Any], *, title: str | None = None) -> Table:
    table = Table("id", "text", "category", "status", "created", title=title,
                  title_justify="left")
    for rec in records:
        table.add_row(rec.id, escape(rec.text), rec.category or "", rec.status,
                      _short_time(rec.created_at))
    return table


def _print_record(state: CliState, rec: Any) -> None:
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    data = _dump(rec)
    for key, value in data.items():
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
        table.add_row(key, escape("" if shown is None else str(shown)))
    state.out.print(table)



class _progress:
    """A rich progress bar on stderr; silent when not a terminal or with --json."""

    def __init__(self, state: CliState, label: str, total: int | None) -> None:
        from rich.progress import Progress

        self._bar = Progress(console=state.err, transient=True,
                             disable=state.as_json or not state.err.is_terminal)
        self._label = label
        self._total = total

    def __enter__(self) -> Callable[..., None]:
        self._bar.start()
        task = self._bar.add_task(self._label, total=self._total)

        def advance(step: int = 0, *, done: int | None = None, total: int | None = None) -> None:
            if done is not None:
                self._bar.update(task, completed=done, total=total)
            else:
                self._bar.advance(task, step)

        return advance

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

