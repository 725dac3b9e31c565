"""A scripted, deterministic LLM for tests: fixed / cycle / function-of-prompt / echo modes.

It records every prompt, streams word by word, answers tool calls (structured outputs; streamed, a tool call comes
whole in one chunk), and can be told to fail on a given call or in the middle of a stream.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Callable, Dict, Generator, List, Optional, Sequence, Union

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from llama_index_convrag.errors import ConfigurationError

MODES = ("fixed", "cycle", "fn", "echo")
ToolFn = Callable[[str, Sequence[Any]], Dict[str, Any]]


class ScriptedFailure(RuntimeError):
    """The failure a ScriptedLLM was told to raise."""


@dataclass
class LLMCall:
    """One recorded call: its kind, the flattened prompt, and the tool names offered."""

    kind: str
    prompt: str
    tools: List[str] = field(default_factory=list)
    messages: List[ChatMessage] = field(default_factory=list)


def split_deltas(text: str) -> List[str]:
    """Word-level deltas that concatenate back to ``text`` exactly."""
    return re.findall(r"\S+\s*|\s+", text)


class ScriptedLLM(FunctionCallingLLM):
    """Deterministic LLM. Use the constructors ``fixed``, ``cycle``, ``from_fn`` and ``echo``."""

    mode: str = Field(default="echo")
    responses: List[str] = Field(default_factory=list)
    context_window: int = Field(default=4096)
    num_output: int = Field(default=256)
    chat_model: bool = Field(default=False)
    function_calling: bool = Field(default=True)
    model_name: str = Field(default="scripted")
    fail_on_call: Optional[int] = Field(default=None, description="0-based call index that raises.")
    fail_after_deltas: Optional[int] = Field(default=None, description="Streams raise after this many deltas.")

    _fn: Optional[Callable[[str], str]] = PrivateAttr(default=None)
    _tool_fn: Optional[ToolFn] = PrivateAttr(default=None)
    _calls: List[LLMCall] = PrivateAttr(default_factory=list)
    _cursor: int = PrivateAttr(default=0)

    def __init__(
        self,
        *,
        fn: Optional[Callable[[str], str]] = None,
        tool_fn: Optional[ToolFn] = None,
        **data: Any,
    ) -> None:
        super().__init__(**data)
        if self.mode not in MODES:
            raise ConfigurationError(f"mode must be one of {list(MODES)}, got {self.mode!r}")
        if self.mode == "fn" and fn is None:
            raise ConfigurationError("mode 'fn' needs fn=callable(prompt) -> str")
        if self.mode in ("fixed", "cycle") and not self.responses:
            raise ConfigurationError(f"mode {self.mode!r} needs at least one response")
        self._fn = fn
        self._tool_fn = tool_fn

    # constructors ---------------------------------------------------------------------------
    @classmethod
    def fixed(cls, text: str, **kw: Any) -> "ScriptedLLM":
        return cls(mode="fixed", responses=[text], **kw)

    @classmethod
    def cycle(cls, texts: Sequence[str], **kw: Any) -> "ScriptedLLM":
        return cls(mode="cycle", responses=list(texts), **kw)

    @classmethod
    def from_fn(cls, fn: Callable[[str], str], **kw: Any) -> "ScriptedLLM":
        return cls(mode="fn", fn=fn, **kw)

    @classmethod
    def echo(cls, **kw: Any) -> "ScriptedLLM":
        return cls(mode="echo", **kw)

    @classmethod
    def class_name(cls) -> str:
        return "ScriptedLLM"

    # records ---------------------------------------------------------------------------------
    @property
    def calls(self) -> List[LLMCall]:
        return list(self._calls)

    @property
    def prompts(self) -> List[str]:
        return [c.prompt for c in self._calls]

    @property
    def call_count(self) -> int:
        return len(self._calls)

    def reset_calls(self) -> None:
        self._calls.clear()
        self._cursor = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.num_output,
            is_chat_model=self.chat_model,
            is_function_calling_model=self.function_calling,
            model_name=self.model_name,
        )

    # core ------------------------------------------------------------------------------------
    def _answer(self, kind: str, prompt: str, messages: Sequence[ChatMessage] = (), tools: Sequence[Any] = ()) -> str:
        index = len(self._calls)
        self._calls.append(
            LLMCall(kind=kind, prompt=prompt, tools=[t.metadata.name for t in tools], messages=list(messages))
        )
        if self.fail_on_call is not None and index == self.fail_on_call:
            raise ScriptedFailure(f"scripted failure on call {index}")
        if self.mode == "echo":
            return prompt
        if self.mode == "fn":
            assert self._fn is not None
            return self._fn(prompt)
        if self.mode == "fixed":
            return self.responses[0]
        text = self.responses[self._cursor % len(self.responses)]
        self._cursor += 1
        return text

    def _deltas(self, text: str) -> Generator[str, None, None]:
        for i, delta in enumerate(split_deltas(text)):
            if self.fail_after_deltas is not None and i >= self.fail_after_deltas:
                raise ScriptedFailure(f"scripted failure after {i} deltas")
            yield delta

    def _flatten(self, messages: Sequence[ChatMessage]) -> str:
        return self.messages_to_prompt(messages)

    # one instrumented call per request, as a real client's: the async methods call the undecorated bodies
    # (not the decorated sync methods, which would wrap every call, and every streamed token, twice)
    def _complete(self, prompt: str) -> CompletionResponse:
        return CompletionResponse(text=self._answer("complete", prompt))

    def _stream_complete(self, prompt: str) -> CompletionResponseGen:
        text = self._answer("stream_complete", prompt)

        def gen() -> CompletionResponseGen:
            so_far = ""
            for delta in self._deltas(text):
                so_far += delta
                yield CompletionResponse(text=so_far, delta=delta)

        return gen()

    def _chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        tools = kwargs.get("tools") or []
        text = self._answer("chat", self._flatten(messages), messages, tools)
        if tools:
            return self._tool_response(text, messages, tools)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    def _stream_chat(self, messages: Sequence[ChatMessage], tools: Sequence[Any] = ()) -> ChatResponseGen:
        text = self._answer("stream_chat", self._flatten(messages), messages, tools)
        if tools:  # a streamed tool call arrives whole, in one chunk
            call = self._tool_response(text, messages, tools)

            def one() -> ChatResponseGen:
                yield call

            return one()

        def gen() -> ChatResponseGen:
            so_far = ""
            for delta in self._deltas(text):
                so_far += delta
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=so_far), delta=delta)

        return gen()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self._complete(prompt)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        return self._stream_complete(prompt)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._chat(messages, **kwargs)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        return self._stream_chat(messages, kwargs.get("tools") or [])

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self._complete(prompt)

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        return _as_async(self._stream_complete(prompt))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._chat(messages, **kwargs)

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        return _as_async(self._stream_chat(messages, kwargs.get("tools") or []))

    # function calling ------------------------------------------------------------------------
    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: Optional[Union[str, ChatMessage]] = None,
        chat_history: Optional[List[ChatMessage]] = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> Dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(user_msg if isinstance(user_msg, ChatMessage) else ChatMessage(role="user", content=user_msg))
        return {"messages": messages, "tools": list(tools)}

    def _tool_response(self, text: str, messages: Sequence[ChatMessage], tools: Sequence[Any]) -> ChatResponse:
        """A tool call: ``tool_fn(prompt, tools)`` if given, else the scripted text parsed as the first tool's JSON args."""
        if self._tool_fn is not None:
            call = self._tool_fn(self._flatten(messages), tools)
            name, args = call["name"], call["args"]
        else:
            name = tools[0].metadata.name
            try:
                args = json.loads(text)
            except json.JSONDecodeError:
                args = {"__unparsable__": text}
        selection = {"tool_id": f"call_{len(self._calls)}", "tool_name": name, "tool_kwargs": args}
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content="", additional_kwargs={"tool_calls": [selection]})
        )

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> List[ToolSelection]:
        raw = response.message.additional_kwargs.get("tool_calls", [])
        if not raw and error_on_no_tool_call:
            raise ConfigurationError("expected at least one tool call")
        return [ToolSelection(**r) for r in raw]


async def _as_async(items: Generator[Any, None, None]) -> AsyncGenerator[Any, None]:
    """A sync generator's items, as an async generator."""
    for item in items:
        yield item
