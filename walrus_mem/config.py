"""Settings: environment (``WALRUS_MEM_*``), a TOML config file, and defaults.

Precedence for ordinary settings (first wins): arguments to ``Settings(...)``
> environment variables > the TOML config file > defaults. Every string in the
TOML file may hold ``${VAR}`` placeholders (see :mod:`walrus_mem._local.placeholders`).

Which config file is read (:func:`resolve_config_file`, the same rule for the
library and the CLI): the ``config_file`` argument (``None`` given explicitly
means *no file*) > ``WALRUS_MEM_CONFIG`` > ``WALRUS_MEM_CONFIG_FILE`` > the file
``walrus-mem init`` writes (:func:`default_config_path`) if it exists > none.
Every construction applies it: ``Settings(...)``, ``Settings.load(...)`` and
``Memory()`` alike, so a partly explicit ``Settings(data_dir=...)`` still takes
the rest from the user's config, as it takes it from the environment.

The master key is special (see :func:`walrus_mem.keys.resolve_master_seed`):
explicit argument > ``master_key`` in the config file > ``WALRUS_MEM_MASTER_KEY``
> OS keyring > key file. So ``master_key`` is *not* read from the environment
by this class; the key resolver reads the env var at its own rank.
"""

from __future__ import annotations

import os
import re
import tomllib
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from ._local.placeholders import (
    check_placeholders,
    placeholder_names,
    resolve_path_variables,
    resolve_placeholders,
    resolve_string,
)
from ._local.private_dirs import expand_path
from ._local.user_dirs import home_dir
from ._recall.ranking import (
    CLEAR_WINNER_FLOOR,
    CLEAR_WINNER_RATIO,
    DEFAULT_MIN_SCORE,
    STRONG_HIT_COSINE,
)
from ._walrus.url_secrets import redact_userinfo
from .errors import ConfigError, InvalidNamespace, PlaceholderError, UnknownAgent
from .keys import NAMESPACE_RULE, parse_ed25519_key, validate_namespace

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "AgentConfig",
    "Settings",
    "default_config_path",
    "default_key_file",
    "expand_path",
    "load_config_file",
    "resolve_config_file",
]

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
CONFIG_ENV = "WALRUS_MEM_CONFIG"
CONFIG_FILE_ENV = "WALRUS_MEM_CONFIG_FILE"  # the field's own env name; also honoured


def _default_data_dir() -> Path:
    return home_dir("data") or Path(platformdirs.user_data_dir("walrus-mem", appauthor=False))


def default_key_file() -> Path:
    """Where the master key file lives unless ``key_file`` / ``WALRUS_MEM_KEY_FILE``
    says otherwise: ``<user config dir>/walrus-mem/keys/master.key`` (platformdirs),
    e.g. ``~/.config/walrus-mem/keys/master.key`` on Linux: with the user's other
    secrets, not in a data dir that may be shared, synced or deleted as a cache."""
    return default_config_path().parent / "keys" / "master.key"


# Secret values resolved only when used: a process needs the ${VAR}s of what it opens.
_DEFERRED = re.compile(r"(?:walrus_mem\.)?(?:master_key|agents\.[^.]+\.key)")


def is_deferred(path: str) -> bool:
    return _DEFERRED.fullmatch(path) is not None


# Path settings: their ${VAR} and $VAR are expanded together, once (_TomlSource).
PATH_FIELDS: Final = ("data_dir", "key_file", "state_dir", "heads_file")
_PATHS = re.compile(r"(?:walrus_mem\.)?(?:" + "|".join(PATH_FIELDS) + ")")


class _Expanded(str):
    """A path from the config file, variables already expanded: never expanded again."""


def resolve_secret(template: SecretStr | None, where: str) -> str | None:
    """The value of a secret setting kept as written (``${VAR}`` unresolved until now).

    A PlaceholderError names the variable and ``where``, never a value.
    """
    if template is None:
        return None
    return resolve_string(template.get_secret_value(), where=where)


