"""Default prompts of the chunk judge (``llama_index_convrag.judge``) and the enriched-chunk layout."""

from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.prompt_type import PromptType

JUDGE_PROMPT_TMPL = (
    "Grade how well one retrieved passage answers a question.\n"
    "2 = the passage answers the question.\n"
    "1 = the passage is relevant but incomplete: write the one follow-up question whose answer would fill the gap.\n"
    "0 = the passage is irrelevant.\n\n"
    "Question: {question}\n\n"
    "Passage:\n{chunk}\n\n"
    'Reply with JSON only: {{"grade": 0, 1 or 2, "reason": "<one sentence>", '
    '"follow_up": "<the follow-up question when the grade is 1, else empty>"}}\n'
)
JUDGE_PROMPT = PromptTemplate(JUDGE_PROMPT_TMPL, prompt_type=PromptType.CUSTOM)

# A chunk graded 1 after its follow-up question was answered: what synthesis sees.
ENRICHED_CHUNK_TMPL = "{chunk}\n\nFollow-up question: {question}\nAnswer: {answer}"
