"""The factory: core's signature, LLM resolution without hidden OpenAI, and every mode on a real Milvus Lite index."""

import inspect

import pytest
from llama_index.core import Settings, StorageContext, VectorStoreIndex
from llama_index.core.response_synthesizers import get_response_synthesizer as core_factory
from llama_index.core.schema import TextNode
from llama_index.vector_stores.milvus import MilvusVectorStore

from llama_index_convrag.synthesizers import CompactAndRefine, ResponseMode, get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

CORE_PARAMS = [
    "llm", "prompt_helper", "chat_prompt_helper", "text_qa_template", "refine_template", "summary_template",
    "simple_template", "chat_content_qa_template", "chat_content_refine_template", "chat_summary_template",
    "response_mode", "callback_manager", "use_async", "streaming", "structured_answer_filtering", "output_cls",
    "program_factory", "verbose", "multimodal",
]


def test_signature_and_defaults_match_core():
    ours = inspect.signature(get_response_synthesizer).parameters
    core = inspect.signature(core_factory).parameters
    positional = [n for n, p in ours.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == CORE_PARAMS == list(core)  # same names in the same positional order
    assert all(ours[n].default == core[n].default for n in CORE_PARAMS)
    assert ours["response_mode"].default == ResponseMode.COMPACT
    additions = [n for n, p in ours.items() if p.kind is p.KEYWORD_ONLY]
    assert additions == ["empty_response", "citations", "citation_mode", "early_stop", "tokenizer", "embed_model",
                         "support_scorer"]


def test_no_llm_and_no_explicit_settings_llm_raises_with_the_fix():
    assert Settings._llm is None
    with pytest.raises(ValueError, match=r"response_mode 'compact' needs an LLM: pass llm=\.\.\."):
        get_response_synthesizer()


def test_explicit_settings_llm_is_used():
    llm = ScriptedLLM.fixed("from settings")
    Settings.llm = llm
    try:
        synth = get_response_synthesizer(response_mode="generation")
        assert synth._llm is llm
    finally:
        Settings._llm = None


def test_options_a_mode_does_not_support_are_rejected():
    llm = ScriptedLLM.echo()
    with pytest.raises(ValueError, match=r"structured_answer_filtering is supported by \['accumulate', "
                                         r"'compact', 'compact_accumulate', 'refine'\], not 'tree_summarize'"):
        get_response_synthesizer(llm=llm, response_mode="tree_summarize", structured_answer_filtering=True)
    with pytest.raises(ValueError, match=r"early_stop is supported by \['compact', 'refine'\], not 'accumulate'"):
        get_response_synthesizer(llm=llm, response_mode="accumulate", early_stop=True)
    assert isinstance(get_response_synthesizer(llm=llm), CompactAndRefine)


FACTS = [
    "The Eiffel Tower is in Paris.",
    "Milvus stores vectors for similarity search.",
    "Paul Graham wrote essays about startups.",
    "The Nile is a river in Africa.",
]
CALLS = {
    "refine": 3, "compact": 1, "tree_summarize": 1, "simple_summarize": 1, "accumulate": 3,
    "compact_accumulate": 1, "generation": 1, "no_text": 0, "context_only": 0, "extractive": 0,
}


async def test_every_mode_through_a_query_engine_on_milvus_lite(milvus_target, collection_name, embed_model):
    store = MilvusVectorStore(uri=milvus_target.uri, collection_name=collection_name, dim=384, overwrite=True)
    index = VectorStoreIndex(
        [TextNode(text=t, id_=f"f{i}") for i, t in enumerate(FACTS)],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
    )
    assert sorted(CALLS) == sorted(m.value for m in ResponseMode)
    for mode, calls in CALLS.items():
        llm = ScriptedLLM.fixed(f"answer from {mode}")
        extra = {"embed_model": embed_model} if mode == "extractive" else {}
        synth = get_response_synthesizer(response_mode=mode, llm=llm, **extra)
        engine = index.as_query_engine(llm=llm, similarity_top_k=3, response_synthesizer=synth)
        response = engine.query("Where is the Eiffel Tower?")
        assert llm.call_count == response.metadata["llm_calls"] == calls, mode
        assert response.source_nodes[0].node.node_id == "f0", mode
        if mode == "extractive":
            assert response.response.startswith("The Eiffel Tower is in Paris. [1]"), response.response
        if calls:
            assert response.response.endswith(f"answer from {mode}"), mode
            if mode != "generation":
                assert "The Eiffel Tower is in Paris." in llm.prompts[0], mode
    aresponse = await index.as_query_engine(
        llm=llm, similarity_top_k=2, response_synthesizer=get_response_synthesizer(llm=ScriptedLLM.fixed("async"))
    ).aquery("Where is the Eiffel Tower?")
    assert aresponse.response == "async" and aresponse.source_nodes[0].node.node_id == "f0"


def test_explicitly_set_settings_prompt_helper_is_honoured():
    """Issue 11 bug 4: an explicitly set Settings.prompt_helper was ignored (3900 used instead of 16384)."""
    from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper

    helper, chat_helper = PromptHelper(context_window=16384), ChatPromptHelper(context_window=12000)
    Settings.prompt_helper = helper
    Settings.chat_prompt_helper = chat_helper
    try:
        synth = get_response_synthesizer(llm=ScriptedLLM.echo(context_window=8192))
        assert synth._prompt_helper is helper and synth._chat_prompt_helper is chat_helper
        explicit = PromptHelper(context_window=1000)
        assert get_response_synthesizer(llm=ScriptedLLM.echo(), prompt_helper=explicit)._prompt_helper is explicit
    finally:
        Settings._prompt_helper = None
        Settings._chat_prompt_helper = None
    assert get_response_synthesizer(llm=ScriptedLLM.echo(context_window=8192))._prompt_helper.context_window == 8192
    with pytest.raises(ValueError, match="needs an LLM"):  # still no silent Settings.llm
        get_response_synthesizer()


def test_core_positional_order_reaches_the_right_parameters():
    """Issue 11 bug 5: chat_prompt_helper is core's third positional parameter."""
    from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper

    llm, helper, chat_helper = ScriptedLLM.echo(), PromptHelper(context_window=5000), ChatPromptHelper()
    synth = get_response_synthesizer(llm, helper, chat_helper)
    assert synth._prompt_helper is helper and synth._chat_prompt_helper is chat_helper
