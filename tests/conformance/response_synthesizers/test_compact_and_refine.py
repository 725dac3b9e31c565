import pytest
from typing import Any, AsyncGenerator, Generator
from unittest.mock import patch

from llama_index.core import PromptHelper
from llama_index.core.base.response.schema import PydanticResponse
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.indices.prompt_helper import ChatPromptHelper
from llama_index.core.llms.mock import MockLLM, MockLLMWithChatMemoryOfLastCall
from llama_index.core.prompts.chat_prompts import (
    CHAT_CONTENT_QA_PROMPT,
    CHAT_CONTENT_REFINE_PROMPT,
)
from llama_index.core.prompts.prompt_utils import (
    get_biggest_prompt,
    get_empty_prompt_messages,
)
from llama_index_convrag.synthesizers import Refine
from llama_index_convrag.synthesizers import CompactAndRefine
from llama_index.core.schema import ImageNode, NodeWithScore, TextNode
from llama_index.core.utilities.token_counting import TokenCounter


class Foo(BaseModel):
    """Structured output class without an `answer` field."""

    name: str
    age: int


class StructuredOutputFakeLLM(MockLLM):
    """Returns Foo(name="bob", age=3) for every structured call, streaming or not."""

    def structured_predict(self, output_cls: Any, prompt: Any, **kwargs: Any) -> Any:
        return Foo(name="bob", age=3)

    async def astructured_predict(
        self, output_cls: Any, prompt: Any, **kwargs: Any
    ) -> Any:
        return Foo(name="bob", age=3)

    def stream_structured_predict(
        self, output_cls: Any, prompt: Any, **kwargs: Any
    ) -> Generator[Any, None, None]:
        yield Foo(name="bob", age=3)

    async def astream_structured_predict(
        self, output_cls: Any, prompt: Any, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        async def gen() -> AsyncGenerator[Any, None]:
            yield Foo(name="bob", age=3)

        return gen()


@pytest.fixture()
def nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text="context information1"), score=1.0),
        NodeWithScore(node=TextNode(text="context information2"), score=0.9),
    ]


@pytest.fixture()
def png_1px_b64() -> bytes:
    return b"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.fixture()
def multimodal_nodes(png_1px_b64: bytes) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text="context information"), score=1.0),
        NodeWithScore(node=ImageNode(image=png_1px_b64), score=0.9),
    ]


