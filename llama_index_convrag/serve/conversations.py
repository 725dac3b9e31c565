"""The conversation API: conversations (each bound to a knowledge base its owner may read), their messages (a
streamed turn, resumable by event id, cancellable), citations, turn records, versions, regenerate and feedback. The
routes a chat page calls every turn or load (a turn, regenerate, create / list / read a conversation) are async and
make their store calls through ``ServeState.store_call`` (on the loop for SQLite, in the thread pool for
PostgreSQL); the others only read or write the store and are sync (FastAPI runs them in its thread pool)."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, AsyncIterator, Callable, Dict, List, Optional, Tuple

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.access import (check_page, check_question, conversation_kb, owned_conversation,
                                              owned_message, readable_kb, title_from)
from llama_index_convrag.serve.deps import ChatUser, KeyCaller, State, TurnCaller, require
from llama_index_convrag.serve.errors import APIError, error_body
from llama_index_convrag.serve.events import Event, TurnLog
from llama_index_convrag.serve.limits import arrived_at
from llama_index_convrag.serve.models import (SSE_DOC, CitationList, ConversationDetail, ConversationOut,
                                              ConversationPage, FeedbackOut, MessageList, MessageOut, NewConversation,
                                              NewFeedback, NewMessage, Regenerate, Rename, TurnOut, doc)
from llama_index_convrag.serve.sse import TurnStream
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.serve.turns import fold, open_turn, turn_events
from llama_index_convrag.serve.views import (DocumentNames, message_view, public_citation, public_error,
                                             record_view, versions_of)
from llama_index_convrag.storage.conversation.accounts import ConversationInfo, Principal
from llama_index_convrag.storage.conversation.base import Message
from llama_index_convrag.storage.conversation.knowledge import KnowledgeBase

router = APIRouter(prefix="/v1", tags=["conversations"])


def names_of(state: ServeState, kb: Optional[KnowledgeBase]) -> DocumentNames:
    """How ``kb``'s documents are named (no base, or no document index: by their file name)."""
    if kb is None or state.documents is None:
        return DocumentNames()
    return state.documents.names(kb)


def _kb_of(state: ServeState, info: ConversationInfo) -> Optional[KnowledgeBase]:
    if info.kb_id is None:
        return state.default_kb
    return state.store.knowledge_base(info.kb_id)


def conversation_view(state: ServeState, info: ConversationInfo) -> Dict[str, Any]:
    kb_id = info.kb_id if info.kb_id is not None else (state.default_kb.id if state.default_kb else None)
    return {**info.to_dict(), "knowledge_base": kb_id}


def _messages_view(state: ServeState, messages: List[Message], user: str, names: DocumentNames
                   ) -> List[Dict[str, Any]]:
    """The messages as the API shows them; an answer with its versions, citations and ``user``'s feedback (read
    for all answers at once)."""
    versions = versions_of(messages)
    answers = [m.id for m in messages if m.role == "assistant"]
    citations = state.store.get_citations_of(answers)
    feedback = state.store.get_feedback_of(answers, user)
    out = []
    for m in messages:
        view = message_view(m)
        if m.role == "assistant":
            view["versions"] = versions.get(m.reply_to, [m.id]) if m.reply_to is not None else [m.id]
            view["citations"] = [public_citation(c, names) for c in citations[m.id]]
            view["feedback"] = feedback[m.id].to_dict() if m.id in feedback else None
        out.append(view)
    return out


def _create(state: ServeState, principal: Principal, body: NewConversation) -> Dict[str, Any]:
    require(principal, "chat")
    kb, _ = readable_kb(state, body.knowledge_base, principal)
    info = state.store.create_conversation(principal.user_id, body.title, kb_id=kb.id)
    return conversation_view(state, info)


@router.post("/conversations", status_code=201, responses=doc(ConversationOut, 400, 403, 404))
async def create_conversation(body: NewConversation, who: KeyCaller) -> JSONResponse:
    state = who.state
    view = await state.store_call(lambda: _create(state, who.principal(), body))
    return JSONResponse(view, status_code=201)


def _list(state: ServeState, who: Any, size: Optional[int], cursor: Optional[str]) -> Dict[str, Any]:
    principal = require(who.principal(), "chat")
    size = check_page(state, state.limits.default_page_size if size is None else size)
    try:
        page, next_cursor = state.store.list_owned(principal.user_id, size, cursor)
    except ConfigurationError as e:
        raise APIError(400, "bad_cursor", str(e), "cursor") from e
    return {"data": [conversation_view(state, c) for c in page], "next_cursor": next_cursor}


