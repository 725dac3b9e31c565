import math

import pytest

from llama_index_convrag.synthesizers.packing import (
    TiktokenTokenizer,
    context_budget,
    count_tokens,
    lower_bound_calls,
    pack_texts,
    pack_token_ids,
    render_chunks,
)


def test_pack_fills_every_window_and_splits_only_when_full():
    windows = pack_token_ids([[1, 2, 3], [4, 5], [6, 7, 8, 9]], budget=4)
    assert windows == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]


def test_pack_keeps_whole_chunks_that_fit():
    assert pack_token_ids([[1, 2], [3, 4]], budget=4) == [[1, 2, 3, 4]]
    assert pack_token_ids([], budget=4) == []


@pytest.mark.parametrize("sizes,budget", [([5, 5, 5], 4), ([1] * 10, 3), ([7], 7), ([3, 9, 2, 8], 5)])
def test_pack_sits_at_the_lower_bound(sizes, budget):
    chunks = [list(range(n)) for n in sizes]
    expected = math.ceil(sum(sizes) / budget)
    assert len(pack_token_ids(chunks, budget)) == lower_bound_calls(sum(sizes), budget) == expected


def test_pack_rejects_non_positive_budget():
    with pytest.raises(ValueError, match="budget must be positive, got 0"):
        pack_token_ids([[1]], 0)


def test_context_budget_subtracts_every_term_and_names_them_when_exhausted():
    assert context_budget(1000, 100, 300, 5) == 595
    assert context_budget(1000, 100, 300, 5, chunk_size_limit=50) == 50
    with pytest.raises(ValueError, match=r"context_window 500 - num_output 256 - prompt 300 tokens .* = -61"):
        context_budget(500, 256, 300, 5)


def test_render_drops_empty_chunks_and_appends_separator():
    assert render_chunks([" a ", "  ", "", "b"]) == ["a\n\n", "b\n\n"]


def test_pack_texts_keeps_all_text_and_respects_budget():
    tok = TiktokenTokenizer()
    texts = render_chunks([f"sentence number {i} about retrieval." for i in range(20)])
    total = count_tokens(texts, tok)
    windows = pack_texts(texts, 25, tok)
    assert len(windows) == math.ceil(total / 25)
    assert "".join("".join(w.split()) for w in windows) == "".join("".join(t.split()) for t in texts)
    # re-encoding text cut mid-chunk can merge differently by a token or two; synthesizers keep padding >= 5
    assert all(len(tok.encode(w)) <= 25 + 3 for w in windows)


def test_one_window_of_joined_texts_equals_the_decoded_window():
    """The one-window shortcut (no decode) gives what decoding the packed token ids gives, multi-byte text too."""
    tok = TiktokenTokenizer()
    texts = render_chunks(["  Café naïve — 東京 🚀 ", "second\tchunk\n\n", "  x  "])
    ids = [i for t in texts for i in tok.encode(t)]
    assert pack_texts(texts, len(ids), tok) == [tok.decode(ids).strip()]
    assert pack_texts(texts, len(ids) - 1, tok) == [tok.decode(w).strip() for w in pack_token_ids(
        [tok.encode(t) for t in texts], len(ids) - 1)]


def test_prompt_helper_counts_with_the_cached_default_or_what_is_assigned():
    """Without a tokenizer the helper counts with the cached TiktokenTokenizer, also when core's own default is the
    global tokenizer (same ids); a tokenizer assigned to Settings is used as core would use it."""
    import llama_index.core
    from llama_index.core import Settings
    from llama_index.core.utils import get_tokenizer

    from llama_index_convrag.synthesizers.resolve import helper_tokenizer

    saved = llama_index.core.global_tokenizer
    try:
        llama_index.core.global_tokenizer = None
        first = helper_tokenizer(None)
        assert first.__self__ == TiktokenTokenizer() and first("Café 東京") == get_tokenizer()("Café 東京")
        assert helper_tokenizer(None).__self__ == TiktokenTokenizer()  # core's default is now the global one

        def words(text: str) -> list:
            return text.split()

        Settings.tokenizer = words
        assert helper_tokenizer(None) is words
        mine = TiktokenTokenizer("gpt-4o")
        assert helper_tokenizer(mine) == mine.encode
    finally:
        llama_index.core.global_tokenizer = saved
