"""Every default prompt template of the package, as module constants (replace them via ``update_prompts``)."""

from llama_index_convrag.prompts.chat import (
    DEFAULT_ANSWER_QUERY_PROMPT,
    DEFAULT_CONDENSE_PROMPT,
    DEFAULT_CONTEXT_PROMPT,
    DEFAULT_CONTEXT_REFINE_PROMPT,
    DEFAULT_NO_DOCS_REPLY,
)
from llama_index_convrag.prompts.judge import ENRICHED_CHUNK_TMPL, JUDGE_PROMPT
from llama_index_convrag.prompts.memory import (
    FACT_EXTRACT_PROMPT,
    FACT_RECONCILE_PROMPT,
    SUMMARY_FOLD_PROMPT,
    SUMMARY_SHORTEN_PROMPT,
)
from llama_index_convrag.prompts.rerank import LISTWISE_RERANK_PROMPT, POINTWISE_RERANK_PROMPT
from llama_index_convrag.prompts.synthesis import (
    CITATION_QA_PROMPT,
    CITATION_REFINE_PROMPT,
    CITATION_TREE_SUMMARIZE_PROMPT,
)

__all__ = [
    "CITATION_QA_PROMPT",
    "CITATION_REFINE_PROMPT",
    "CITATION_TREE_SUMMARIZE_PROMPT",
    "DEFAULT_ANSWER_QUERY_PROMPT",
    "DEFAULT_CONDENSE_PROMPT",
    "DEFAULT_CONTEXT_PROMPT",
    "DEFAULT_CONTEXT_REFINE_PROMPT",
    "DEFAULT_NO_DOCS_REPLY",
    "ENRICHED_CHUNK_TMPL",
    "FACT_EXTRACT_PROMPT",
    "FACT_RECONCILE_PROMPT",
    "JUDGE_PROMPT",
    "LISTWISE_RERANK_PROMPT",
    "POINTWISE_RERANK_PROMPT",
    "SUMMARY_FOLD_PROMPT",
    "SUMMARY_SHORTEN_PROMPT",
]
