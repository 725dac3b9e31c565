"""What the differential tests share: a recording LLM whose replies are a function of the prompt, generated inputs,
and the record of one run (answer, every LLM call, source nodes) that core's class and ours must both produce.

Core's class and ours each get their own LLM instance built the same way, so the two call records can be compared
call by call. A reply depends only on the prompt it answers, so any difference in what was asked shows up twice: in
the calls and in the answer.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.base.response.schema import AsyncStreamingResponse, PydanticResponse, StreamingResponse
from llama_index.core.schema import ImageNode, NodeWithScore, TextNode
from llama_index.core.settings import Settings

from llama_index_convrag.testing import ScriptedLLM

CORE_VERSION = tuple(int(p) for p in importlib.metadata.version("llama-index-core").split(".")[:3])
CORE_STREAMS_TOKENS = CORE_VERSION > (0, 14, 22)
"""Core 0.14.22 hands a refine or compact stream over as one delta (the whole answer); 0.14.25 forwards the LLM's
deltas, as ours does (``test_synthesizer_divergences.py::test_stream_deltas``)."""

EXAMPLES = 12
"""Examples per property: modest, so the whole folder runs in well under its 3-minute budget on 2 cores."""
DIFFERENTIAL = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                               HealthCheck.function_scoped_fixture])
"""Every property: the same examples on every run (``derandomize``), no per-example deadline (a loaded 2-core
machine), nothing stored between runs."""

EN_WORDS = ("the bridge opened in 1932 and carries trains across river city north old new people live work "
            "cats sleep hunt mice at night paris capital france milvus stores vectors bm25 keyword search "
            "bread rises with wild yeast").split()
ZH_CHARS = list("东京是日本的首都大桥在年开通猫晚上抓老鼠巴黎法国面包用野生酵母发酵数据库存储向量检索")
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
"""A one-pixel PNG, base64 (what ``ImageNode(image=...)`` takes)."""


def divergence(row: str) -> Any:
    """Marks a test as the check of one documented divergence: ``row`` is its id in docs/COMPATIBILITY.md
    (the ``divergence`` marker; ``test_divergence_rows.py`` checks that every row has a test and every test a row)."""
    return pytest.mark.divergence(row)


def digest(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def reply_for(prompt: str) -> str:
    """The reply to ``prompt``: JSON when the prompt asks for the structured refine answer (a text-completion
    program shows its schema), plain words otherwise. Never empty, never the prompt's own words."""
    if '"query_satisfied"' in prompt:
        return json.dumps(structured_for(prompt))
    h = digest(prompt)
    return f"reply {h % 9973} alpha {h % 31} beta"


def structured_for(prompt: str) -> Dict[str, Any]:
    """The structured refine answer for ``prompt``: about one in three says the context does not answer."""
    h = digest(prompt)
    return {"answer": f"answer {h % 9973}", "query_satisfied": h % 3 != 0}


def recording_llm(*, chat: bool = False, context_window: int = 4096, num_output: int = 256,
                  function_calling: bool = True) -> ScriptedLLM:
    """A fresh recording LLM: replies by :func:`reply_for`, tool calls by :func:`structured_for`."""
    def tool(prompt: str, tools: Sequence[Any]) -> Dict[str, Any]:
        return {"name": tools[0].metadata.name, "args": structured_for(prompt)}

    return ScriptedLLM(mode="fn", fn=reply_for, tool_fn=tool, chat_model=chat, context_window=context_window,
                       num_output=num_output, function_calling=function_calling)


# --- generated inputs ----------------------------------------------------------------------------------------------
english = st.lists(st.sampled_from(EN_WORDS), min_size=1, max_size=30).map(" ".join)
chinese = st.lists(st.sampled_from(ZH_CHARS), min_size=1, max_size=40).map(lambda cs: "".join(cs) + "。")
texts = st.one_of(english, chinese, st.tuples(english, chinese).map(" ".join))
queries = st.one_of(english.map(lambda t: t + "?"), chinese.map(lambda t: t[:-1] + "？"))


def nodes_of(contents: Sequence[str]) -> List[NodeWithScore]:
    """Nodes with fixed ids and falling scores; ``"<image>"`` becomes a one-pixel image node."""
    out = []
    for i, text in enumerate(contents):
        node = ImageNode(image=PNG_1PX, id_=f"n{i}") if text == "<image>" else TextNode(text=text, id_=f"n{i}")
        out.append(NodeWithScore(node=node, score=round(1.0 - i / 100, 2)))
    return out


SETTINGS_FIELDS = ("_llm", "_prompt_helper", "_chat_prompt_helper", "_embed_model", "_callback_manager")
"""What core's ``Settings`` getters fill in (and keep) when a core class reads them."""


@contextmanager
def settings_llm(llm: Any) -> Iterator[None]:
    """``Settings.llm`` assigned for the block, and whatever core's getters cache in ``Settings`` during it dropped
    after: core's factory builds ``no_text`` and ``context_only`` from ``Settings.llm``, and core 0.14.22's
    synthesizers read ``Settings.prompt_helper``, whose getter keeps the helper it builds (ours would then take it
    as one the user assigned)."""
    before = {name: getattr(Settings, name) for name in SETTINGS_FIELDS}
    Settings._llm = llm
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(Settings, name, value)


# --- one run -------------------------------------------------------------------------------------------------------
Call = Tuple[str, str, Tuple[Tuple[str, Tuple[str, ...]], ...]]