class TestCompactAndRefine:
    def test_synthesize(self, nodes: list[NodeWithScore]) -> None:
        llm = MockLLMWithChatMemoryOfLastCall(max_tokens=10, is_chat_model=True)
        synthesizer1 = CompactAndRefine(llm=llm)
        tkn_counter = TokenCounter()
        max_prompt = get_biggest_prompt(
            [
                prompt.partial_format(query_str="test")
                for key, prompt in synthesizer1.get_prompts().items()
                if key in ["text_qa_template", "refine_template"]
            ]
        )
        max_prompt = max_prompt.select(llm=llm)
        prompt_tokens = tkn_counter.estimate_tokens_in_messages(
            get_empty_prompt_messages(max_prompt)
        )
        synthesizer2 = CompactAndRefine(
            llm=llm,
            prompt_helper=PromptHelper(
                context_window=prompt_tokens + 3, num_output=0, chunk_overlap_ratio=0
            ),
            response_padding_size=0,
        )
        with patch.object(
            Refine, "get_response", wraps=Refine(llm=llm).get_response
        ) as wraps_refine_get_response:
            response1 = synthesizer1.synthesize(query="test", nodes=nodes)
            response2 = synthesizer2.synthesize(query="test", nodes=nodes)
        assert str(response1) == " ".join(["text"] * 10)
        assert str(response2) == " ".join(["text"] * 10)
        assert llm.last_called_chat_function == ["chat"] * 4, (
            "First call one compacted node into one = 1 call "
            "Second call compacted node split into 3 = 3 calls "
            "Total of 4 calls"
        )
        assert wraps_refine_get_response.call_args_list[0].kwargs["text_chunks"] == [
            "context information1\n\ncontext information2"
        ]
        assert wraps_refine_get_response.call_args_list[1].kwargs["text_chunks"] == [
            "context information1",
            "context",
            "information2",
        ]

    def test_synthesize__streaming(self, nodes: list[NodeWithScore]) -> None:
        llm = MockLLMWithChatMemoryOfLastCall(max_tokens=10, is_chat_model=True)
        synthesizer1 = CompactAndRefine(llm=llm, streaming=True)
        tkn_counter = TokenCounter()
        max_prompt = get_biggest_prompt(
            [
                prompt.partial_format(query_str="test")
                for key, prompt in synthesizer1.get_prompts().items()
                if key in ["text_qa_template", "refine_template"]
            ]
        )
        max_prompt = max_prompt.select(llm=llm)
        prompt_tokens = tkn_counter.estimate_tokens_in_messages(
            get_empty_prompt_messages(max_prompt)
        )
        synthesizer2 = CompactAndRefine(
            llm=llm,
            prompt_helper=PromptHelper(
                context_window=prompt_tokens + 3, num_output=0, chunk_overlap_ratio=0
            ),
            response_padding_size=0,
            streaming=True,
        )
        with patch.object(
            Refine, "get_response", wraps=Refine(llm=llm, streaming=True).get_response
        ) as wraps_refine_get_response:
            response1 = synthesizer1.synthesize(query="test", nodes=nodes)
            response2 = synthesizer2.synthesize(query="test", nodes=nodes)
        assert str(response1) == " ".join(["text"] * 10)
        assert str(response2) == " ".join(["text"] * 10)
        assert set(llm.last_called_chat_function) == {"stream_chat"}
        assert len(llm.last_called_chat_function) == 4, (
            "First call one compacted node into one = 1 call "
            "Second call compacted node split into 3 = 3 calls "
            "Total of 4 calls"
        )
        assert wraps_refine_get_response.call_args_list[0].kwargs["text_chunks"] == [
            "context information1\n\ncontext information2"
        ]
        assert wraps_refine_get_response.call_args_list[1].kwargs["text_chunks"] == [
            "context information1",
            "context",
            "information2",
        ]

    def test_synthesize__multimodal(
        self, multimodal_nodes: list[NodeWithScore]
    ) -> None:
        llm = MockLLMWithChatMemoryOfLastCall(max_tokens=10, is_chat_model=True)
        synthesizer1 = CompactAndRefine(llm=llm, multimodal=True)
        tkn_counter = TokenCounter()
        qa_template = CHAT_CONTENT_QA_PROMPT.partial_format(query_str="test")
        refine_template = CHAT_CONTENT_REFINE_PROMPT.partial_format(query_str="test")
        max_prompt = get_biggest_prompt([qa_template, refine_template])
        prompt_tokens = tkn_counter.estimate_tokens_in_messages(
            get_empty_prompt_messages(max_prompt)
        )
        synthesizer2 = CompactAndRefine(
            llm=llm,
            chat_prompt_helper=ChatPromptHelper(
                context_window=prompt_tokens + 3, num_output=0, chunk_overlap_ratio=0
            ),
            response_padding_size=0,
            multimodal=True,
        )
        with patch.object(
            Refine,
            "get_response_from_messages",
            wraps=Refine(llm=llm, multimodal=True).get_response_from_messages,
        ) as wraps_get_response:
            response1 = synthesizer1.synthesize(query="test", nodes=multimodal_nodes)
            response2 = synthesizer2.synthesize(query="test", nodes=multimodal_nodes)
        assert str(response1) == " ".join(["text"] * 10)
        assert str(response2) == " ".join(["text"] * 10)
        assert llm.last_called_chat_function == ["chat"] * 3, (
            "First call one compacted node = 1 call "
            "Second call one compacted node split into 2 = 2 calls "
            "Total of 3 calls"
        )
        assert (
            len(wraps_get_response.call_args_list[0].kwargs["message_chunks"]) == 1
        ), "Both nodes compacted into 1 message"
        assert (
            len(wraps_get_response.call_args_list[1].kwargs["message_chunks"]) == 2
        ), "Tight context forces 2 separate messages"
        assert any(
            block.block_type == "image"
            for msg in wraps_get_response.call_args_list[0].kwargs["message_chunks"]
            for block in msg.blocks
        ), "Compacted message should contain image block"

    @pytest.mark.asyncio
    async def test_asynthesize(self, nodes: list[NodeWithScore]) -> None:
        llm = MockLLMWithChatMemoryOfLastCall(max_tokens=10, is_chat_model=True)
        synthesizer1 = CompactAndRefine(llm=llm)
        tkn_counter = TokenCounter()
        max_prompt = get_biggest_prompt(
            [
                prompt.partial_format(query_str="test")
                for key, prompt in synthesizer1.get_prompts().items()
                if key in ["text_qa_template", "refine_template"]
            ]
        )
        max_prompt = max_prompt.select(llm=llm)
        prompt_tokens = tkn_counter.estimate_tokens_in_messages(
            get_empty_prompt_messages(max_prompt)
        )
        synthesizer2 = CompactAndRefine(
            llm=llm,
            prompt_helper=PromptHelper(
                context_window=prompt_tokens + 3, num_output=0, chunk_overlap_ratio=0
            ),
            response_padding_size=0,
        )
        with patch.object(
            Refine, "aget_response", wraps=Refine(llm=llm).aget_response
        ) as wraps_refine_aget_response:
            response1 = await synthesizer1.asynthesize(query="test", nodes=nodes)
            response2 = await synthesizer2.asynthesize(query="test", nodes=nodes)
        assert str(response1) == " ".join(["text"] * 10)
        assert str(response2) == " ".join(["text"] * 10)
        assert set(llm.last_called_chat_function) == {"achat", "chat"}
        assert len(llm.last_called_chat_function) == 4 * 2, (
            "First call one compacted node = 1 call "
            "Second call compacted node split into 3 = 3 calls "
            "For Async, achat and chat are called (multiplied by 2)"
            "Total of 8 calls"
        )
        assert wraps_refine_aget_response.call_args_list[0].kwargs["text_chunks"] == [
            "context information1\n\ncontext information2"
        ]
        assert wraps_refine_aget_response.call_args_list[1].kwargs["text_chunks"] == [
            "context information1",
            "context",
            "information2",
        ]

    @pytest.mark.asyncio
    async def test_asynthesize__streaming(self, nodes: list[NodeWithScore]) -> None:
        llm = MockLLMWithChatMemoryOfLastCall(max_tokens=10, is_chat_model=True)
        synthesizer1 = CompactAndRefine(llm=llm, streaming=True)
        tkn_counter = TokenCounter()
        max_prompt = get_biggest_prompt(
            [
                prompt.partial_format(query_str="test")
                for key, prompt in synthesizer1.get_prompts().items()
                if key in ["text_qa_template", "refine_template"]
            ]
        )
        max_prompt = max_prompt.select(llm=llm)
        prompt_tokens = tkn_counter.estimate_tokens_in_messages(
            get_empty_prompt_messages(max_prompt)
        )
        synthesizer2 = CompactAndRefine(
            llm=llm,
            prompt_helper=PromptHelper(
                context_window=prompt_tokens + 3, num_output=0, chunk_overlap_ratio=0
            ),
            response_padding_size=0,
            streaming=True,
        )
        with patch.object(
            Refine, "aget_response", wraps=Refine(llm=llm, streaming=True).aget_response
        ) as wraps_refine_aget_response:
            response1 = await synthesizer1.asynthesize(query="test", nodes=nodes)
            response2 = await synthesizer2.asynthesize(query="test", nodes=nodes)
        assert str(response1) == " ".join(["text"] * 10)
        assert str(response2) == " ".join(["text"] * 10)
        assert set(llm.last_called_chat_function) == {"astream_chat", "stream_chat"}
        assert len(llm.last_called_chat_function) == 4 * 2, (
            "First call one compacted node = 1 call "
            "Second call compacted node split into 3 = 3 calls "
            "For Async, achat and chat are called (multiplied by 2)"
            "Total of 8 calls"
        )
        assert wraps_refine_aget_response.call_args_list[0].kwargs["text_chunks"] == [
            "context information1\n\ncontext information2"
        ]
        assert wraps_refine_aget_response.call_args_list[1].kwargs["text_chunks"] == [
            "context information1",
            "context",
            "information2",
        ]

    def test_synthesize__streaming_with_output_cls_returns_pydantic_response(
        self, nodes: list[NodeWithScore]
    ) -> None:
        """A user output_cls has no `answer` field, so its structured output must not be dropped."""
        synthesizer = CompactAndRefine(
            llm=StructuredOutputFakeLLM(), output_cls=Foo, streaming=True
        )
        response = synthesizer.synthesize(query="test", nodes=nodes[:1])
        assert isinstance(response, PydanticResponse)
        assert response.response == Foo(name="bob", age=3)

    @pytest.mark.asyncio
    async def test_asynthesize__streaming_with_output_cls_returns_pydantic_response(
        self, nodes: list[NodeWithScore]
    ) -> None:
        synthesizer = CompactAndRefine(
            llm=StructuredOutputFakeLLM(), output_cls=Foo, streaming=True
        )
        response = await synthesizer.asynthesize(query="test", nodes=nodes)
        assert isinstance(response, PydanticResponse)
        assert response.response == Foo(name="bob", age=3)

    @pytest.mark.asyncio
    async def test_asynthesize__multimodal(
        self, multimodal_nodes: list[NodeWithScore]
    ) -> None:
        llm = MockLLMWithChatMemoryOfLastCall(max_tokens=10, is_chat_model=True)
        synthesizer1 = CompactAndRefine(llm=llm, multimodal=True)
        tkn_counter = TokenCounter()
        qa_template = CHAT_CONTENT_QA_PROMPT.partial_format(query_str="test")
        refine_template = CHAT_CONTENT_REFINE_PROMPT.partial_format(query_str="test")
        max_prompt = get_biggest_prompt([qa_template, refine_template])
        prompt_tokens = tkn_counter.estimate_tokens_in_messages(
            get_empty_prompt_messages(max_prompt)
        )
        synthesizer2 = CompactAndRefine(
            llm=llm,
            chat_prompt_helper=ChatPromptHelper(
                context_window=prompt_tokens + 3, num_output=0, chunk_overlap_ratio=0
            ),
            response_padding_size=0,
            multimodal=True,
        )
        with patch.object(
            Refine,
            "aget_response_from_messages",
            wraps=Refine(llm=llm, multimodal=True).aget_response_from_messages,
        ) as wraps_aget_response:
            response1 = await synthesizer1.asynthesize(
                query="test", nodes=multimodal_nodes
            )
            response2 = await synthesizer2.asynthesize(
                query="test", nodes=multimodal_nodes
            )
        assert str(response1) == " ".join(["text"] * 10)
        assert str(response2) == " ".join(["text"] * 10)
        assert set(llm.last_called_chat_function) == {"achat", "chat"}
        assert len(llm.last_called_chat_function) == 3 * 2, (
            "First call one compacted node = 1 call "
            "Second call one compacted node split into 2 = 2 calls "
            "For Async, achat and chat are called (multiplied by 2) "
            "Total of 6 calls"
        )
        assert (
            len(wraps_aget_response.call_args_list[0].kwargs["message_chunks"]) == 1
        ), "Both nodes compacted into 1 message"
        assert (
            len(wraps_aget_response.call_args_list[1].kwargs["message_chunks"]) == 2
        ), "Tight context forces 2 separate messages"
        assert any(
            block.block_type == "image"
            for msg in wraps_aget_response.call_args_list[0].kwargs["message_chunks"]
            for block in msg.blocks
        ), "Compacted message should contain image block"
