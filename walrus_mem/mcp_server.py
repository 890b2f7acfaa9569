"""MCP server: the memory tools over stdio, for Claude Desktop-style hosts.

Built on the official ``mcp`` SDK (the ``mcp`` extra, version 2: the low-level
``Server`` with handler callbacks). Every tool of :mod:`walrus_mem.tools` is
exposed with its JSON schema; calls run through :func:`~walrus_mem.tools.call_tool`
in a worker thread, and results come back as JSON text plus structured content
(``is_error`` set for tool errors).

The server serves one agent: ``agent="researcher"`` scopes every call to that
agent's namespace (``[agents.researcher]`` of the config, else an existing
namespace of that name); ``None`` serves the default namespace. An agent that
is neither configured nor an existing namespace raises
:class:`~walrus_mem.errors.UnknownAgent` listing the known ones (a typo must not
silently serve a fresh, empty namespace). A ``namespace`` argument naming any
other namespace is refused (``NamespaceDenied``). ``read_only=True`` lists only the
read tools and refuses writes (for subagents). :func:`run_stdio` refuses to start
when that namespace's key cannot be resolved (:func:`check_keys`).

Run it with ``walrus-mem mcp`` or ``python -m walrus_mem.mcp_server [--agent NAME]
[--read-only]``. Settings come from the usual env vars / config file.
``WALRUS_MEM_EMBEDDING_MODEL=test-hash`` selects the deterministic fake embedder
(tests and offline demos only).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import click

from . import __version__
from ._agents.mcp_sdk import Server, ServerRequestContext, stdio_server, types
from ._keys.hardening import disable_core_dumps
from ._recall.embeddings import TEST_EMBEDDER_PREFIX
from .config import Settings
from .errors import ConfigError, KeyMaterialError, UnknownAgent, WalrusMemError
from .hooks import namespace_instruction
from .keys import validate_namespace
from .sessions import AgentDirectory
from .tools import READ_TOOLS, WRITE_TOOLS, call_tool, tool_specs

__all__ = ["TEST_EMBEDDER_PREFIX", "build_server", "check_agent", "check_keys", "main",
           "mcp_command", "open_memory", "run_stdio", "serve_stdio", "session_key_for"]

log = logging.getLogger(__name__)




def session_key_for(agent: str | None, *, read_only: bool = False) -> str:
    """The session key the server uses for every call."""
    base = f"agent:{agent}" if agent else "main"
    return f"{base}:subagent:mcp" if read_only else f"{base}:mcp"


def check_agent(directory: AgentDirectory, memory: Any, agent: str) -> None:
    """Raise :class:`UnknownAgent` unless ``agent`` is configured or its namespace exists."""
    if agent in directory.agents or agent in ("main", "default"):
        return
    existing: list[str] = []
    lister = getattr(memory, "namespaces", None)
    if callable(lister):
        existing = [str(ns) for ns in lister()]
    if agent in existing:
        return
    known = tuple(sorted(set(directory.known_agents()) | set(existing)))
    shown = ", ".join(known) if known else "none (add an [agents.<name>] table to the config)"
    raise UnknownAgent(f"unknown agent {agent[:64]!r}; known agents and namespaces: {shown}",
                       known)


def check_keys(memory: Any, agent: str | None, *, read_only: bool = False) -> None:
    """Raise unless this process holds the key of the namespace the server would serve.

    Checked before serving: a host that does not pass the agent's key variable (its
    ``"env"``) gets a server that refuses to start, not one whose every tool call fails.
    The error (:class:`~walrus_mem.errors.PlaceholderError`, :class:`KeyNotFound`,
    :class:`AccessDenied`, ...) keeps its type and names the agent and namespace."""
    directory = AgentDirectory.from_config(None, memory=memory)
    namespace = directory.resolve(session_key_for(agent, read_only=read_only)).namespace
    try:
        memory.derive_keys(namespace)  # resolves the agent's ${VAR} or the master key
        memory.list(namespace, limit=1)  # the local access check (AccessDenied)
    except (KeyMaterialError, ConfigError) as exc:
        who = f"agent {agent!r}" if agent else "the default namespace"
        exc.args = (f"cannot serve {who} (namespace {namespace!r}): its key cannot be "
                    f"resolved: {exc}; an MCP host passes key variables in the server's "
                    '"env"',)
        raise


def open_memory(settings: Settings | None = None) -> Any:
    """A :class:`~walrus_mem.memory.Memory` for ``settings`` (fake embedder if asked)."""
    from .memory import Memory

    # Memory honours the ``test-hash`` switch itself (embeddings.make_embedder).
    return Memory(settings if settings is not None else Settings.load())


def build_server(
    memory: Any,
    *,
    agent: str | None = None,
    read_only: bool = False,
    config: Any = None,
) -> Server[Any]:
    """An MCP ``Server`` exposing the memory tools for one agent's namespace.

    Raises :class:`UnknownAgent` for an agent that is neither configured nor an
    existing namespace, :class:`~walrus_mem.errors.InvalidSessionKey` for a
    name that cannot be mapped one-to-one.
    """
    directory = AgentDirectory.from_config(config, memory=memory)
    if agent is not None:
        check_agent(directory, memory, agent)
    session_key = session_key_for(agent, read_only=read_only)
    session = directory.resolve(session_key)
    tools = [
        types.Tool(
            name=spec["function"]["name"],
            description=spec["function"]["description"],
            input_schema=spec["function"]["parameters"],
            annotations=types.ToolAnnotations(
                read_only_hint=spec["function"]["name"] in READ_TOOLS,
                destructive_hint=spec["function"]["name"] in WRITE_TOOLS
                and spec["function"]["name"] != "memory_store",
                idempotent_hint=spec["function"]["name"] in READ_TOOLS,
                open_world_hint=False,
            ),
        )
        for spec in tool_specs(read_only=read_only)
    ]
    names = {tool.name for tool in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            result: dict[str, Any] = {
                "ok": False, "tool": params.name[:64],
                "error": {"type": "UnknownTool", "message": "unknown or unavailable tool"},
            }
        else:
            result = await anyio.to_thread.run_sync(
                lambda: call_tool(memory, params.name, params.arguments or {},
                                  session_key=session_key, config=directory)
            )
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error=not result["ok"],
        )

    return Server(
        "walrus-mem",
        version=__version__,
        instructions=namespace_instruction(session),
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` over this process's stdin/stdout until the client hangs up."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(
    settings: Settings | None = None,
    agent: str | None = None,
    *,
    read_only: bool = False,
    memory: Any = None,
) -> None:
    """Run the MCP server over stdio (blocking). The CLI's ``walrus-mem mcp`` calls this.

    ``memory`` defaults to one opened from ``settings``; it is closed on exit
    only if this function opened it.
    """
    owned = memory is None
    mem = open_memory(settings) if owned else memory
    try:
        server = build_server(mem, agent=agent, read_only=read_only)
        check_keys(mem, agent, read_only=read_only)
        anyio.run(serve_stdio, server)
    finally:
        if owned:
            mem.close()


@click.command("mcp")
@click.option("--agent", default=None, help="Serve this agent's namespace ([agents.<name>]).")
@click.option("--read-only", is_flag=True, help="List and allow the read tools only.")
@click.pass_context
def mcp_command(ctx: click.Context, agent: str | None, read_only: bool) -> None:
    """Serve the memory tools over MCP (stdio) for Claude Desktop-style hosts."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    settings = getattr(ctx.obj, "settings", None)
    # `walrus-mem --agent NAME mcp` / `-n NS mcp` (docs/configuration.md): the global
    # options choose the namespace too; they served the default namespace before.
    outer = getattr(ctx.obj, "agent_option", None)
    if agent is not None and outer is not None and agent != outer:
        raise click.UsageError(f"--agent {outer} (before mcp) and --agent {agent} (after) differ")
    agent = agent or outer
    namespace = getattr(ctx.obj, "namespace_option", None)
    if agent is not None and namespace is not None:
        ctx.obj.agent_option = agent
        ctx.obj.namespace  # noqa: B018 - raises a UsageError if -n is not the agent's
    elif namespace is not None and isinstance(settings, Settings):
        settings = settings.model_copy(update={"default_namespace": validate_namespace(namespace)})
    try:
        run_stdio(settings if isinstance(settings, Settings) else None, agent,
                  read_only=read_only)
    except WalrusMemError as exc:  # UnknownAgent, InvalidSessionKey: a usage error
        raise click.ClickException(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m walrus_mem.mcp_server [--agent NAME] [--read-only]``."""
    parser = argparse.ArgumentParser(prog="walrus_mem.mcp_server", description=__doc__)
    parser.add_argument("--agent", default=None, help="serve this agent's namespace")
    parser.add_argument("--read-only", action="store_true", help="list and allow reads only")
    args = parser.parse_args(argv)
    disable_core_dumps()  # it holds the namespace's keys (hardening.py)
    # stdout carries the protocol: logs go to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        run_stdio(agent=args.agent, read_only=args.read_only)
    except WalrusMemError as exc:
        print(f"walrus_mem.mcp_server: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess in tests
    sys.exit(main())
