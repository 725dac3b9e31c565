"""Request bodies and response models (pydantic: ``/openapi.json`` describes every answer from them).

Routes return plain JSON built by :mod:`.views` and name their model in ``responses`` (the document describes it;
no second validation pass runs on the hot routes).
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from llama_index_convrag.serve.errors import ErrorBody
from llama_index_convrag.storage.conversation.base import Citation


# --- request bodies ---------------------------------------------------------------------------------------------
class NewConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: Optional[str] = Field(default=None, max_length=200,
                                 description="Default: the first question (its first 80 characters).")
    knowledge_base: Optional[str] = Field(default=None, max_length=64, description=(
        "The id of the knowledge base it answers from (one you may read); default: the server's."))


class Rename(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: Optional[str] = Field(max_length=200)


class NewMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str = Field(description="The user's question (limit: max_question_chars).")
    stream: bool = Field(default=True, description="Server-sent events (true) or one JSON answer (false).")


class Regenerate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stream: bool = True


class NewFeedback(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rating: Literal["up", "down"]
    text: Optional[str] = Field(default=None, max_length=4000)


class NewKnowledgeBase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64, description="Letters or digits first, then letters, digits, "
                                                               "'_', '.' or '-'.")
    description: Optional[str] = Field(default=None, max_length=2000)
    analyzer: Literal["english", "standard", "chinese", "jieba"] = Field(
        default="english", description="How its BM25 field splits text (chinese/jieba for Chinese documents).")


class KnowledgeBaseUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Optional[str] = Field(default=None, min_length=1, max_length=64)
    description: Optional[str] = Field(default=None, max_length=2000)


class MemberRole(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["reader", "editor"]


class NewKey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str = Field(min_length=1, max_length=128)
    scopes: List[Literal["chat", "edit", "admin"]] = Field(default=["chat", "edit"], min_length=1)


class UserRole(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["member", "admin"]


class SummaryEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=20000, description=(
        "The summary as you want it; kept as a new version (refused over the server's token cap)."))


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: Optional[Any] = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's body; sampling fields are accepted and ignored. ``conversation_id`` is our extension."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(default="convrag", description="'convrag' (the server's knowledge base) or "
                                                      "'convrag/<knowledge base name>' (GET /v1/models lists yours).")
    messages: List[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    conversation_id: Optional[str] = Field(default=None, description="Continue this conversation (yours).")


# --- response models (documentation) ----------------------------------------------------------------------------
class CitationOut(BaseModel):
    source_index: int = Field(description="The source's number, from 1: the [n] of the references.")
    marker: Optional[int] = Field(description="The [n] the answer cited it with, or null when uncited.")
    node_id: str
    document: Optional[str] = Field(description="The document's name inside its knowledge base.")
    score: Optional[float]
    text: str
    span: Optional[List[int]] = Field(default=None, description="[start, end] of the matched chunk in text (in "
                                      "characters) when the answer read it inside a wider passage, else null.")


class ReferenceOut(BaseModel):
    source_index: int = Field(description="From 1, as the answer's [n] markers.")
    node_id: str
    document: Optional[str]
    score: Optional[float]
    text: str
    metadata: Dict[str, Any]


class FeedbackOut(BaseModel):
    message_id: str
    rating: Literal["up", "down"]
    text: Optional[str]
    created_at: float


class MessageOut(BaseModel):
    id: str
    conversation_id: str
    role: Literal["user", "assistant", "system"]
    content: str
    status: Literal["pending", "complete", "error", "cancelled", "interrupted"] = Field(description=(
        "interrupted: the server answering it stopped (a crash); the text it had streamed is kept. Regenerate it."))
    error: Optional[str]
    created_at: float
    updated_at: float
    reply_to: Optional[str]
    version: int
    superseded_by: Optional[str]
    versions: Optional[List[str]] = Field(default=None, description="Answers: every version's id, oldest first.")
    citations: Optional[List[CitationOut]] = None
    feedback: Optional[FeedbackOut] = None


class ConversationOut(BaseModel):
    id: str
    title: Optional[str]
    created_at: float
    updated_at: float
    message_count: int
    knowledge_base: Optional[str] = Field(description="The id of the knowledge base it answers from.")


class ConversationDetail(ConversationOut):
    messages: List[MessageOut]


class ConversationPage(BaseModel):
    data: List[ConversationOut]
    next_cursor: Optional[str]


class MessageList(BaseModel):
    data: List[MessageOut]


class CitationList(BaseModel):
    data: List[CitationOut]


class TurnOut(BaseModel):
    """A non-streamed answer."""

    model_config = ConfigDict(extra="allow")
    conversation_id: str
    user_message_id: str
    assistant_message_id: str
    status: str
    content: str
    retrieval_query: Optional[str] = None
    references: List[ReferenceOut] = []
    citations: List[CitationOut] = []


class KnowledgeBaseOut(BaseModel):
    id: str
    name: str
    description: Optional[str]
    owner: str
    created_at: float
    updated_at: float
    role: Literal["reader", "editor", "owner"] = Field(description="Your role in it (an admin: owner).")
    default: bool = Field(description="Whether it is the server's knowledge base (conversations default to it).")
    model: str = Field(description="The model id that answers from it on /v1/chat/completions.")


class KnowledgeBaseList(BaseModel):
    data: List[KnowledgeBaseOut]


class MemberOut(BaseModel):
    user_id: str = Field(description="A user id, or * for every user of the server.")
    role: Literal["reader", "editor", "owner"]
    created_at: float


class MemberList(BaseModel):
    data: List[MemberOut]


class DocumentOut(BaseModel):
    name: str = Field(description="Its name inside the knowledge base (a path below the base's folder).")
    chunks: int


class DocumentList(BaseModel):
    data: List[DocumentOut]


class DocumentPut(BaseModel):
    name: str
    status: Literal["added", "updated", "unchanged"]
    chunks: int


class UserOut(BaseModel):
    id: str
    role: Literal["member", "admin"]
    created_at: float


class UserList(BaseModel):
    data: List[UserOut]


class KeyOut(BaseModel):
    id: str
    user_id: str
    prefix: str
    created_at: float
    revoked_at: Optional[float]
    scopes: List[str]


class KeyList(BaseModel):
    data: List[KeyOut]


class KeyCreated(KeyOut):
    key: str = Field(description="The secret, shown once (only its hash is stored).")


class Health(BaseModel):
    status: Literal["ok"]
    llm: Optional[str]
    answers: Literal["llm", "extractive"]


class ModelOut(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: List[ModelOut]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletionOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: List[Dict[str, Any]]
    usage: Usage
    convrag: Dict[str, Any] = Field(description="Ids, retrieval query, references and citations of the turn.")


class SummaryVersionOut(BaseModel):
    version: int = Field(description="From 1; every fold and every edit writes the next.")
    text: str
    covers_to: Optional[str] = Field(description="The id of the last message folded in (null: none yet).")
    covered: int = Field(description="How many messages it covers.")
    tokens: int
    source: str = Field(description="Who wrote it: llm (a fold), salient (names and numbers, no LLM), edit (a user).")
    created_at: float


class SummaryOut(BaseModel):
    conversation_id: str
    summary: Optional[SummaryVersionOut] = Field(description="The current version (null: none).")
    versions: int = Field(description="How many versions are kept.")
    max_tokens: int = Field(description="The cap an edit must fit in (tokens).")


class SummaryVersionList(BaseModel):
    data: List[SummaryVersionOut]


class FactOut(BaseModel):
    id: str
    text: str
    status: str = Field(description="active; with history=true also replaced or retracted.")
    replaces: Optional[str] = Field(description="The fact this one replaced (kept as history).")
    replaced_by: Optional[str]
    source_message_id: Optional[str] = Field(description="The message the fact came from.")
    conversation_id: Optional[str]
    created_at: float
    updated_at: float


class FactList(BaseModel):
    data: List[FactOut]


class Deleted(BaseModel):
    deleted: int


class MemoryStatus(BaseModel):
    parts: List[Literal["recall", "summary", "facts", "memory_blocks"]] = Field(
        description="The parts of memory this server's turns use (empty: memory is off).")
    summary_max_tokens: int
    recall_k: int = Field(description="Earlier messages a turn recalls at most.")
    window: int = Field(description="Recent messages every prompt holds (recall looks before them).")
    pending_writes: int = Field(description="Memory writes of this server process queued or running (they run "
                                            "after each turn's final event).")
    failed_writes: int = Field(description="Memory writes of this process that failed since it started (its log "
                                           "names each).")


SSE_DOC = "text/event-stream (docs/SERVE.md: Server-sent events of a turn), or JSON with stream=false"


def doc(model: Any, *errors: int, description: Optional[str] = None) -> Dict[Any, Any]:
    """``responses=`` of a route: 200 with ``model``, and each of ``errors`` (plus 401 and 429) with the error
    body."""
    out: Dict[Any, Any] = {200: {"model": model, **({"description": description} if description else {})}}
    for status in sorted({*errors, 401, 429}):
        out[status] = {"model": ErrorBody}
    return out


def raw_citation(c: Citation) -> Dict[str, Any]:
    """A citation as stored (the engine's ``source_index`` from 0, ``ref_doc_id``): what a turn's ``done`` event
    carries before :func:`.views.event_view` shows it."""
    return {"source_index": c.source_index, "marker": c.marker, "node_id": c.node_id, "ref_doc_id": c.ref_doc_id,
            "score": c.score, "text": c.text, "span": c.span}


def text_of(content: Any) -> str:
    """An OpenAI message content (a string or a list of parts) as text (text parts only)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)
