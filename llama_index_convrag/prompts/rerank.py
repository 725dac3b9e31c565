"""Default prompts of the LLM rerank scorer (listwise and pointwise)."""

from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.prompt_type import PromptType

LISTWISE_RERANK_PROMPT_TMPL = (
    "Below are {num_docs} numbered documents and a question.\n"
    "List the documents that help answer the question, most relevant first, one per line, exactly as\n"
    "Doc: <number>, Relevance: <1-{max_relevance}>\n"
    "Use only document numbers from 1 to {num_docs}, list each document at most once, leave out irrelevant\n"
    "documents, and write nothing else.\n\n"
    "{context_str}\n\n"
    "Question: {query_str}\n"
    "Answer:\n"
)
LISTWISE_RERANK_PROMPT = PromptTemplate(LISTWISE_RERANK_PROMPT_TMPL, prompt_type=PromptType.CHOICE_SELECT)

POINTWISE_RERANK_PROMPT_TMPL = (
    "Rate how well the document answers the question on a scale from 0 (unrelated) to {max_relevance}\n"
    "(answers it fully). Reply with the number only.\n\n"
    "Document:\n{context_str}\n\n"
    "Question: {query_str}\n"
    "Relevance:"
)
POINTWISE_RERANK_PROMPT = PromptTemplate(POINTWISE_RERANK_PROMPT_TMPL, prompt_type=PromptType.CUSTOM)

LISTWISE_DOC_TMPL = "Document {number}:\n{text}"