@router.get("/conversations", responses=doc(ConversationPage, 400, 403))
async def list_conversations(who: KeyCaller, limit: Optional[int] = Query(default=None),
                             cursor: Optional[str] = Query(default=None, max_length=200)) -> Dict[str, Any]:
    state = who.state
    return await state.store_call(_list, state, who, limit, cursor)


def _conversation(state: ServeState, who: Any, conversation_id: str) -> Dict[str, Any]:
    principal = require(who.principal(), "chat")
    info = owned_conversation(state, conversation_id, principal.user_id)
    names = names_of(state, _kb_of(state, info))
    messages = _messages_view(state, state.store.get_conversation(conversation_id), principal.user_id, names)
    return {**conversation_view(state, info), "messages": messages}


@router.get("/conversations/{conversation_id}", responses=doc(ConversationDetail, 403, 404))
async def get_conversation(conversation_id: str, who: KeyCaller) -> Dict[str, Any]:
    state = who.state
    return await state.store_call(_conversation, state, who, conversation_id)


@router.patch("/conversations/{conversation_id}", responses=doc(ConversationOut, 400, 403, 404))
def rename_conversation(conversation_id: str, body: Rename, state: State, principal: ChatUser) -> Dict[str, Any]:
    owned_conversation(state, conversation_id, principal.user_id)
    state.store.rename_conversation(conversation_id, body.title)
    return conversation_view(state, owned_conversation(state, conversation_id, principal.user_id))


@router.delete("/conversations/{conversation_id}", status_code=204, responses=doc(None, 403, 404))
def delete_conversation(conversation_id: str, state: State, principal: ChatUser) -> Response:
    """Delete a conversation with everything stored for it: messages, citations, records, its summary, and its
    messages indexed for recall (the user's facts are theirs and stay: /v1/memory/facts)."""
    owned_conversation(state, conversation_id, principal.user_id)
    if state.memory is not None:
        state.memory.delete_conversation(principal.user_id, conversation_id)
    state.store.delete_conversation(conversation_id)
    return Response(status_code=204)


# --- turns -----------------------------------------------------------------------------------------------------
async def _collect(events: AsyncIterator[Event]) -> JSONResponse:
    """A non-streamed turn: the events folded into one JSON answer (500 in the one shape on error, the message
    stored as error named in its text)."""
    out, error = await fold(events)  # type: ignore[arg-type]
    if error is not None:
        return JSONResponse({"error": error["error"]}, status_code=500)
    return JSONResponse(out)


async def run_turn(state: ServeState, request: Request, conversation_id: str, question: str, stream: bool,
                   knowledge_base: KnowledgeBase, regenerate: Optional[Message] = None,
                   claimed: Optional[Callable[[], None]] = None, owner: Optional[str] = None) -> Response:
    """Build the knowledge base's engine if this is its first turn, open the turn on it (``owner``: the caller, whose
    memory the turn reads and writes), then stream its events (kept in the turn's log, so a client can resume them)
    or fold them into one JSON answer."""
    await state.prepare_engine(knowledge_base)
    turn = await open_turn(state, conversation_id, question, regenerate, claimed=claimed,
                           began=arrived_at(request.scope), knowledge_base=knowledge_base, owner=owner)
    events = turn_events(state, turn, names_of(state, knowledge_base))
    if stream:  # the turn starts now, while the response is set up; its start event is in the log already
        log = state.logs.add(turn.placeholder.id, await TurnLog.begin(events, state.stream_window_s,
                                                                      state.limits.resume_grace_s))
        return TurnStream(log.reader(), ping_s=state.limits.ping_s)
    return await _collect(events)


def _turn_check(state: ServeState, who: Any, conversation_id: str, question: str) -> Tuple[KnowledgeBase, str]:
    """Before the turn (a store call): the key, its scope, the question's length, the owner, the knowledge base;
    a conversation still without a title is titled from this question. ``(the knowledge base, the caller's id)``."""
    principal = require(who.principal(), "chat")
    check_question(state, question)
    info = owned_conversation(state, conversation_id, principal.user_id)
    kb = conversation_kb(state, info, principal)
    if info.title is None and info.message_count == 0:
        state.store.rename_conversation(conversation_id, title_from(question))
    return kb, principal.user_id


