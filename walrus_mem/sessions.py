"""Session keys → namespaces, agent options, and read-only (subagent) sessions.

Agent hosts name every conversation with a *session key*. walrus_mem maps it to
a memory namespace and to the options of the agent that owns it:

==========================================  ==========================  =========
session key                                 namespace                   writes
==========================================  ==========================  =========
``None``, ``""``, whitespace                default namespace           yes
``main`` / ``main:<uuid>``                  default namespace           yes
``agent:<name>`` / ``agent:<name>:<uuid>``  the agent's namespace       yes
``agent:main:<uuid>``                       default namespace           yes
``agent:<name>:subagent:<uuid>``            the agent's namespace       **no**
``agent:<name>:sub-agent:<n>``              the agent's namespace       **no**
``subagent:<parent>:<uuid>``                the parent's namespace      **no**
``subagent:<uuid>``                         default namespace           **no**
any key with a read-only segment            as above                    **no**
anything else (``cron:x``, ``foo``)         default namespace           yes
==========================================  ==========================  =========

The mapping from agent names to namespaces is **injective**: two different
agent names never share a namespace. An agent's namespace is
``[agents.<name>].namespace`` (matched by exact name), else the name itself
when it already is a valid namespace (lowercase ``[a-z0-9_-]``, at most 64
characters). Anything else -- ``agent:Researcher``, ``agent:Résearcher``,
``agent:re$earch``, a name that claims another agent's namespace or the main
sessions' (``[agents.main]``'s namespace, and the default namespace) -- raises
:class:`~walrus_mem.errors.InvalidSessionKey` instead of being folded onto
some other agent's memories (and keys). A configured agent whose namespace is
the one ``[agents.main]`` names is a :class:`~walrus_mem.errors.ConfigError`; a
configured agent may own the default namespace (a process per agent whose
``default_namespace`` is that agent's), and then main sessions are that agent's.

A session is read-only when any segment of its key fully matches one of the
read-only patterns (case-insensitive regexes; ``Settings.read_only_session_patterns``
or ``AgentDirectory(read_only_patterns=...)``). The default,
:data:`DEFAULT_READ_ONLY_PATTERNS`, covers the common subagent spellings:
``sub``, ``subagent``, ``sub-agent``, ``sub_agent``, ``subAgent``, ``sub-agent-2``,
``subtask``, ``child``, ``child-agent``, ``spawned``, ``delegate``,
``memory-capture``... Every write path (auto-capture, ``memory_store``,
``memory_update``, ``memory_forget``, ``memory_delete_all``) refuses them at
run time with :class:`~walrus_mem.errors.ReadOnlySession`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .config import AgentConfig, Settings
from .errors import ConfigError, InvalidNamespace, InvalidSessionKey, ReadOnlySession
from .keys import validate_namespace

__all__ = [
    "DEFAULT_READ_ONLY_PATTERNS",
    "READ_ONLY_SEGMENTS",
    "AgentDirectory",
    "SessionInfo",
    "SessionKind",
    "is_subagent_session",
    "parse_session_key",
    "default_agent_config",
    "resolve_session",
    "compile_read_only",
    "sanitize_agent_name",
]

SessionKind = Literal["default", "main", "agent", "subagent", "unknown"]

#: Regexes (full match on one key segment, case-insensitive) for read-only sessions.
DEFAULT_READ_ONLY_PATTERNS: Final[tuple[str, ...]] = (
    r"sub(?:[-_. ]?(?:agent|task|session|process|worker|run))?s?(?:[-_.#]?\d+)?",
    r"child(?:[-_. ]?(?:agent|session|task|run))?s?(?:[-_.#]?\d+)?",
    r"spawn(?:ed)?(?:[-_. ]?agent)?",
    r"delegate[ds]?(?:[-_. ]?agent)?",
    r"(?:helper|worker|task)[-_. ]agent(?:[-_.#]?\d+)?",
    r"mem(?:ory)?[-_. ]?capture",
    r"read[-_. ]?only|ro",
)
#: Segments the default patterns must cover (kept for compatibility and tests).
READ_ONLY_SEGMENTS: Final = frozenset({"sub", "subagent", "sub-agent", "sub_agent",
                                       "memory-capture"})
_MAIN_NAMES: Final = frozenset({"main", "default"})
_MAIN_OWNER: Final = "\x00main"  # owner of the main sessions' namespaces (no agent's name)
_INVALID_RUN: Final = re.compile(r"[^a-z0-9_-]+")


def default_agent_config() -> AgentConfig:
    """An :class:`AgentConfig` with every option at its default."""
    return AgentConfig.model_validate({})


def sanitize_agent_name(name: str) -> str | None:
    """Fold an agent name into the namespace charset, or ``None`` if nothing is left.

    Accents are stripped, letters lowercased, and every run of other
    characters becomes one ``-`` (so ``"Re$earch\\nBot"`` → ``"re-earch-bot"``).
    """
    folded = unicodedata.normalize("NFKD", name)
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch)).lower()
    folded = _INVALID_RUN.sub("-", folded).strip("-_")[:64].rstrip("-_")
    if not folded:
        return None
    try:
        return validate_namespace(folded)
    except InvalidNamespace:  # pragma: no cover - the folding above guarantees validity
        return None


def _segments(key: str) -> list[str]:
    return [part.strip() for part in key.strip().split(":")]


def compile_read_only(patterns: Any = None) -> re.Pattern[str]:
    """One regex matching a read-only segment (``None`` = the defaults)."""
    chosen = DEFAULT_READ_ONLY_PATTERNS if patterns is None else tuple(patterns)
    if not chosen:
        return re.compile(r"(?!)")
    try:
        return re.compile("|".join(f"(?:{p})" for p in chosen), re.IGNORECASE)
    except re.error as exc:
        raise ConfigError(f"invalid read-only session pattern: {exc}") from None


_DEFAULT_READ_ONLY: Final = compile_read_only()


def is_subagent_session(session_key: str | None,
                        patterns: re.Pattern[str] | None = None) -> bool:
    """True when a segment of the key matches a read-only pattern."""
    if not session_key:
        return False
    rx = patterns or _DEFAULT_READ_ONLY
    return any(rx.fullmatch(seg) for seg in _segments(session_key))


def parse_session_key(session_key: str | None, patterns: re.Pattern[str] | None = None
                      ) -> tuple[SessionKind, str | None, bool]:
    """Split a session key into ``(kind, raw agent name or None, read_only)``.

    ``kind`` is ``subagent`` for read-only keys, even when they also name an
    agent (the agent name is still returned so the parent namespace can be
    used).
    """
    if session_key is None or not session_key.strip():
        return "default", None, False
    parts = _segments(session_key)
    head = parts[0].lower()
    read_only = is_subagent_session(session_key, patterns)
    agent: str | None = None
    kind: SessionKind
    if head == "agent" and len(parts) >= 2 and parts[1]:
        agent = parts[1]
        kind = "agent"
    elif head in {"subagent", "sub"}:
        # subagent:<parent>:<uuid> names its parent; subagent:<uuid> does not.
        agent = parts[1] if len(parts) >= 3 and parts[1] else None
        kind = "subagent"
    elif head == "main":
        kind = "main"
    else:
        kind = "unknown"
    if read_only:
        kind = "subagent"
    return kind, agent, read_only


@dataclass(frozen=True)
class SessionInfo:
    """What a session key resolves to.

    ``agent`` is the sanitised agent name (``None`` for default/main sessions),
    ``options`` the per-agent options (recall/capture switches and limits).
    """

    key: str | None
    kind: SessionKind
    agent: str | None
    namespace: str
    read_only: bool
    options: AgentConfig = field(default_factory=lambda: default_agent_config())

    def require_writable(self, action: str = "write") -> None:
        """Raise :class:`ReadOnlySession` if this session may not write."""
        if self.read_only:
            raise ReadOnlySession(
                f"{action} refused: session is a read-only subagent session of "
                f"namespace {self.namespace!r}"
            )


class AgentDirectory:
    """Resolves session keys against an agents configuration.

    ``agents`` maps agent names (``[agents.<name>]``) to :class:`AgentConfig`.
    Agents not in the mapping get the namespace of their own name (when it is a
    valid namespace that no configured agent claims) with ``defaults`` as
    options. Default/main sessions use ``agents["main"]`` when it exists, else
    ``defaults``, in ``default_namespace``. ``read_only_patterns`` replaces
    :data:`DEFAULT_READ_ONLY_PATTERNS`.
    """

    def __init__(
        self,
        agents: Mapping[str, AgentConfig] | None = None,
        *,
        default_namespace: str = "default",
        defaults: AgentConfig | None = None,
        read_only_patterns: Any = None,
    ) -> None:
        self.default_namespace = validate_namespace(default_namespace)
        self.defaults = defaults or default_agent_config()
        self.agents: dict[str, AgentConfig] = dict(agents or {})
        self.read_only = compile_read_only(read_only_patterns)
        for name, cfg in self.agents.items():
            if not isinstance(cfg, AgentConfig):
                raise ConfigError(f"agents.{name} must be an AgentConfig")
        main_named = {cfg.namespace for name, cfg in self.agents.items()
                      if name in _MAIN_NAMES and cfg.namespace}
        # namespace -> the one agent name that owns it
        self._owner: dict[str, str] = {}
        for name, cfg in self.agents.items():
            if name in _MAIN_NAMES:
                continue
            namespace = cfg.namespace or _valid_or_none(name)
            if namespace is None:
                raise ConfigError(
                    f"agent {name[:80]!r} needs an explicit namespace: its name is not a valid "
                    "namespace and will not be folded into one"
                )
            if namespace in main_named:
                raise ConfigError(
                    f"agent {name[:80]!r} maps to namespace {namespace!r}, which [agents.main] "
                    "names for the main sessions; give each its own namespace "
                    "(docs/integrations.md)"
                )
            other = self._owner.setdefault(namespace, name)
            if other != name:
                raise ConfigError(
                    f"agents {other[:80]!r} and {name[:80]!r} both map to namespace "
                    f"{namespace!r}; give each its own namespace"
                )
        # Main sessions own their namespace and the default one (what calls with no
        # namespace use), unless a configured agent was given it: an agent *name* equal to
        # either would get main's memories and key (issue 23, item 15).
        for namespace in (self.main_options()[0], self.default_namespace):
            self._owner.setdefault(namespace, _MAIN_OWNER)

    @classmethod
    def from_config(cls, config: Any = None, *, memory: Any = None) -> AgentDirectory:
        """Build a directory from whatever a host passes as ``config``.

        Accepts ``None`` (the memory's own settings, else defaults), a
        :class:`Settings`, a mapping of agent names to :class:`AgentConfig`
        (or to plain dicts), a single :class:`AgentConfig` (options for every
        session), or an :class:`AgentDirectory`.
        """
        if isinstance(config, AgentDirectory):
            return config
        if config is None:
            settings = getattr(memory, "settings", None)
            if isinstance(settings, Settings):
                config = settings
            else:
                return cls()
        if isinstance(config, Settings):
            return cls(config.agents, default_namespace=config.default_namespace,
                       read_only_patterns=config.read_only_session_patterns)
        if isinstance(config, AgentConfig):
            return cls(defaults=config)
        if isinstance(config, Mapping):
            agents: dict[str, AgentConfig] = {}
            for name, value in config.items():
                try:
                    agents[str(name)] = (
                        value
                        if isinstance(value, AgentConfig)
                        else AgentConfig.model_validate(value)
                    )
                except ValueError as exc:
                    raise ConfigError(f"agents.{name}: {exc}") from exc
            settings = getattr(memory, "settings", None)
            if isinstance(settings, Settings):
                return cls(agents, default_namespace=settings.default_namespace,
                           read_only_patterns=settings.read_only_session_patterns)
            return cls(agents)
        raise ConfigError(
            f"unsupported agents config of type {type(config).__name__}; pass Settings, "
            "a mapping of AgentConfig, an AgentConfig or None"
        )

    def lookup(self, agent_name: str) -> tuple[str, AgentConfig | None]:
        """Return ``(namespace, config or None)`` for a raw agent name, one-to-one.

        Raises :class:`InvalidSessionKey` for a name that is not configured and
        is not itself a valid namespace, or that claims a configured agent's
        namespace.
        """
        cfg = self.agents.get(agent_name)
        if cfg is not None:
            return cfg.namespace or agent_name, cfg
        namespace = _valid_or_none(agent_name)
        if namespace is None:
            raise InvalidSessionKey(
                f"agent name {_shown(agent_name)} is not configured and is not a valid namespace "
                "(lowercase a-z, 0-9, '-', '_', at most 64 characters); it is refused rather "
                "than folded into another agent's namespace"
            )
        owner = self._owner.get(namespace)
        if owner == _MAIN_OWNER:
            raise InvalidSessionKey(
                f"agent name {_shown(agent_name)} would share namespace {namespace!r} with "
                "the main sessions (their memories and key); use agent:main or main"
            )
        if owner is not None and owner != agent_name:
            raise InvalidSessionKey(
                f"agent name {_shown(agent_name)} would share namespace {namespace!r} with "
                f"agent {owner!r}"
            )
        return namespace, None

    def known_agents(self) -> tuple[str, ...]:
        """The configured agent names (sorted)."""
        return tuple(sorted(self.agents))

    def main_options(self) -> tuple[str, AgentConfig]:
        cfg = self.agents.get("main") or self.agents.get("default")
        if cfg is None:
            return self.default_namespace, self.defaults
        return cfg.namespace or self.default_namespace, cfg

    def resolve(self, session_key: str | None) -> SessionInfo:
        """Resolve a session key to its :class:`SessionInfo` (see the module table).

        Raises :class:`InvalidSessionKey` when the key names an agent that
        cannot be mapped one-to-one to a namespace.
        """
        kind, raw_agent, read_only = parse_session_key(session_key, self.read_only)
        if raw_agent is not None and raw_agent.strip().lower() not in _MAIN_NAMES:
            namespace, cfg = self.lookup(raw_agent)
            return SessionInfo(
                session_key, kind, raw_agent, namespace, read_only, cfg or self.defaults
            )
        if kind == "agent" and raw_agent is not None and raw_agent not in _MAIN_NAMES:
            raise InvalidSessionKey(f"agent name {_shown(raw_agent)} is not a main alias")
        namespace, options = self.main_options()
        if kind == "agent":  # agent:main:...
            kind = "main"
        return SessionInfo(session_key, kind, None, namespace, read_only, options)


def _valid_or_none(name: str) -> str | None:
    try:
        return validate_namespace(name) if name == name.strip() else None
    except InvalidNamespace:
        return None


def _shown(name: str) -> str:
    """A name for an error message: bounded, control characters escaped."""
    return repr(name[:64])


def resolve_session(session_key: str | None, config: Any = None) -> SessionInfo:
    """Shortcut for ``AgentDirectory.from_config(config).resolve(session_key)``."""
    return AgentDirectory.from_config(config).resolve(session_key)
