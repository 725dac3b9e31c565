"""Default prompt templates of the chat engine."""

from llama_index.core.prompts import PromptTemplate

DEFAULT_CONDENSE_TEMPLATE = """\
Given a conversation (between Human and Assistant) and a follow up message from Human, \
rewrite the message to be a standalone question that captures all relevant context \
from the conversation. Reply with the question only.

<Chat History>
{chat_history}

<Follow Up Message>
{question}

<Standalone question>
"""
"""Condense prompt for the ``llm`` rewrite strategy (LlamaIndex's wording plus 'Reply with the question only')."""

DEFAULT_CONDENSE_PROMPT = PromptTemplate(DEFAULT_CONDENSE_TEMPLATE)

DEFAULT_ANSWER_QUERY_TEMPLATE = """\
Conversation so far:
{chat_history}

Question: {question}"""
"""What the synthesizer sees as the query when ``rephrase_question=False`` and there is history."""

DEFAULT_ANSWER_QUERY_PROMPT = PromptTemplate(DEFAULT_ANSWER_QUERY_TEMPLATE)

DEFAULT_NO_DOCS_REPLY = "I could not find anything relevant in the documents to answer that."