def default_config_path() -> Path:
    """Where ``walrus-mem init`` writes the starter config, read when nothing names
    another file: ``<user config dir>/walrus-mem/config.toml`` (platformdirs), e.g.
    ``~/.config/walrus-mem/config.toml`` on Linux; ``$WALRUS_MEM_HOME/config.toml`` when
    that is set (walrus_mem._local.user_dirs)."""
    config_dir = home_dir("config")
    if config_dir is None:
        config_dir = Path(platformdirs.user_config_dir("walrus-mem", appauthor=False))
    return config_dir / "config.toml"


def named_config_file() -> Path | None:
    """The file ``WALRUS_MEM_CONFIG`` (else ``WALRUS_MEM_CONFIG_FILE``) names, if any."""
    named = os.environ.get(CONFIG_ENV) or os.environ.get(CONFIG_FILE_ENV)
    return Path(expand_path(named)) if named else None


def _is_there(path: Path) -> bool:
    """True unless nothing is at ``path``: a directory, a dangling link or an
    unreadable file *is* there, and reading it raises a ConfigError that says why."""
    try:
        path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:  # e.g. a parent directory we may not search
        return True
    return True


def resolve_config_file(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to read: ``explicit`` > ``WALRUS_MEM_CONFIG`` >
    ``WALRUS_MEM_CONFIG_FILE`` > :func:`default_config_path` if something is there
    > ``None`` (no file). A named file must exist (reading it fails otherwise);
    only the default one is optional."""
    if explicit is not None:
        return Path(expand_path(explicit))
    named = named_config_file()
    if named is not None:
        return named
    default = default_config_path()
    return default if _is_there(default) else None


class AgentConfig(BaseModel):
    """One ``[agents.<name>]`` table of the config file."""

    # hide_input_in_errors: a ValidationError must never echo a key it rejected.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    namespace: str | None = None  # defaults to the agent's name
    # independent Ed25519 key (hex/base64), None = derived. Kept as written: a
    # ${VAR} in it is resolved only when this agent's key is needed (agent_seed).
    key: SecretStr | None = None
    auto_recall: bool = True
    auto_capture: bool = True
    max_recall_results: int = Field(default=5, ge=1, le=100)
    # recall hits scoring below this are not injected; the same calibrated default
    # as recall's own cutoff (walrus_mem._recall.ranking.DEFAULT_MIN_SCORE, docs/benchmarks.md)
    min_relevance: float = Field(default=DEFAULT_MIN_SCORE, ge=0.0, le=1.0)
    # a top hit under min_relevance is still injected when it scores at least
    # clear_winner_floor and clear_winner_ratio x the runner-up (ranking.CLEAR_WINNER_*)
    clear_winner_floor: float = Field(default=CLEAR_WINNER_FLOOR, ge=0.0, le=1.0)
    clear_winner_ratio: float = Field(default=CLEAR_WINNER_RATIO, ge=1.0)
    # first ask whether the prompt is one memory can answer at all (calibrated per
    # embedding model, walrus_mem._recall.relevance_gate); off = the per-hit cutoff only
    query_gate: bool = True
    # the gate's probability cutoff; None = the one calibrated for the embedding model
    # (relevance_gate.GATES, 0.3 for all-MiniLM-L6-v2)
    query_gate_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    # hits whose cosine to the prompt is at least this pass even when the query gate
    # rejects the prompt: never dropped by the gate alone (ranking.STRONG_HIT_COSINE); 1.0 = off
    strong_relevance: float = Field(default=STRONG_HIT_COSINE, ge=0.0, le=1.0)
    min_prompt_length: int = Field(default=10, ge=0)
    capture_max_messages: int = Field(default=10, ge=1, le=200)
    recall_token_budget: int = Field(default=800, ge=50)
    recall_strategy: Literal["always", "manual"] = "always"

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str | None) -> str | None:
        return None if v is None else validate_namespace(v)

    @field_validator("key")
    @classmethod
    def _key(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None:
            text = v.get_secret_value()
            if "${" in text:
                check_placeholders(text, where="key")  # syntax now, value when used
            else:
                parse_ed25519_key(text)  # MalformedKey names no key bytes
        return v

    def agent_seed(self, name: str = "agent") -> bytes | None:
        """This agent's independent Ed25519 seed, ``None`` for a derived agent.

        ``${VAR}`` placeholders in ``key`` are resolved here, not when the config
        is loaded: another agent's process never needs this agent's variable.
        """
        text = resolve_secret(self.key, f"agents.{name}.key")
        if text is None:
            return None
        return parse_ed25519_key(text)


def load_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML config file and resolve ``${VAR}`` placeholders in it."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    except RecursionError:  # tomllib recurses per nesting level ("a = [[[[...]]]]")
        raise ConfigError(f"config file {path} is not valid TOML: nested too deeply") from None
    try:
        resolved: dict[str, Any] = resolve_placeholders(
            data, defer=lambda at: is_deferred(at) or _PATHS.fullmatch(at) is not None)
        # Accept both a flat file and one with a [walrus_mem] table.
        if isinstance(resolved.get("walrus_mem"), dict):
            top = dict(resolved.pop("walrus_mem"))
            top.update(resolved)
            resolved = top
        for name in PATH_FIELDS:
            if isinstance(resolved.get(name), str):
                resolved[name] = _Expanded(expand_path(resolved[name], variables=partial(
                    resolve_path_variables, where=name)))
    except PlaceholderError as exc:  # say which file: it may be the implicit default one
        raise PlaceholderError(f"{exc} (config file {path})", variable=exc.variable) from exc
    return resolved


_SUI_ADDRESS = re.compile(r"0x[0-9a-fA-F]{64}")


def _http_url(url: str) -> str:
    # The message never shows the URL: it may come from a ${VAR} holding a secret.
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http(s) URL such as https://host[:port][/path]")
    return url.strip().rstrip("/")


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def placeholder_paths(path: Path | str | None) -> dict[str, list[str]]:
    """Dotted paths of the config file's values that hold ``${VAR}`` placeholders."""
    found: dict[str, list[str]] = {}
    if path is None:
        return found
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return found

    def walk(node: Any, at: tuple[Any, ...]) -> None:
        if isinstance(node, str):
            names = placeholder_names(node)
            if names:
                key = at[1:] if at[:1] == ("walrus_mem",) else at
                found[_dotted(key)] = names
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*at, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*at, i))

    walk(data, ())
    return found


