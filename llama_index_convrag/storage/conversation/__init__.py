"""Conversation stores: messages with status, citations per assistant message, and turn records."""

from llama_index_convrag.storage.conversation.base import (
    Citation,
    ConversationStore,
    ConversationStoreError,
    Message,
)
from llama_index_convrag.storage.conversation.sqlite import SQLiteConversationStore

__all__ = ["Citation", "ConversationStore", "ConversationStoreError", "Message", "SQLiteConversationStore"]
