"""Conversational fixtures: the chat fixtures (a small real Milvus Lite index, stores, token counters) and the
retriever fixtures (a corpus collection)."""

from tests.chat.conftest import *  # noqa: F401,F403
from tests.retrievers.conftest import *  # noqa: F401,F403
