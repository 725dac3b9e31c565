"""The default synthesis templates: each mode's defaults need only the variables the synthesizers fill."""

import pytest

from llama_index_convrag.prompts.synthesis import (
    CITATION_INSTRUCTION,
    CITATION_QA_PROMPT,
    CITATION_REFINE_PROMPT,
    CITATION_TREE_SUMMARIZE_PROMPT,
)
from llama_index_convrag.synthesizers import registered_modes
from llama_index_convrag.synthesizers.calls import KNOWN_VARIABLES, template_variables
from llama_index_convrag.synthesizers.registry import lookup_mode


@pytest.mark.parametrize(
    "template, variables",
    [
        (CITATION_QA_PROMPT, ["context_str", "query_str"]),
        (CITATION_REFINE_PROMPT, ["query_str", "existing_answer", "context_msg"]),
        (CITATION_TREE_SUMMARIZE_PROMPT, ["context_str", "query_str"]),
    ],
)
def test_citation_templates_variables_and_instruction(template, variables):
    assert template_variables(template) == variables
    assert CITATION_INSTRUCTION in template.get_template()


def test_every_default_template_of_every_mode_needs_no_extra_variable():
    for mode in registered_modes():
        for role, pair in lookup_mode(mode).template_defaults.items():
            for template in pair:
                assert set(template_variables(template)) <= KNOWN_VARIABLES, (mode, role)