_PLAIN_REASON = {"value_error": "invalid value", "assertion_error": "invalid value"}


def _field_problem(err: Any, from_vars: dict[str, list[str]]) -> str:
    """One field's problem; for a value set from a ``${VAR}``, a fixed wording that names
    the variable and never depends on its value (a validator's message may quote it)."""
    where = _dotted(err["loc"]) or "settings"
    for dotted, names in from_vars.items():
        # the value itself, something inside it, or a list/table that holds it
        if where == dotted or where.startswith(dotted + ".") or dotted.startswith(where + "."):
            reason = _PLAIN_REASON.get(err["type"], err["msg"])
            if where.endswith("namespace"):
                reason = f"not a valid namespace ({NAMESPACE_RULE})"
            variables = ", ".join(f"${{{n}}}" for n in names)
            return f"{where}: {reason} (the value comes from {variables} and is not shown)"
    return f"{where}: {err['msg']}"


class _TomlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self._data = load_config_file(path) if path else {}
        if "config_file" in self._data:
            raise ConfigError(f"config file {path}: config_file cannot be set inside a config file")
        if path:  # so Settings.config_file names the file read (its path expanded already)
            self._data["config_file"] = _Expanded(path)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


class _EnvWithoutSecrets(EnvSettingsSource):
    """Env source that leaves ``master_key`` to the key resolver's precedence."""

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        data.pop("master_key", None)
        data.pop("config_file", None)  # decided in settings_customise_sources
        return data


