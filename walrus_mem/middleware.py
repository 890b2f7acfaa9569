"""Middleware: memory for an OpenAI client or a LangChain chat model, with no host hooks.

Both wrappers follow the rules of :class:`~walrus_mem.hooks.MemoryHooks`:
recall before the call (the last user message is the query; the memory block
is prepended to that message and the namespace instruction appended to the
system message), capture after a successful call (in the background, never
raising), one session key per wrapper or per call.

OpenAI (``openai`` extra), sync and async clients, streaming included::

    client = wrap_openai(OpenAI(), memory, session_key="agent:researcher:1")
    client.chat.completions.create(model="gpt-4o-mini", messages=[...])
    client.chat.completions.create(..., walrus_session_key="agent:coder:7")  # per call

LangChain (``langchain`` extra)::

    chat = with_memory(ChatOpenAI(model="gpt-4o-mini"), memory, session_key="main:1")
    chat.invoke([HumanMessage("...")])            # or await chat.ainvoke(...)

Call ``.hooks.close()`` (or ``flush()``) at shutdown so queued captures finish.

To give the model the memory tools too, use ``client.memory_tools()`` (or
``chat.memory_tools()``): a :class:`~walrus_mem.tools.BoundTools` bound to the
wrapper's session, so a tool call naming any other namespace is refused with
``NamespaceDenied`` (the per-call ``walrus_session_key`` is a host argument,
stripped before the request, never something the model can set).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from .extract import normalize_messages
from .hooks import MemoryHooks, RecallContext
from .tools import BoundTools

__all__ = [
    "OpenAIWithMemory",
    "inject_openai_messages",
    "memory_chat_model_class",
    "with_memory",
    "wrap_openai",
]

SESSION_KWARG = "walrus_session_key"


def _hooks_for(memory: Any, hooks: MemoryHooks | None, config: Any) -> MemoryHooks:
    if hooks is not None:
        return hooks
    if memory is None:
        raise ValueError("pass a memory or an existing MemoryHooks")
    return MemoryHooks(memory, config)


def _last_user_text(messages: Sequence[Any]) -> str:
    for message in reversed(normalize_messages(messages)):
        if message.role == "user":
            return message.text
    return ""


# ---------------------------------------------------------------------------
# OpenAI
# ---------------------------------------------------------------------------


def _role(message: Any) -> str | None:
    if isinstance(message, dict):
        role = message.get("role")
        return role if isinstance(role, str) else None
    role = getattr(message, "role", None)
    return role if isinstance(role, str) else None


def inject_openai_messages(messages: Sequence[Any], ctx: RecallContext) -> list[Any]:
    """A copy of OpenAI-style ``messages`` with the recall context injected.

    The namespace instruction is appended to the first system/developer
    message (or inserted as one); the memory block is prepended to the last
    user message. The caller's list and dicts are not modified.
    """
    out = list(messages)
    system = ctx.append_system_context
    if out and _role(out[0]) in ("system", "developer") and isinstance(out[0], dict) \
            and isinstance(out[0].get("content"), str):
        out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{system}"}
    else:
        out.insert(0, {"role": "system", "content": system})
    if ctx.prepend_context:
        for i in range(len(out) - 1, -1, -1):
            msg = out[i]
            if _role(msg) != "user" or not isinstance(msg, dict):
                continue
            content = msg.get("content")
            if isinstance(content, str):
                out[i] = {**msg, "content": ctx.prepend_context + content}
            elif isinstance(content, list):
                part = {"type": "text", "text": ctx.prepend_context}
                out[i] = {**msg, "content": [part, *content]}
            break
    return out


def _response_text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


class _StreamCapture:
    """Wraps a (sync) OpenAI stream: passes chunks through, captures at the end."""

    def __init__(self, stream: Any, on_done: Any) -> None:
        self._stream = stream
        self._on_done = on_done
        self._parts: list[str] = []
        self._finished = False

    def _collect(self, chunk: Any) -> None:
        try:
            delta = chunk.choices[0].delta.content
        except (AttributeError, IndexError, TypeError):
            return
        if isinstance(delta, str):
            self._parts.append(delta)

    def _finish(self) -> None:
        if not self._finished:
            self._finished = True
            self._on_done("".join(self._parts))

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._stream:
            self._collect(chunk)
            yield chunk
        self._finish()

    def __enter__(self) -> _StreamCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _AsyncStreamCapture(_StreamCapture):
    """The async counterpart of :class:`_StreamCapture`."""

    async def __aiter__(self) -> AsyncIterator[Any]:
        async for chunk in self._stream:
            self._collect(chunk)
            yield chunk
        self._finish()

    async def __aenter__(self) -> _AsyncStreamCapture:
        return self

    async def __aexit__(self, *exc: object) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            result = close()
            if inspect.isawaitable(result):
                await result


class _Completions:
    def __init__(self, inner: Any, owner: OpenAIWithMemory) -> None:
        self._inner = inner
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _after(self, messages: Sequence[Any], key: str | None, text: str) -> None:
        conversation = [*messages, {"role": "assistant", "content": text}]
        self._owner.hooks.agent_end(conversation, key, success=True)


class _SyncCompletions(_Completions):
    def create(self, *args: Any, messages: Sequence[Any], **kwargs: Any) -> Any:
        key = kwargs.pop(SESSION_KWARG, None) or self._owner.session_key
        ctx = self._owner.hooks.before_prompt_build(_last_user_text(messages), key)
        response = self._inner.create(
            *args, messages=inject_openai_messages(messages, ctx), **kwargs
        )
        if kwargs.get("stream"):
            return _StreamCapture(response, lambda text: self._after(messages, key, text))
        self._after(messages, key, _response_text(response))
        return response


class _AsyncCompletions(_Completions):
    async def create(self, *args: Any, messages: Sequence[Any], **kwargs: Any) -> Any:
        key = kwargs.pop(SESSION_KWARG, None) or self._owner.session_key
        ctx = await self._owner.hooks.abefore_prompt_build(_last_user_text(messages), key)
        response = await self._inner.create(
            *args, messages=inject_openai_messages(messages, ctx), **kwargs
        )
        if kwargs.get("stream"):
            return _AsyncStreamCapture(response, lambda text: self._after(messages, key, text))
        self._after(messages, key, _response_text(response))
        return response


class _Chat:
    def __init__(self, inner: Any, completions: _Completions) -> None:
        self._inner = inner
        self.completions = completions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class OpenAIWithMemory:
    """An OpenAI (or compatible) client whose ``chat.completions.create`` has memory.

    Everything else is delegated to the wrapped client unchanged.
    ``hooks`` is the :class:`MemoryHooks` in use; ``close()`` drains it if
    this wrapper created it.
    """

    def __init__(
        self,
        client: Any,
        memory: Any = None,
        *,
        session_key: str | None = None,
        config: Any = None,
        hooks: MemoryHooks | None = None,
    ) -> None:
        self._client = client
        self._owns_hooks = hooks is None
        self.hooks = _hooks_for(memory, hooks, config)
        self.session_key = session_key
        inner = client.chat.completions
        is_async = inspect.iscoroutinefunction(inspect.unwrap(inner.create)) or type(
            inner
        ).__name__.startswith("Async")
        completions: _Completions = (
            _AsyncCompletions(inner, self) if is_async else _SyncCompletions(inner, self)
        )
        self.chat = _Chat(client.chat, completions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def memory_tools(self, session_key: str | None = None) -> BoundTools:
        """The memory tools bound to this wrapper's session (or ``session_key``)."""
        key = session_key if session_key is not None else self.session_key
        return BoundTools(self.hooks.memory, session_key=key, config=self.hooks.directory)

    def close(self) -> None:
        """Drain the capture queue (if these hooks are ours); the client stays open."""
        if self._owns_hooks:
            self.hooks.close()


