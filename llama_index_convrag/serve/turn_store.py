"""The store a served turn's engine writes through: it reports the ids the moment the placeholder is stored (before
retrieval), and for a regeneration answers an existing user message as its next version instead of storing a new
question."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from llama_index_convrag.storage.conversation.base import Message, in_history

OnBegin = Callable[[Message, Message], None]


class TurnStore:
    """Delegates to ``inner``; ``begin_turn`` calls ``on_begin(user, placeholder)``. With ``regenerate`` (a stored
    user message) the engine sees the conversation up to before that message and the answer becomes its next
    version."""

    def __init__(self, inner: Any, on_begin: OnBegin, regenerate: Optional[Message] = None) -> None:
        self._inner, self._on_begin, self._regenerate = inner, on_begin, regenerate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def begin_turn(self, conversation_id: str, question: str) -> Tuple[Message, Message]:
        if self._regenerate is None:
            user, placeholder = self._inner.begin_turn(conversation_id, question)
        else:
            user, placeholder = self._regenerate, self._inner.begin_regeneration(self._regenerate)
        self._on_begin(user, placeholder)
        return user, placeholder

    def get_conversation(self, conversation_id: str) -> List[Message]:
        messages = self._inner.get_conversation(conversation_id)
        if self._regenerate is None:
            return messages
        ids = [m.id for m in messages]
        return messages[:ids.index(self._regenerate.id)] if self._regenerate.id in ids else messages

    def history(self, conversation_id: str) -> List[Message]:
        return [m for m in self.get_conversation(conversation_id) if in_history(m)]