@router.post("/conversations/{conversation_id}/messages", responses=doc(TurnOut, 400, 403, 404, 409,
                                                                         description=SSE_DOC))
async def post_message(conversation_id: str, body: NewMessage, request: Request, who: TurnCaller) -> Response:
    state = who.state
    kb, owner = await state.store_call(_turn_check, state, who, conversation_id, body.content)
    return await run_turn(state, request, conversation_id, body.content, body.stream, kb, owner=owner)


def _regeneration_target(state: ServeState, message_id: str, who: Any
                         ) -> Tuple[Message, Message, KnowledgeBase, str]:
    """``(the answer, the user message it replies to, the knowledge base, the caller's id)``; 401 for a bad key, 404 for another
    user's id, 400 unless it is the newest answer of its conversation (store reads: a store call)."""
    principal = require(who.principal(), "chat")
    message = owned_message(state, message_id, principal.user_id)
    if message.role != "assistant" or message.reply_to is None:
        raise APIError(400, "not_regenerable", f"message {message_id!r} is not an assistant answer", "message_id")
    info = owned_conversation(state, message.conversation_id, principal.user_id)
    kb = conversation_kb(state, info, principal)
    messages = state.store.get_conversation(message.conversation_id)
    latest_user = next((m for m in reversed(messages) if m.role == "user"), None)
    if latest_user is None or latest_user.id != message.reply_to or message.superseded_by is not None:
        raise APIError(400, "not_regenerable", f"only the newest answer of a conversation can be regenerated; "
                                               f"{message_id!r} is not it", "message_id")
    return message, latest_user, kb, principal.user_id


@router.post("/messages/{message_id}/regenerate", responses=doc(TurnOut, 400, 403, 404, 409,
                                                                description=SSE_DOC))
async def regenerate(message_id: str, body: Regenerate, request: Request, who: TurnCaller) -> Response:
    state = who.state
    message, latest_user, kb, owner = await state.store_call(_regeneration_target, state, message_id, who)
    # a 'pending' answer whose claim is free (its worker died) is marked 'interrupted' by the turn's load
    return await run_turn(state, request, message.conversation_id, latest_user.content, body.stream, kb,
                          regenerate=latest_user, owner=owner)


def _own_message(state: ServeState, who: Any, message_id: str) -> Tuple[Message, Principal]:
    principal = require(who.principal(), "chat")
    return owned_message(state, message_id, principal.user_id), principal


@router.get("/messages/{message_id}/events", responses=doc(None, 403, 404, 409, description=(
    "text/event-stream: the turn's events after Last-Event-ID (all without it), then the new ones until its last; "
    "once the turn's log is gone: start and the final done/error read from the store")))
async def resume_events(message_id: str, who: KeyCaller,
                        last_event_id: Annotated[Optional[str], Header(alias="Last-Event-ID")] = None,
                        after: Annotated[Optional[int], Query(ge=0, description="As Last-Event-ID.")] = None
                        ) -> Response:
    state = who.state
    message, principal = await state.store_call(_own_message, state, who, message_id)
    if message.role != "assistant":
        raise APIError(400, "not_an_answer", f"{message_id!r} is a {message.role} message; events belong to answers",
                       "message_id")
    start = after if after is not None else _event_id(last_event_id)
    log = state.logs.get(message_id)
    if log is None:
        if message.status == "pending":
            raise _elsewhere(message_id)
        events = await state.store_call(_stored_events, state, message, principal)
        log, start = TurnLog(_replay(events), window_s=0), 0
    return TurnStream(log.reader(), after=start, ping_s=state.limits.ping_s)


def _event_id(header: Optional[str]) -> int:
    if header is None or not header.strip():
        return 0
    if not header.strip().isdigit():
        raise APIError(400, "bad_event_id", f"Last-Event-ID must be an event id this server sent (a number), got "
                                            f"{header!r}", "Last-Event-ID")
    return int(header.strip())


def _elsewhere(message_id: str) -> APIError:
    return APIError(409, "turn_elsewhere", f"answer {message_id!r} is being written by another worker (or one that "
                                           "stopped); read GET /v1/messages/{id} until its status is final")


