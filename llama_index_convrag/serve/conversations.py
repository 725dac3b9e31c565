"""The conversation API: conversations, their messages (a streamed turn), citations, turn records, versions,
regenerate and feedback. The routes a chat page calls every turn or load (a turn, regenerate, create / list / read a
conversation) are async and make their store calls through ``ServeState.store_call`` (on the loop for SQLite, in the
thread pool for PostgreSQL); the others only read or write the store and are sync (FastAPI runs them in its thread
pool)."""

from __future__ import annotations

from functools import partial
from typing import Any, AsyncGenerator, AsyncIterator, Callable, Dict, List, Optional, Tuple

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.access import check_page, check_question, owned_conversation, owned_message
from llama_index_convrag.serve.auth import Caller, caller, current_user
from llama_index_convrag.serve.errors import APIError
from llama_index_convrag.serve.limits import arrived_at
from llama_index_convrag.serve.models import (NewConversation, NewFeedback, NewMessage, Regenerate, Rename,
                                              citation_view, message_view)
from llama_index_convrag.serve.sse import SSE_HEADERS, EventStreamResponse, coalesced, frame
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.serve.turns import Event, fold, open_turn, turn_events
from llama_index_convrag.storage.conversation.base import Message
from llama_index_convrag.storage.conversation.recovery import ABANDONED_ERROR

router = APIRouter(prefix="/v1", tags=["conversations"])


def _state(request: Request) -> ServeState:
    return request.app.state.serve


def _messages_view(state: ServeState, messages: List[Message], user: str) -> List[Dict[str, Any]]:
    """The messages as the API shows them; an answer with its versions, citations and ``user``'s feedback (read
    for all answers at once)."""
    versions: Dict[str, List[str]] = {}
    for m in messages:
        if m.role == "assistant" and m.reply_to is not None:
            versions.setdefault(m.reply_to, []).append(m.id)
    answers = [m.id for m in messages if m.role == "assistant"]
    citations = state.store.get_citations_of(answers)
    feedback = state.store.get_feedback_of(answers, user)
    out = []
    for m in messages:
        view = message_view(m)
        if m.role == "assistant":
            view["versions"] = versions.get(m.reply_to, [m.id]) if m.reply_to is not None else [m.id]
            view["citations"] = [citation_view(c) for c in citations[m.id]]
            view["feedback"] = feedback[m.id].to_dict() if m.id in feedback else None
        out.append(view)
    return out


@router.post("/conversations", status_code=201)
async def create_conversation(body: NewConversation, request: Request,
                              user: str = Depends(current_user)) -> JSONResponse:
    state = _state(request)
    info = await state.store_call(state.store.create_conversation, user, body.title)
    return JSONResponse(info.to_dict(), status_code=201)


@router.get("/conversations")
async def list_conversations(request: Request, limit: Optional[int] = Query(default=None),
                             cursor: Optional[str] = Query(default=None, max_length=200),
                             user: str = Depends(current_user)) -> Dict[str, Any]:
    state = _state(request)
    size = check_page(state, state.limits.default_page_size if limit is None else limit)
    try:
        page, next_cursor = await state.store_call(state.store.list_owned, user, size, cursor)
    except ConfigurationError as e:
        raise APIError(400, "bad_cursor", str(e), "cursor") from e
    return {"data": [c.to_dict() for c in page], "next_cursor": next_cursor}


def _conversation_view(state: ServeState, conversation_id: str, user: str) -> Dict[str, Any]:
    info = owned_conversation(state, conversation_id, user)
    return {**info.to_dict(), "messages": _messages_view(state, state.store.get_conversation(conversation_id), user)}


@router.get("/conversations/{conversation_id}")
async def get_conversation(conversation_id: str, request: Request,
                           user: str = Depends(current_user)) -> Dict[str, Any]:
    state = _state(request)
    return await state.store_call(_conversation_view, state, conversation_id, user)


@router.patch("/conversations/{conversation_id}")
def rename_conversation(conversation_id: str, body: Rename, request: Request,
                        user: str = Depends(current_user)) -> Dict[str, Any]:
    state = _state(request)
    owned_conversation(state, conversation_id, user)
    state.store.rename_conversation(conversation_id, body.title)
    return owned_conversation(state, conversation_id, user).to_dict()


@router.delete("/conversations/{conversation_id}", status_code=204)
def delete_conversation(conversation_id: str, request: Request, user: str = Depends(current_user)) -> Response:
    state = _state(request)
    owned_conversation(state, conversation_id, user)
    state.store.delete_conversation(conversation_id)
    return Response(status_code=204)


async def _sse(events: AsyncIterator[Event]) -> AsyncGenerator[bytes, None]:
    async for name, data in events:
        yield frame(name, data)


async def _collect(events: AsyncGenerator[Event, None]) -> JSONResponse:
    """A non-streamed turn: the events folded into one JSON answer (500 in the one shape on error, the message
    stored as error named in its text)."""
    out, error = await fold(events)
    if error is not None:
        return JSONResponse({"error": dict(error["error"], message=f"{error['error']['message']} (assistant message "
                                                                   f"{error['assistant_message_id']})")},
                            status_code=500)
    return JSONResponse(out)