def call_record(llm: ScriptedLLM) -> List[Call]:
    """Every call the LLM got: its kind, the flattened prompt, and each message's role and content blocks.

    On a chat model a completion call is recorded as the chat call it is sent as (LlamaIndex's chat LLMs, OpenAI's
    among them, send ``complete(prompt)`` as one user message), so the two ways of asking compare equal."""
    out = []
    for c in llm.calls:
        kind, prompt, messages = c.kind, c.prompt, list(c.messages)
        if llm.chat_model and kind in ("complete", "stream_complete"):
            messages = [ChatMessage(role=MessageRole.USER, content=prompt)]
            kind, prompt = kind.replace("complete", "chat"), llm.messages_to_prompt(messages)
        out.append((kind, prompt, tuple((str(m.role.value), tuple(block_key(b) for b in m.blocks))
                                        for m in messages)))
    return out


def block_key(block: Any) -> str:
    text = getattr(block, "text", None)
    if text is not None:
        return f"text:{text}"
    return f"{block.block_type}:{digest(str(getattr(block, 'image', b'') or b''))}"


@dataclass(frozen=True)
class Run:
    """What one synthesizer or chat engine produced for one input."""

    kind: str
    answer: str
    calls: Tuple[Call, ...]
    sources: Tuple[str, ...]
    deltas: Tuple[str, ...] = ()
    """A streamed answer's deltas, as the reader got them (empty when not streamed)."""


def response_kind(response: Any) -> str:
    for cls in (PydanticResponse, AsyncStreamingResponse, StreamingResponse):
        if isinstance(response, cls):
            return cls.__name__
    return type(response).__name__


def read_deltas(response: Any) -> Tuple[str, ...]:
    """A non-async response's deltas (a stream read to its end), or ``(str(response),)``."""
    if isinstance(response, StreamingResponse):
        return tuple(response.response_gen)
    return (str(response),)


def read_answer(response: Any) -> str:
    return "".join(read_deltas(response))


async def aread_deltas(response: Any) -> Tuple[str, ...]:
    if isinstance(response, AsyncStreamingResponse):
        return tuple([delta async for delta in response.async_response_gen()])
    return read_deltas(response)


def run_synthesizer(build: Callable[[ScriptedLLM], Any], llm_kw: Dict[str, Any], query: str,
                    nodes: Sequence[NodeWithScore], *, use_async: bool = False, **extra: Any) -> Run:
    """Build a synthesizer on a fresh recording LLM, synthesize once (``asynthesize`` and the stream read in one
    event loop when ``use_async``), and record the run."""
    llm = recording_llm(**llm_kw)
    synth = build(llm)

    async def arun() -> Tuple[Any, Tuple[str, ...]]:
        response = await synth.asynthesize(query, list(nodes), **extra)
        return response, await aread_deltas(response)

    if use_async:
        response, deltas = asyncio.run(arun())
    else:
        response = synth.synthesize(query, list(nodes), **extra)
        deltas = read_deltas(response)
    kind = response_kind(response)
    sources = tuple(n.node.node_id for n in (response.source_nodes or []))
    return Run(kind=kind, answer="".join(deltas), calls=tuple(call_record(llm)), sources=sources,
               deltas=deltas if "Streaming" in kind else ())


# --- chat engines ----------------------------------------------------------------------------------------------------
class ListRetriever(BaseRetriever):
    """Returns the same nodes for every query (the retrieval query is seen in the LLM calls, not in the nodes)."""

    def __init__(self, nodes: Sequence[NodeWithScore]) -> None:
        super().__init__()
        self._nodes = list(nodes)

    def _retrieve(self, query_bundle: Any) -> List[NodeWithScore]:
        return list(self._nodes)


@dataclass(frozen=True)
class Conversation:
    """What a chat engine produced over several turns."""

    answers: Tuple[str, ...]
    calls: Tuple[Call, ...]
    sources: Tuple[Tuple[str, ...], ...]
    history: Tuple[Tuple[str, str], ...]


def run_conversation(build: Callable[[ScriptedLLM], Any], llm_kw: Dict[str, Any], messages: Sequence[str], *,
                     streaming: bool = False, use_async: bool = False) -> Conversation:
    """Build an engine on a fresh recording LLM and send ``messages`` one turn each (``chat`` / ``stream_chat``, or
    their async twins in one event loop; a stream is read to its end and its answer written before the next turn)."""
    llm = recording_llm(**llm_kw)
    engine = build(llm)

    def turn(message: str) -> Tuple[str, Any]:
        if not streaming:
            response = engine.chat(message)
            return str(response), response
        response = engine.stream_chat(message)
        text = "".join(response.response_gen)
        wait_until_written(response)
        return text, response

    async def aturn(message: str) -> Tuple[str, Any]:
        if not streaming:
            response = await engine.achat(message)
            return str(response), response
        response = await engine.astream_chat(message)
        text = "".join([d async for d in response.async_response_gen()])
        if response.awrite_response_to_history_task is not None:
            await response.awrite_response_to_history_task
        return text, response

    async def aconversation() -> List[Tuple[str, Any]]:
        return [await aturn(m) for m in messages]

    turns = asyncio.run(aconversation()) if use_async else [turn(m) for m in messages]
    history = tuple((str(m.role.value), str(m.content)) for m in engine.chat_history)
    return Conversation(answers=tuple(text for text, _ in turns), calls=tuple(call_record(llm)),
                        sources=tuple(tuple(n.node.node_id for n in r.source_nodes) for _, r in turns),
                        history=history)


def wait_until_written(response: Any, timeout: float = 10.0) -> None:
    """Core writes a streamed answer to its memory from a thread once the stream ends; wait for it."""
    import time

    deadline = time.monotonic() + timeout
    while not response.is_done and time.monotonic() < deadline:
        time.sleep(0.005)
