"""Request bodies (pydantic: the OpenAPI schema comes from them) and the JSON views of stored objects."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from llama_index_convrag.storage.conversation.base import Citation, Message


class NewConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: Optional[str] = Field(default=None, max_length=200)


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


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: Optional[Any] = None


class ChatCompletionRequest(BaseModel):
    """OpenAI's body; sampling fields are accepted and ignored. ``conversation_id`` is our extension."""

    model_config = ConfigDict(extra="allow")
    model: str = "convrag"
    messages: List[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    conversation_id: Optional[str] = Field(default=None, description="Continue this conversation (yours).")


def citation_view(c: Citation) -> Dict[str, Any]:
    return {"source_index": c.source_index, "marker": c.marker, "node_id": c.node_id, "ref_doc_id": c.ref_doc_id,
            "score": c.score, "text": c.text, "span": c.span}


def message_view(m: Message) -> Dict[str, Any]:
    return {"id": m.id, "conversation_id": m.conversation_id, "role": m.role, "content": m.content,
            "status": m.status, "error": m.error, "created_at": m.created_at, "updated_at": m.updated_at,
            "reply_to": m.reply_to, "version": m.version, "superseded_by": m.superseded_by}


def text_of(content: Any) -> str:
    """An OpenAI message content (a string or a list of parts) as text (text parts only)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)
