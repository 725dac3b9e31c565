"""Default prompt templates of conversation memory: the running summary and user facts (our own wording)."""

from llama_index.core.prompts import PromptTemplate

SUMMARY_FOLD_TEMPLATE = """\
You keep a short running summary of a conversation between a user and an assistant.
Fold the new messages into the summary. Keep names, numbers, dates, decisions, open questions and what the user \
said about themselves; drop greetings and small talk. Write plain sentences, at most {max_words} words. \
Reply with the new summary only.

Summary so far:
{summary}

New messages:
{messages}

New summary:
"""
"""Folds the messages that left the recent window into the summary (``{max_words}`` comes from the token cap)."""

SUMMARY_FOLD_PROMPT = PromptTemplate(SUMMARY_FOLD_TEMPLATE)

SUMMARY_SHORTEN_TEMPLATE = """\
Shorten this conversation summary to at most {max_words} words. Keep names, numbers, dates and what the user \
said about themselves. Reply with the shortened summary only.

Summary:
{summary}

Shortened summary:
"""
"""Asked once when a folded summary came back over its token cap (then it is cut at the cap)."""

SUMMARY_SHORTEN_PROMPT = PromptTemplate(SUMMARY_SHORTEN_TEMPLATE)

FACT_EXTRACT_TEMPLATE = """\
Read the user's message and list the lasting facts the user states about themselves: who they are, where they \
live or work, their family, pets, plans, likes, dislikes and preferences. Leave out questions, requests, \
opinions about other things, and anything said only about today. Write each fact as one short sentence about \
"the user", one per line, starting with "- ". If there is none, reply with NONE.

User message:
{message}

Facts:
"""
"""Extracts durable facts a user states about themselves from one message."""

FACT_EXTRACT_PROMPT = PromptTemplate(FACT_EXTRACT_TEMPLATE)

FACT_RECONCILE_TEMPLATE = """\
A new fact about the user was found. Compare it with the stored facts that are most like it and choose one action:
ADD (it is new information), UPDATE <id> (it changes or refines that stored fact, which it replaces), \
DELETE <id> (it says that stored fact is no longer true, and adds nothing itself), NONE (a stored fact already \
says it). Reply with the action on the first line only.

Stored facts:
{stored}

New fact:
{fact}

Action:
"""
"""Chooses ADD / UPDATE / DELETE / NONE for a new fact against the similar stored ones."""

FACT_RECONCILE_PROMPT = PromptTemplate(FACT_RECONCILE_TEMPLATE)

MEMORY_HEADINGS = {
    "summary": "Summary of the conversation so far:",
    "facts": "What the user has said about themselves:",
    "recalled": "Earlier messages of this conversation that bear on the question (#position, date):",
}
"""The heading of each memory block in an answer prompt (a core ``Memory``'s blocks are headed by their names)."""

MEMORY_SECTION_TEMPLATE = """\
Conversation memory (from earlier in this conversation; use it when the question refers to it):
{memory}
"""
"""The memory blocks in a context mode's system message (after the retrieved documents, before the system
prompt)."""

MEMORY_SECTION_PROMPT = PromptTemplate(MEMORY_SECTION_TEMPLATE)

MEMORY_QUERY_TEMPLATE = """\
Conversation memory (from earlier in this conversation; use it when the question refers to it):
{memory}

Question: {question}"""
"""What the synthesizer of ``condense_question`` answers when memory blocks are kept: the memory, then the
question (the retrieved passages stay the context, so citations still point at passages only)."""

MEMORY_QUERY_PROMPT = PromptTemplate(MEMORY_QUERY_TEMPLATE)