class Settings(BaseSettings):
    """walrus_mem configuration. Every field has a ``WALRUS_MEM_<NAME>`` env var.

    **Usage**::

        Settings()                                   # env + config file + defaults
        Settings(data_dir="~/agent-mem")             # explicit values win
        Settings(config_file="walrus-mem.toml")      # or WALRUS_MEM_CONFIG
        Settings(config_file=None)                   # no config file at all
        Settings.load(...)                           # same, errors as ConfigError

    Without a ``config_file`` argument the file comes from
    :func:`resolve_config_file` (env var, else the ``walrus-mem init`` file if
    it exists), for ``Settings(...)`` as for ``Settings.load(...)``.
    """

    model_config = SettingsConfigDict(
        env_prefix="WALRUS_MEM_", extra="forbid", validate_default=True, hide_input_in_errors=True
    )

    config_file: Path | None = None
    data_dir: Path = Field(default_factory=_default_data_dir)
    publisher_url: str | None = None
    aggregator_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    publisher_token: SecretStr | None = None
    # Walrus roles and credentials (docs/walrus.md): extra publishers tried after
    # publisher_url; a command printing one fresh token per request (JWT publishers
    # accept each token once); whether the publisher URLs also serve reads (a
    # `walrus daemon`; a `walrus publisher` does not).
    publisher_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    publisher_token_command: str | None = None
    publisher_serves_reads: bool = False
    # relayer_mock's admin token (its /_mock/ routes: forget deletes blobs there, the expiry
    # clock reads its epoch); sent only when set, to publisher_url (else the first aggregator)
    mock_admin_token: SecretStr | None = None
    # read each publish back before trusting it: none / sample (one fact per stored
    # blob or quilt) / all (docs/walrus.md#verified-publishes)
    verify_publish: Literal["none", "sample", "all"] = "sample"
    master_key: SecretStr | None = None  # kept as written; see master_key_value()
    key_file: Path | None = None  # default: default_key_file()
    use_keyring: bool = True
    default_namespace: str = "default"
    epochs: int = Field(default=5, ge=1, le=53)
    permanent: bool = False
    send_object_to: str | None = None
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    embedding_batch_size: int = Field(default=64, ge=1)
    # Runtime and thread policy of the embedder (see walrus_mem._recall.embeddings).
    embedding_backend: Literal["auto", "numpy", "onnx", "torch"] = "auto"
    embedding_threads: int = Field(default=1, ge=0, le=256)
    max_fact_bytes: int = Field(default=64 * 1024, ge=256)
    # seconds a store may take, retries included (Walrus: 30 s or more for an upload);
    # the read-back that verifies it has its own budget (docs/walrus.md, deadlines)
    publish_deadline: float = Field(default=30.0, gt=0)
    read_back_deadline: float = Field(default=30.0, gt=0)
    # computes a blob's id offline (e.g. "walrus blob-id --n-shards 1000"; the file is
    # appended): a store whose answer was lost is then checked and adopted, not paid twice
    blob_id_command: str | None = None
    # the Walrus system object the endpoints must serve (testnet/mainnet ids are in the
    # Walrus repo's setup/client_config_*.yaml); a change is a change of network, whose
    # lost blobs sync stores again (docs/walrus.md#network-resets-and-network-changes)
    walrus_system_object: str | None = None
    # the publisher's Prometheus endpoint (`walrus publisher --metrics-address`, default
    # 127.0.0.1:27182; `/metrics`): its walrus_contract_info gauge names the system object
    network_metrics_url: str | None = None
    # prints the network's epoch as `walrus info epoch --json` does (run without a shell):
    # read instead of a probe store (63 storage units) where the epoch must be asked
    network_info_command: str | None = None
    # seconds a loss seen only as 404s (no epoch back, no system object changed) must last
    # before sync stores the memories again: one aggregator that answers 404 reads the same
    # (docs/walrus.md#network-resets-and-network-changes); 0 follows it at once
    network_loss_confirm_after: float = Field(default=600.0, ge=0)
    # the largest request a publisher takes (public ones: 10 MiB); quilts are sized under
    # it, and a smaller cap learned from a 413 is kept in the data dir (docs/walrus.md)
    publisher_max_request_bytes: int = Field(default=10 * 1024 * 1024, ge=64 * 1024)
    # "now": each remember / remember_many / update publishes at once (a single fact pays
    # a whole blob, 63 storage units); "sync": writes stay queued (readable here) and
    # sync() publishes them together, in the quilts that cost the fewest units
    publish_writes: Literal["now", "sync"] = "now"
    read_deadline: float = Field(default=30.0, gt=0)
    request_timeout: float = Field(default=10.0, gt=0)
    min_score: float = Field(default=0.0, ge=0.0)
    manifest_every: int = Field(default=200, ge=1)
    # Walrus epoch length for the expiry clock (mainnet 1209600, testnet 86400); None: learned
    epoch_seconds: float | None = Field(default=None, gt=0)
    # sync re-publishes memories whose blobs end within this many epochs
    renew_margin_epochs: int = Field(default=1, ge=0, le=52)
    # the catalog keeps every published memory's sealed copy even with the embedded relayer,
    # whose folder holds the same bytes (by default it reads them from there: _catalog/held.py)
    catalog_keeps_sealed: bool = False
    heads_file: Path | None = None  # shared file of namespace heads (docs/sync.md)
    # per-user copy of every data dir's seen heads, outside the data dirs (heads_mirror.py);
    # None: the platform's user state dir, e.g. ~/.local/state/walrus-mem
    state_dir: Path | None = None
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    # Session-key segments (regexes, full match, case-insensitive) that make a session
    # read-only; None = walrus_mem.sessions.DEFAULT_READ_ONLY_PATTERNS.
    read_only_session_patterns: Annotated[list[str] | None, NoDecode] = None

    @field_validator("read_only_session_patterns", mode="before")
    @classmethod
    def _split_patterns(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [p.strip() for p in v.split(",") if p.strip()]
        return v

    @field_validator("read_only_session_patterns")
    @classmethod
    def _compile_patterns(cls, v: list[str] | None) -> list[str] | None:
        for pattern in v or ():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"read_only_session_patterns: {pattern[:80]!r}: {exc}") from None
        return v

    @field_validator("aggregator_urls", "publisher_urls", mode="before")
    @classmethod
    def _split_urls(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [u.strip() for u in v.split(",") if u.strip()]
        return v

    @field_validator("aggregator_urls")
    @classmethod
    def _check_urls(cls, v: list[str]) -> list[str]:
        return [_http_url(u) for u in v]

    @field_validator("walrus_system_object")
    @classmethod
    def _check_system_object(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        if not _SUI_ADDRESS.fullmatch(v.strip()):
            raise ValueError("must be a Sui object id: 0x and 64 hex digits")
        return v.strip().lower()

    @field_validator("network_metrics_url")
    @classmethod
    def _check_metrics_url(cls, v: str | None) -> str | None:
        return _http_url(v) or None if v and v.strip() else None

    @field_validator("send_object_to")
    @classmethod
    def _check_sui_address(cls, v: str | None) -> str | None:
        # Walrus parses a full SuiAddress: a short one 400s every store (publisher.rs)
        if v is None or not v.strip():
            return None
        v = v.strip()
        if not _SUI_ADDRESS.fullmatch(v):
            raise ValueError("must be a full 32-byte Sui address: 0x and 64 hex digits")
        return v.lower()

    @field_validator("publisher_url")
    @classmethod
    def _strip_url(cls, v: str | None) -> str | None:
        return _http_url(v) or None if v and v.strip() else None

    @field_validator("config_file", "data_dir", "key_file", "state_dir", "heads_file",
                     mode="before")
    @classmethod
    def _expand(cls, v: Any) -> Any:
        return Path(v) if isinstance(v, _Expanded) else expand_path(v)

    @field_validator("master_key")
    @classmethod
    def _master_key(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None:
            check_placeholders(v.get_secret_value(), where="master_key")
        return v

    @field_validator("default_namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return validate_namespace(v)

    def __repr_args__(self) -> Any:
        # endpoint URLs may carry a user:password (url_secrets.py): never in a repr or log
        for name, value in super().__repr_args__():
            if name in ("publisher_url", "aggregator_urls", "publisher_urls"):
                value = ([redact_userinfo(u) for u in value] if isinstance(value, list)
                         else redact_userinfo(value) if isinstance(value, str) else value)
            yield name, value

    def master_key_value(self) -> str | None:
        """``master_key`` with its ``${VAR}`` resolved now (only a process that needs
        the master seed needs that variable); ``None`` when not configured."""
        return resolve_secret(self.master_key, "master_key")

    def from_placeholder(self, name: str) -> str | None:
        """``"${VAR}"`` if setting ``name`` was read from the config file's ``${VAR}``
        (not overridden by ``WALRUS_MEM_<NAME>``), else None. Errors raised when the
        value is used show this instead of the value: a secret put into the wrong
        variable is never echoed."""
        if os.environ.get(f"WALRUS_MEM_{name.upper()}"):
            return None
        names = placeholder_paths(self.config_file).get(name)
        return " ".join(f"${{{n}}}" for n in names) if names else None

    def agent(self, name: str) -> AgentConfig:
        """The ``[agents.<name>]`` table; an unknown name is :class:`UnknownAgent` listing
        the known ones."""
        found = self.agents.get(name)
        if found is None:
            known = tuple(sorted(self.agents))
            raise UnknownAgent(f"unknown agent {name[:80]!r}; known agents: "
                               f"{', '.join(known) or 'none configured'}", known)
        return found

    def agent_for_namespace(self, namespace: str) -> tuple[str, AgentConfig] | None:
        """The configured agent whose namespace is ``namespace``, if any
        (an agent with its own key first)."""
        matches = [(n, a) for n, a in self.agents.items() if (a.namespace or n) == namespace]
        matches.sort(key=lambda pair: pair[1].key is None)
        return matches[0] if matches else None

    @model_validator(mode="after")
    def _agent_names(self) -> Self:
        for name, agent in self.agents.items():
            if agent.namespace is None:
                try:
                    validate_namespace(name)
                except InvalidNamespace as exc:
                    raise ValueError(
                        f"agent {name[:80]!r} needs an explicit namespace: its name is not a "
                        f"valid namespace ({exc})"
                    ) from None
        return self

    @classmethod
    def load(cls, **values: Any) -> Settings:
        """Build settings like ``Settings(**values)``, raising only :class:`ConfigError`.

        pydantic's ValidationError is turned into one ConfigError listing every
        invalid field (by its dotted path) without the rejected input values.
        """
        # The ConfigError is raised outside the handlers, so the pydantic error
        # (whose object still holds the raw inputs, secrets included) is neither
        # chained nor kept as __context__.
        try:
            return cls(**values)
        except ValidationError as exc:
            # Name the file that was read: it may be one nobody passed explicitly
            # (the ``walrus-mem init`` default), so say which one to fix.
            path = (expand_path(values["config_file"]) if "config_file" in values
                    else resolve_config_file())
            from_vars = placeholder_paths(path)
            problem = "; ".join(
                _field_problem(err, from_vars)
                for err in exc.errors(include_input=False, include_url=False, include_context=False)
            )
            if path is not None:
                problem = f"{problem} (config file {path})"
        except SettingsError as exc:  # e.g. WALRUS_MEM_AGENTS that is not JSON
            m = re.search(r'field "(\w+)"', str(exc))
            where = f"environment variable WALRUS_MEM_{m.group(1).upper()}" if m else "a setting"
            problem = f"{where} cannot be parsed"
        except RecursionError:  # e.g. WALRUS_MEM_AGENTS holding JSON nested thousands deep
            problem = "a setting is nested too deeply to parse"
        raise ConfigError(f"invalid configuration: {problem}")

    @property
    def resolved_key_file(self) -> Path:
        """The configured key file, else :func:`default_key_file` (see
        :func:`walrus_mem._keys.keystore.key_file_in_use` for the legacy location)."""
        return self.key_file or default_key_file()

    @property
    def legacy_key_file(self) -> Path:
        """Where versions before the move kept the master key: in the data dir."""
        return self.data_dir / "keys" / "master.key"

    @property
    def embedded(self) -> bool:
        """True when no Walrus endpoint is configured: use the in-process relayer_mock."""
        return not self.publisher_url and not self.aggregator_urls and not self.publisher_urls

    @property
    def all_publisher_urls(self) -> list[str]:
        """``publisher_url`` then ``publisher_urls``, without repeats."""
        urls = ([self.publisher_url] if self.publisher_url else []) + [
            u.strip().rstrip("/") for u in self.publisher_urls]
        return list(dict.fromkeys(u for u in urls if u))

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The config file path itself: an argument (explicit None = no file),
        # else the env, else the default file if there is one.
        init_values = init_settings()
        if "config_file" in init_values:
            given = init_values["config_file"]
            path = expand_path(given) if given else None
        else:
            path = resolve_config_file()
        return (
            init_settings,
            _EnvWithoutSecrets(settings_cls),
            _TomlSource(settings_cls, path),
        )
