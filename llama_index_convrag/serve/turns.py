"""One served turn as a stream of ``(event, data)`` pairs, shared by the conversation API and the OpenAI endpoint.

:func:`open_turn` makes the engine for the turn over its port (:class:`~.turn_store.ServedTurn`, the engine's own
port with the service's work added) and loads the turn through it. The route has already read the key, the owner and
the knowledge base in a store call (the knowledge base chooses the engine, so it is known before the engine is made)
and built that base's engine if this is its first turn. The load is one store call (``ServeState.store_call``: in
the thread pool unless ``store_on_loop``): the caller's ``check`` when there is one, the turn claim (one turn in
flight per conversation, else 409) and the user message and the assistant placeholder stored, before the response
starts.
:func:`turn_events` then yields ``start`` (the ids, before retrieval), ``retrieval`` when the engine hands back its
stream, ``delta`` per piece of text (the text so far saved into the placeholder now and then:
``ServedTurn.aprogress``), and last ``done`` or ``error``, once the engine has committed the turn through
the port: one more store call writes the answer and releases the claim. The engine touches no database in between (the
saves of the text so far are the service's, bounded by ``limits.partial_save_s``).
When the consumer stops (the client went away: the stream's task is cancelled) the engine's stream is closed, which
commits the message ``cancelled`` with the text so far (no text when the engine had not answered yet); the claim is
released in every case.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from typing import Any, AsyncGenerator, Callable, Dict, List, Optional, Tuple

import anyio

from llama_index_convrag.chat.port import TurnContext, TurnOutcome
from llama_index_convrag.serve.errors import error_body
from llama_index_convrag.serve.models import raw_citation
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.serve.turn_store import ServedTurn
from llama_index_convrag.serve.views import DocumentNames, event_view
from llama_index_convrag.storage.conversation.base import Message

logger = logging.getLogger(__name__)
Event = Tuple[str, Dict[str, Any]]


@dataclass(frozen=True)
class OpenTurn:
    """A claimed turn whose user message and placeholder are stored: its port, its engine and what was loaded."""

    port: ServedTurn
    engine: Any
    context: TurnContext
    #: ``time.perf_counter()`` when the turn's request arrived (the ``done`` event's ``timings`` count from it)
    began: float
    #: the knowledge base the turn answers from (handed to ``state.engine_for``)
    knowledge_base: Any = None

    @property
    def conversation_id(self) -> str:
        return self.context.request.conversation_id

    @property
    def user(self) -> Message:
        return self.context.user

    @property
    def placeholder(self) -> Message:
        return self.context.placeholder


async def open_turn(state: ServeState, conversation_id: str, question: str, regenerate: Optional[Message] = None,
                    check: Optional[Callable[[], None]] = None,
                    claimed: Optional[Callable[[], None]] = None, began: Optional[float] = None,
                    knowledge_base: Any = None, owner: Optional[str] = None) -> OpenTurn:
    """Load the turn through its port in one store call: run ``check`` (it raises the route's 4xx), claim the
    conversation (409 ``turn_in_flight`` when another turn holds it), run ``claimed`` (work that needs the claim) and
    store the turn. ``began``: when the request arrived (``limits.arrived_at``; None: now); ``knowledge_base``: the
    one the turn answers from (``state.prepare_engine`` has built its engine); ``owner``: the caller's user id (the
    turn's memory is read and written as theirs; None: the engine's owner)."""
    began = began if began is not None else time.perf_counter()
    port = ServedTurn(state, check=check, claimed=claimed, regenerate=regenerate)
    engine = state.engine_for(conversation_id, port, knowledge_base)
    request = engine.turn_request(question, streaming=True)
    if owner is not None:
        request = replace(request, owner=owner)
    try:
        context = await port.aload(request)
    except asyncio.CancelledError:  # the request went away while the thread ran: undo what it did
        with anyio.CancelScope(shield=True):
            await port.aclose()
        raise
    return OpenTurn(port, engine, context, began, knowledge_base)


def references(response: Any) -> List[Dict[str, Any]]:
    """The retrieved passages the answer sees, in source order."""
    out = []
    for i, n in enumerate(getattr(response, "source_nodes", None) or [], start=1):
        node = n.node
        out.append({"source_index": i, "node_id": node.node_id, "ref_doc_id": node.ref_doc_id, "score": n.score,
                    "text": node.get_content(), "metadata": dict(node.metadata)})
    return out


def retrieval_data(response: Any) -> Dict[str, Any]:
    """The retrieval query, why it reads so (the turn record's rewrite fields) and the references."""
    record = (getattr(response, "metadata", None) or {}).get("turn")
    rewrite = None if record is None else {
        "strategy": record.rewrite_strategy, "used_llm": record.rewrite_used_llm,
        "skipped_reason": record.rewrite_skipped_reason, "fallback_reason": record.rewrite_fallback_reason}
    return {"retrieval_query": None if record is None else record.retrieval_query, "rewrite": rewrite,
            "references": references(response)}


def start_data(user: Message, placeholder: Message) -> Dict[str, Any]:
    return {"conversation_id": placeholder.conversation_id, "user_message_id": user.id,
            "assistant_message_id": placeholder.id, "reply_to": placeholder.reply_to, "version": placeholder.version}


def done_data(message_id: str, finished: TurnOutcome, response: Any, timings: Dict[str, float]) -> Dict[str, Any]:
    """The final event: the answer as written, its citations, the trim report and the turn's timings."""
    trim = (getattr(response, "metadata", None) or {}).get("trim_report")
    trim_view = trim.to_dict() if hasattr(trim, "to_dict") else trim if isinstance(trim, dict) else None
    return {"assistant_message_id": message_id, "status": finished.status, "content": finished.content,
            "citations": [raw_citation(c) for c in finished.citations], "trim_report": trim_view,
            "timings": timings}


def timings(turn: OpenTurn, engine_began: float, engine_s: float) -> Dict[str, float]:
    """From the request's arrival: ``server_ms`` to the final event, ``start_ms`` to the engine's start (the key
    check, the first store call, the ``start`` event); ``engine_ms``: the engine's part (retrieval to the last token).
    ``server_ms - engine_ms`` is the server's own work (routing, key check, store calls, events) and its waits for
    the loop."""
    return {"server_ms": round(1000 * (time.perf_counter() - turn.began), 3),
            "start_ms": round(1000 * (engine_began - turn.began), 3), "engine_ms": round(1000 * engine_s, 3)}


async def turn_events(state: ServeState, turn: OpenTurn, names: Optional[DocumentNames] = None
                      ) -> AsyncGenerator[Event, None]:
    """Run one opened turn (see the module docstring). ``names``: the events as clients see them
    (:func:`~.views.event_view`: references and citations with document names); None: as the engine gave them."""
    def shown(name: str, data: Dict[str, Any]) -> Dict[str, Any]:
        return data if names is None else event_view(name, data, names)

    response: Any = None
    closed = False
    try:
        yield "start", start_data(turn.user, turn.placeholder)
        failure: Optional[BaseException] = None
        engine_began = time.perf_counter()
        try:
            response = await turn.engine.astream_turn(turn.context)
            yield "retrieval", shown("retrieval", retrieval_data(response))
            parts: List[str] = []
            port, clock = turn.port, time.monotonic
            async for delta in response.async_response_gen():
                yield "delta", {"text": delta}
                parts.append(delta)
                if clock() >= port.save_due_at:  # the text so far, saved now and then (what a crash keeps)
                    await port.aprogress(parts)
            if response.status == "error":
                failure = RuntimeError("the answer stream failed")
        except Exception as e:  # the engine committed the message as error (when it got that far)
            logger.warning("turn failed (error id %s, conversation %s)", turn.placeholder.id, turn.conversation_id,
                           exc_info=e)
            failure = e
        engine_s = time.perf_counter() - engine_began
        try:
            finished = await turn.port.aclose()  # no store call: the engine committed the turn (else: cancelled)
        except Exception as e:
            logger.exception("could not store the turn (error id %s, conversation %s)", turn.placeholder.id,
                             turn.conversation_id)
            closed = True  # close released the claim
            yield "error", _error_data(turn, e)
            return
        closed = True
        assert finished is not None
        if failure is not None:
            yield "error", _error_data(turn, failure)
        else:
            yield "done", shown("done", done_data(turn.placeholder.id, finished, response,
                                                  timings(turn, engine_began, engine_s)))
    finally:
        if not closed:
            with anyio.CancelScope(shield=True):
                await _settle(state, turn, response)


def _error_data(turn: OpenTurn, error: BaseException) -> Dict[str, Any]:
    """The ``error`` event: no internals, the error id (the assistant message's) the server log has it under."""
    return {"assistant_message_id": turn.placeholder.id, "status": "error",
            "error": error_body(500, "turn_failed", f"the answer failed (error id {turn.placeholder.id}; the server "
                                                    "log has the details)")["error"]}


async def _settle(state: ServeState, turn: OpenTurn, response: Any) -> None:
    """The consumer stopped: close the engine's stream (it commits ``cancelled`` with the text so far), then close
    the port (``cancelled`` without text if nothing was committed; the claim released)."""
    try:
        if response is not None:
            await response.aclose()
    finally:
        await turn.port.aclose()


async def fold(events: AsyncGenerator[Event, None]) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    """A non-streamed turn: ``(every event's data merged in order, the error event's data or None)``; ``content``
    is the whole answer (the ``done`` event's, else the deltas joined)."""
    out: Dict[str, Any] = {}
    text: List[str] = []
    async for name, data in events:
        if name == "delta":
            text.append(data["text"])
        elif name == "error":
            return out, data
        else:
            out.update(data)
    out.setdefault("content", "".join(text))
    return out, None