def _stored_events(state: ServeState, message: Message, principal: Principal) -> List[Event]:
    """``start`` and the final event of a finished answer, from the store."""
    info = owned_conversation(state, message.conversation_id, principal.user_id)
    names = names_of(state, _kb_of(state, info))
    start = {"conversation_id": message.conversation_id, "user_message_id": message.reply_to,
             "assistant_message_id": message.id, "reply_to": message.reply_to, "version": message.version}
    if message.status == "error":
        return [("start", start), ("error", {"assistant_message_id": message.id, "status": "error", "error": error_body(
            500, "turn_failed", public_error(message) or "the answer failed")["error"]})]
    citations = [public_citation(c, names) for c in state.store.get_citations(message.id)]
    return [("start", start), ("done", {"assistant_message_id": message.id, "status": message.status,
                                        "content": message.content, "citations": citations, "trim_report": None,
                                        "timings": None})]


async def _replay(events: List[Event]) -> AsyncIterator[Event]:
    for event in events:
        yield event


@router.post("/messages/{message_id}/cancel", responses=doc(MessageOut, 403, 404, 409))
async def cancel(message_id: str, who: KeyCaller) -> Dict[str, Any]:
    """Stop a streaming answer now: it is stored ``cancelled`` with the text so far (an answer already final is
    returned as it is)."""
    state = who.state
    message, principal = await state.store_call(_own_message, state, who, message_id)
    log = state.logs.get(message_id)
    if log is not None:
        await log.cancel()
    elif message.status == "pending":
        raise _elsewhere(message_id)
    return await state.store_call(_message, state, who, message_id)


def _message(state: ServeState, who: Any, message_id: str) -> Dict[str, Any]:
    message, principal = _own_message(state, who, message_id)
    info = owned_conversation(state, message.conversation_id, principal.user_id)
    siblings = [m for m in state.store.get_conversation(message.conversation_id)
                if m.id == message.id or (m.reply_to is not None and m.reply_to == message.reply_to)]
    views = _messages_view(state, siblings, principal.user_id, names_of(state, _kb_of(state, info)))
    return next(v for v in views if v["id"] == message_id)


@router.get("/messages/{message_id}", responses=doc(MessageOut, 403, 404))
async def get_message(message_id: str, who: KeyCaller) -> Dict[str, Any]:
    state = who.state
    return await state.store_call(_message, state, who, message_id)


@router.get("/messages/{message_id}/citations", responses=doc(CitationList, 403, 404))
def get_citations(message_id: str, state: State, principal: ChatUser) -> Dict[str, Any]:
    message = owned_message(state, message_id, principal.user_id)
    info = owned_conversation(state, message.conversation_id, principal.user_id)
    names = names_of(state, _kb_of(state, info))
    return {"data": [public_citation(c, names) for c in state.store.get_citations(message_id)]}


@router.get("/messages/{message_id}/turn", responses=doc(Dict[str, Any], 403, 404))
def get_turn(message_id: str, state: State, principal: ChatUser) -> Dict[str, Any]:
    message = owned_message(state, message_id, principal.user_id)
    record = state.store.get_turn_record(message_id)
    if record is None:
        raise APIError(404, "not_found", f"message {message_id!r} has no turn record (not an answer, or not "
                                         "finished)")
    info = owned_conversation(state, message.conversation_id, principal.user_id)
    return record_view(record, names_of(state, _kb_of(state, info)))


@router.get("/messages/{message_id}/versions", responses=doc(MessageList, 403, 404))
def get_versions(message_id: str, state: State, principal: ChatUser) -> Dict[str, Any]:
    message = owned_message(state, message_id, principal.user_id)
    info = owned_conversation(state, message.conversation_id, principal.user_id)
    names = names_of(state, _kb_of(state, info))
    if message.role != "assistant" or message.reply_to is None:
        return {"data": _messages_view(state, [message], principal.user_id, names)}
    same = [m for m in state.store.get_conversation(message.conversation_id) if m.reply_to == message.reply_to]
    return {"data": _messages_view(state, same, principal.user_id, names)}


@router.post("/messages/{message_id}/feedback", responses=doc(FeedbackOut, 400, 403, 404))
def post_feedback(message_id: str, body: NewFeedback, state: State, principal: ChatUser) -> Dict[str, Any]:
    message = owned_message(state, message_id, principal.user_id)
    if message.role != "assistant":
        raise APIError(400, "not_an_answer", f"feedback goes on assistant messages; {message_id!r} is a "
                                             f"{message.role} message", "message_id")
    return state.store.put_feedback(message_id, principal.user_id, body.rating, body.text).to_dict()
