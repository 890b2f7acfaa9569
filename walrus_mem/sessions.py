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
``agent:<name>:sub:<uuid>``                 the agent's namespace       **no**
``subagent:<parent>:<uuid>``                the parent's namespace      **no**
``subagent:<uuid>``                         default namespace           **no**
any key with a ``sub``, ``subagent`` or     as above                    **no**
``memory-capture`` segment
anything else (``cron:x``, ``foo``)         default namespace           yes
==========================================  ==========================  =========

An agent's namespace is ``[agents.<name>].namespace`` from the config, else
the agent name *sanitised* to the namespace charset (lowercase ``[a-z0-9_-]``,
at most 64 characters): a session key never reaches a prompt or a file path
unsanitised. A name that sanitises to nothing falls back to the default
namespace.

Subagent sessions can read their parent's memories but every write path
(auto-capture, ``memory_store``, ``memory_update``, ``memory_forget``,
``memory_delete_all``) refuses them at run time with
:class:`~walrus_mem.errors.ReadOnlySession`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .config import AgentConfig, Settings
from .errors import ConfigError, InvalidNamespace, ReadOnlySession
from .keys import validate_namespace

__all__ = [
    "READ_ONLY_SEGMENTS",
    "AgentDirectory",
    "SessionInfo",
    "SessionKind",
    "is_subagent_session",
    "parse_session_key",
    "default_agent_config",
    "resolve_session",
    "sanitize_agent_name",
]

SessionKind = Literal["default", "main", "agent", "subagent", "unknown"]

#: Key segments that mark a read-only session (compared case-insensitively).
READ_ONLY_SEGMENTS: Final = frozenset({"sub", "subagent", "memory-capture"})
_MAIN_NAMES: Final = frozenset({"main", "default"})
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


def is_subagent_session(session_key: str | None) -> bool:
    """True when the key names a read-only (subagent or internal capture) session."""
    if not session_key:
        return False
    return any(seg.lower() in READ_ONLY_SEGMENTS for seg in _segments(session_key))


def parse_session_key(session_key: str | None) -> tuple[SessionKind, str | None, bool]:
    """Split a session key into ``(kind, raw agent name or None, read_only)``.

    ``kind`` is ``subagent`` for read-only keys, even when they also name an
    agent (the agent name is still returned so the parent namespace can be
    used).
    """
    if session_key is None or not session_key.strip():
        return "default", None, False
    parts = _segments(session_key)
    head = parts[0].lower()
    read_only = is_subagent_session(session_key)
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
    Agents not in the mapping still get their own (sanitised) namespace with
    ``defaults`` as options. Default/main sessions use ``agents["main"]`` when
    it exists, else ``defaults``, in ``default_namespace``.
    """

    def __init__(
        self,
        agents: Mapping[str, AgentConfig] | None = None,
        *,
        default_namespace: str = "default",
        defaults: AgentConfig | None = None,
    ) -> None:
        self.default_namespace = validate_namespace(default_namespace)
        self.defaults = defaults or default_agent_config()
        self.agents: dict[str, AgentConfig] = dict(agents or {})
        self._by_sanitised: dict[str, tuple[str, AgentConfig]] = {}
        for name, cfg in self.agents.items():
            if not isinstance(cfg, AgentConfig):
                raise ConfigError(f"agents.{name} must be an AgentConfig")
            clean = sanitize_agent_name(name)
            if clean is not None:
                self._by_sanitised.setdefault(clean, (name, cfg))

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
            return cls(config.agents, default_namespace=config.default_namespace)
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
            default_ns = settings.default_namespace if isinstance(settings, Settings) else "default"
            return cls(agents, default_namespace=default_ns)
        raise ConfigError(
            f"unsupported agents config of type {type(config).__name__}; pass Settings, "
            "a mapping of AgentConfig, an AgentConfig or None"
        )

    def lookup(self, agent_name: str) -> tuple[str | None, AgentConfig | None]:
        """Return ``(sanitised name, config or None)`` for a raw agent name."""
        if agent_name in self.agents:
            return sanitize_agent_name(agent_name), self.agents[agent_name]
        clean = sanitize_agent_name(agent_name)
        if clean is None:
            return None, None
        found = self._by_sanitised.get(clean)
        return clean, (found[1] if found else None)

    def main_options(self) -> tuple[str, AgentConfig]:
        cfg = self.agents.get("main") or self.agents.get("default")
        if cfg is None:
            return self.default_namespace, self.defaults
        return cfg.namespace or self.default_namespace, cfg

    def resolve(self, session_key: str | None) -> SessionInfo:
        """Resolve a session key to its :class:`SessionInfo`."""
        kind, raw_agent, read_only = parse_session_key(session_key)
        agent: str | None = None
        if raw_agent is not None:
            agent, cfg = self.lookup(raw_agent)
            if agent is not None and agent not in _MAIN_NAMES:
                namespace = (cfg.namespace if cfg else None) or agent
                return SessionInfo(
                    session_key, kind, agent, namespace, read_only, cfg or self.defaults
                )
        namespace, options = self.main_options()
        if kind == "agent":  # agent:main:... or a name that sanitised to nothing
            kind = "main" if agent in _MAIN_NAMES else "unknown"
        return SessionInfo(session_key, kind, None, namespace, read_only, options)


def resolve_session(session_key: str | None, config: Any = None) -> SessionInfo:
    """Shortcut for ``AgentDirectory.from_config(config).resolve(session_key)``."""
    return AgentDirectory.from_config(config).resolve(session_key)
