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

_CONTEXT_PREAMBLE = """\
The following is a friendly conversation between a user and an AI assistant.
The assistant is talkative and provides lots of specific details from its context.
If the assistant does not know the answer to a question, it truthfully says it
does not know.

Here are the relevant documents for the context:

"""

DEFAULT_CONTEXT_TEMPLATE = _CONTEXT_PREAMBLE + """\
{context_str}

Instruction: Based on the above documents, provide a detailed answer for the user question below.
Answer "don't know" if not present in the document.
"""
"""System text of ``condense_plus_context`` / ``context`` answers (LlamaIndex core's wording); ``{context_str}`` is
filled with the retrieved chunks, the system prompt follows it."""

DEFAULT_CONTEXT_PROMPT = PromptTemplate(DEFAULT_CONTEXT_TEMPLATE)

DEFAULT_CONTEXT_REFINE_TEMPLATE = _CONTEXT_PREAMBLE + """\
{context_msg}

Existing Answer:
{existing_answer}

Instruction: Refine the existing answer using the provided context to assist the user.
If the context isn't helpful, just repeat the existing answer and nothing more.
"""
"""Refine counterpart of :data:`DEFAULT_CONTEXT_TEMPLATE` (when the context spans several LLM calls)."""

DEFAULT_CONTEXT_REFINE_PROMPT = PromptTemplate(DEFAULT_CONTEXT_REFINE_TEMPLATE)
