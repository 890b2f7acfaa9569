"""Settings: environment (``WALRUS_MEM_*``), a TOML config file, and defaults.

Precedence for ordinary settings (first wins): arguments to ``Settings(...)``
> environment variables > the TOML config file > defaults. Every string in the
TOML file may hold ``${VAR}`` placeholders (see :mod:`walrus_mem.placeholders`).

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
from pathlib import Path
from typing import Annotated, Any, Literal, Self

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

from .errors import ConfigError, InvalidNamespace, PlaceholderError
from .keys import parse_ed25519_key, validate_namespace
from .placeholders import resolve_placeholders
from .ranking import DEFAULT_MIN_SCORE

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "AgentConfig",
    "Settings",
    "default_config_path",
    "load_config_file",
    "resolve_config_file",
]

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
CONFIG_ENV = "WALRUS_MEM_CONFIG"
CONFIG_FILE_ENV = "WALRUS_MEM_CONFIG_FILE"  # the field's own env name; also honoured


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("walrus-mem", appauthor=False))


def default_config_path() -> Path:
    """Where ``walrus-mem init`` writes the starter config, read when nothing names
    another file: ``<user config dir>/walrus-mem/config.toml`` (platformdirs), e.g.
    ``~/.config/walrus-mem/config.toml`` on Linux."""
    return Path(platformdirs.user_config_dir("walrus-mem", appauthor=False)) / "config.toml"


def named_config_file() -> Path | None:
    """The file ``WALRUS_MEM_CONFIG`` (else ``WALRUS_MEM_CONFIG_FILE``) names, if any."""
    named = os.environ.get(CONFIG_ENV) or os.environ.get(CONFIG_FILE_ENV)
    return Path(named) if named else None


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
        return Path(explicit)
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
    key: SecretStr | None = None  # independent Ed25519 key (hex/base64); None = derived
    auto_recall: bool = True
    auto_capture: bool = True
    max_recall_results: int = Field(default=5, ge=1, le=100)
    # recall hits scoring below this are not injected; the same calibrated default
    # as recall's own cutoff (walrus_mem.ranking.DEFAULT_MIN_SCORE, docs/benchmarks.md)
    min_relevance: float = Field(default=DEFAULT_MIN_SCORE, ge=0.0, le=1.0)
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
            parse_ed25519_key(v.get_secret_value())  # MalformedKey names no key bytes
        return v


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
        resolved: dict[str, Any] = resolve_placeholders(data)
    except PlaceholderError as exc:  # say which file: it may be the implicit default one
        raise PlaceholderError(f"{exc} (config file {path})", variable=exc.variable) from exc
    # Accept both a flat file and one with a [walrus_mem] table.
    if isinstance(resolved.get("walrus_mem"), dict):
        top = dict(resolved.pop("walrus_mem"))
        top.update(resolved)
        resolved = top
    return resolved


class _TomlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self._data = load_config_file(path) if path else {}
        if "config_file" in self._data:
            raise ConfigError(f"config file {path}: config_file cannot be set inside a config file")
        if path:
            self._data["config_file"] = path  # so Settings.config_file names the file read

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
        Settings(data_dir="/tmp/mem")                # explicit values win
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
    master_key: SecretStr | None = None
    key_file: Path | None = None  # default: <data_dir>/keys/master.key
    use_keyring: bool = True
    default_namespace: str = "default"
    epochs: int = Field(default=5, ge=1, le=53)
    permanent: bool = False
    send_object_to: str | None = None
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    embedding_batch_size: int = Field(default=64, ge=1)
    # Runtime and thread policy of the embedder (see walrus_mem.embeddings).
    embedding_backend: Literal["auto", "numpy", "torch"] = "auto"
    embedding_threads: int = Field(default=1, ge=0, le=256)
    max_fact_bytes: int = Field(default=64 * 1024, ge=256)
    publish_deadline: float = Field(default=10.0, gt=0)
    read_deadline: float = Field(default=30.0, gt=0)
    request_timeout: float = Field(default=10.0, gt=0)
    min_score: float = Field(default=0.0, ge=0.0)
    manifest_every: int = Field(default=200, ge=1)
    # Walrus epoch length for the expiry clock (mainnet 1209600, testnet 86400); None: learned
    epoch_seconds: float | None = Field(default=None, gt=0)
    # sync re-publishes memories whose blobs end within this many epochs
    renew_margin_epochs: int = Field(default=1, ge=0, le=52)
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

    @field_validator("aggregator_urls", mode="before")
    @classmethod
    def _split_urls(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [u.strip() for u in v.split(",") if u.strip()]
        return v

    @field_validator("publisher_url")
    @classmethod
    def _strip_url(cls, v: str | None) -> str | None:
        return v.strip().rstrip("/") or None if v else None

    @field_validator("default_namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return validate_namespace(v)

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
            problem = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
                for err in exc.errors(include_input=False, include_url=False, include_context=False)
            )
            # Name the file that was read: it may be one nobody passed explicitly
            # (the ``walrus-mem init`` default), so say which one to fix.
            path = values["config_file"] if "config_file" in values else resolve_config_file()
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
        return self.key_file or (self.data_dir / "keys" / "master.key")

    @property
    def embedded(self) -> bool:
        """True when no Walrus endpoint is configured: use the in-process relayer_mock."""
        return not self.publisher_url and not self.aggregator_urls

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
            path = Path(given) if given else None
        else:
            path = resolve_config_file()
        return (
            init_settings,
            _EnvWithoutSecrets(settings_cls),
            _TomlSource(settings_cls, path),
        )
