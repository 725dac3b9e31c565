import pytest

from llama_index_convrag.synthesizers import (
    BaseSynthesizer,
    ContextOnly,
    get_response_synthesizer,
    register_mode,
    registered_modes,
    unregister_mode,
)
from llama_index_convrag.synthesizers.base import CallRequest
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes


class Shout(BaseSynthesizer):
    """A user's mode: one call whose answer is upper-cased."""

    def _steps(self, run, chunks):
        from llama_index.core.prompts import PromptTemplate

        template = PromptTemplate("{query_str}: {context_str}")
        answer = yield CallRequest(template, run.fill(context_str=" | ".join(chunks)))
        return answer.upper()


def test_builtin_modes_are_registered():
    assert registered_modes() == sorted(
        ["refine", "compact", "tree_summarize", "simple_summarize", "accumulate", "compact_accumulate",
         "generation", "no_text", "context_only", "extractive"]
    )


def test_user_mode_is_reachable_through_the_factory():
    register_mode("shout", Shout)
    try:
        llm = ScriptedLLM.echo()
        synth = get_response_synthesizer(llm=llm, response_mode="shout")
        response = synth.synthesize("q", make_nodes(["a", "b"]))
        assert llm.prompts == ["q: a | b"]
        assert response.response == "Q: A | B"
        assert response.metadata["llm_calls"] == 1
    finally:
        unregister_mode("shout")
    assert "shout" not in registered_modes()


def test_register_checks_class_and_duplicates():
    with pytest.raises(TypeError, match="must subclass"):
        register_mode("bad", object)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'context_only' is already registered to ContextOnly"):
        register_mode("context_only", Shout)
    register_mode("context_only", ContextOnly)  # same class again is fine


def test_unknown_mode_lists_registered_ones():
    with pytest.raises(ValueError, match=r"response_mode must be one of \['accumulate', .*\], got 'nope'"):
        get_response_synthesizer(llm=ScriptedLLM.echo(), response_mode="nope")