async def _turn(state: ServeState, request: Request, conversation_id: str, question: str, stream: bool,
                regenerate: Optional[Message] = None, check: Optional[Callable[[], None]] = None,
                claimed: Optional[Callable[[], None]] = None) -> Response:
    turn = await open_turn(state, conversation_id, question, regenerate, check, claimed,
                           began=arrived_at(request.scope))
    events = turn_events(state, turn)
    if stream:
        running = coalesced(events, state.stream_window_s)  # the turn starts now, while the response is set up
        return EventStreamResponse(_sse(running), running, headers=SSE_HEADERS)
    return await _collect(events)


@router.post("/conversations/{conversation_id}/messages",
             responses={200: {"description": "text/event-stream (see docs/SERVE.md), or JSON with stream=false"}})
async def post_message(conversation_id: str, body: NewMessage, request: Request,
                       who: Caller = Depends(caller)) -> Response:
    state = _state(request)

    def check() -> None:  # in the turn's first store call: the key, the question's length, the owner
        user = who.user()
        check_question(state, body.content)
        owned_conversation(state, conversation_id, user)

    return await _turn(state, request, conversation_id, body.content, body.stream, check=check)


@router.get("/messages/{message_id}")
def get_message(message_id: str, request: Request, user: str = Depends(current_user)) -> Dict[str, Any]:
    state = _state(request)
    message = owned_message(state, message_id, user)
    siblings = [m for m in state.store.get_conversation(message.conversation_id)
                if m.id == message.id or (m.reply_to is not None and m.reply_to == message.reply_to)]
    return next(v for v in _messages_view(state, siblings, user) if v["id"] == message_id)


@router.get("/messages/{message_id}/citations")
def get_citations(message_id: str, request: Request, user: str = Depends(current_user)) -> Dict[str, Any]:
    state = _state(request)
    owned_message(state, message_id, user)
    return {"data": [citation_view(c) for c in state.store.get_citations(message_id)]}


@router.get("/messages/{message_id}/turn")
def get_turn(message_id: str, request: Request, user: str = Depends(current_user)) -> Dict[str, Any]:
    state = _state(request)
    owned_message(state, message_id, user)
    record = state.store.get_turn_record(message_id)
    if record is None:
        raise APIError(404, "not_found", f"message {message_id!r} has no turn record (not an answer, or not "
                                         "finished)")
    return record


@router.get("/messages/{message_id}/versions")
def get_versions(message_id: str, request: Request, user: str = Depends(current_user)) -> Dict[str, Any]:
    state = _state(request)
    message = owned_message(state, message_id, user)
    if message.role != "assistant" or message.reply_to is None:
        return {"data": _messages_view(state, [message], user)}
    same = [m for m in state.store.get_conversation(message.conversation_id) if m.reply_to == message.reply_to]
    return {"data": _messages_view(state, same, user)}


@router.post("/messages/{message_id}/regenerate",
             responses={200: {"description": "text/event-stream as for messages, or JSON with stream=false"}})
async def regenerate(message_id: str, body: Regenerate, request: Request,
                     who: Caller = Depends(caller)) -> Response:
    state = _state(request)
    message, latest_user = await state.store_call(_regeneration_target, state, message_id, who)
    return await _turn(state, request, message.conversation_id, latest_user.content, body.stream, regenerate=latest_user,
                       claimed=partial(_abandon_pending, state, message) if message.status == "pending" else None)


def _abandon_pending(state: ServeState, message: Message) -> None:
    """A ``pending`` answer no turn is answering (the claim was free): a worker died mid-turn; finalise it ``error``
    before its regeneration (called holding the claim, a store call)."""
    stored = state.store.get_message(message.id)
    if stored is not None and stored.status == "pending":
        state.store.finalize_message(message.id, content=stored.content, status="error", error=ABANDONED_ERROR)


def _regeneration_target(state: ServeState, message_id: str, who: Caller) -> Tuple[Message, Message]:
    """``(the answer, the user message it replies to)``; 401 for a bad key, 404 for another user's id, 400 unless it
    is the newest answer of its conversation (store reads: a store call)."""
    message = owned_message(state, message_id, who.user())
    if message.role != "assistant" or message.reply_to is None:
        raise APIError(400, "not_regenerable", f"message {message_id!r} is not an assistant answer", "message_id")
    messages = state.store.get_conversation(message.conversation_id)
    latest_user = next((m for m in reversed(messages) if m.role == "user"), None)
    if latest_user is None or latest_user.id != message.reply_to or message.superseded_by is not None:
        raise APIError(400, "not_regenerable", f"only the newest answer of a conversation can be regenerated; "
                                               f"{message_id!r} is not it", "message_id")
    return message, latest_user


@router.post("/messages/{message_id}/feedback")
def post_feedback(message_id: str, body: NewFeedback, request: Request,
                  user: str = Depends(current_user)) -> Dict[str, Any]:
    state = _state(request)
    message = owned_message(state, message_id, user)
    if message.role != "assistant":
        raise APIError(400, "not_an_answer", f"feedback goes on assistant messages; {message_id!r} is a "
                                             f"{message.role} message", "message_id")
    return state.store.put_feedback(message_id, user, body.rating, body.text).to_dict()