def wrap_openai(
    client: Any,
    memory: Any = None,
    *,
    session_key: str | None = None,
    config: Any = None,
    hooks: MemoryHooks | None = None,
) -> OpenAIWithMemory:
    """Wrap an ``OpenAI`` or ``AsyncOpenAI`` client (see the module docstring)."""
    return OpenAIWithMemory(client, memory, session_key=session_key, config=config, hooks=hooks)


# ---------------------------------------------------------------------------
# LangChain
# ---------------------------------------------------------------------------

_MODEL_CLASS: Any = None


def memory_chat_model_class() -> Any:
    """The LangChain ``BaseChatModel`` subclass (built on first use: lazy import)."""
    global _MODEL_CLASS
    if _MODEL_CLASS is not None:
        return _MODEL_CLASS

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import ConfigDict

    def inject(messages: list[BaseMessage], ctx: RecallContext) -> list[BaseMessage]:
        out = list(messages)
        system = ctx.append_system_context
        first = out[0] if out else None
        if isinstance(first, SystemMessage) and isinstance(first.content, str):
            out[0] = first.model_copy(update={"content": f"{first.content}\n\n{system}"})
        else:
            out.insert(0, SystemMessage(content=system))
        if ctx.prepend_context:
            for i in range(len(out) - 1, -1, -1):
                msg = out[i]
                if not isinstance(msg, HumanMessage):
                    continue
                if isinstance(msg.content, str):
                    content: Any = ctx.prepend_context + msg.content
                else:
                    content = [{"type": "text", "text": ctx.prepend_context}, *msg.content]
                out[i] = msg.model_copy(update={"content": content})
                break
        return out

    class MemoryChatModel(BaseChatModel):
        """A chat model with walrus_mem auto-recall and auto-capture around ``model``."""

        model_config = ConfigDict(arbitrary_types_allowed=True)

        model: Any
        hooks: Any
        session_key: str | None = None

        @property
        def _llm_type(self) -> str:
            inner = getattr(self.model, "_llm_type", type(self.model).__name__)
            return f"walrus-memory-{inner}"

        def _key(self, kwargs: dict[str, Any]) -> str | None:
            key = kwargs.pop(SESSION_KWARG, None)
            return key if key is not None else self.session_key

        def _capture(self, messages: list[BaseMessage], reply: BaseMessage, key: str | None
                     ) -> None:
            self.hooks.agent_end([*messages, reply], key, success=True)

        def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                      run_manager: Any = None, **kwargs: Any) -> ChatResult:
            key = self._key(kwargs)
            ctx = self.hooks.before_prompt_build(_last_user_text(messages), key)
            reply = self.model.invoke(inject(messages, ctx), stop=stop, **kwargs)
            self._capture(messages, reply, key)
            return ChatResult(generations=[ChatGeneration(message=reply)])

        async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                             run_manager: Any = None, **kwargs: Any) -> ChatResult:
            key = self._key(kwargs)
            ctx = await self.hooks.abefore_prompt_build(_last_user_text(messages), key)
            reply = await self.model.ainvoke(inject(messages, ctx), stop=stop, **kwargs)
            self._capture(messages, reply, key)
            return ChatResult(generations=[ChatGeneration(message=reply)])

        def memory_tools(self, session_key: str | None = None) -> BoundTools:
            """The memory tools bound to this model's session (or ``session_key``)."""
            key = session_key if session_key is not None else self.session_key
            return BoundTools(self.hooks.memory, session_key=key, config=self.hooks.directory)

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            """Bind tools on the wrapped model; memory stays around it."""
            return self.model_copy(update={"model": self.model.bind_tools(tools, **kwargs)})

    _MODEL_CLASS = MemoryChatModel
    return MemoryChatModel


def with_memory(
    model: Any,
    memory: Any = None,
    *,
    session_key: str | None = None,
    config: Any = None,
    hooks: MemoryHooks | None = None,
) -> Any:
    """Wrap a LangChain chat model (or any Runnable taking messages and returning a message)."""
    cls = memory_chat_model_class()
    return cls(model=model, hooks=_hooks_for(memory, hooks, config), session_key=session_key)
