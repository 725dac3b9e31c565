import pytest

from llama_index_convrag.embeddings.windows import count_over_window, model_window, window_spans, window_starts


def test_window_starts_cover_the_text_and_end_at_the_last_token():
    assert window_starts(5, 10, 2) == [0]
    assert window_starts(25, 10, 2) == [0, 8, 15]
    # a start inside a word moves back to the word's first piece
    flags = [True] * 25
    flags[8] = False
    assert window_starts(25, 10, 2, flags) == [0, 7, 15]


@pytest.mark.parametrize("size, overlap, message", [(0, 0, "window size must be >= 1 token, got 0"),
                                                    (10, 10, r"overlap must be in \[0, 9\] \(window size - 1\), got 10")])
def test_window_starts_reject_bad_values(size, overlap, message):
    with pytest.raises(ValueError, match=message):
        window_starts(20, size, overlap)


def test_window_spans_fit_the_model_and_cover_the_text(embed_model):
    text = " ".join(f"sentence {i} about retrieval windows." for i in range(120))
    spans = window_spans(text, embed_model, overlap=32)
    assert len(spans) > 1 and spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(b2 > a1 for (a1, _), (_, b2) in zip(spans, spans[1:]))
    assert max(embed_model.count_tokens([text[a:b] for a, b in spans])) <= embed_model.max_input_tokens
    assert all(a2 <= b1 for (_, b1), (a2, _) in zip(spans, spans[1:]))  # neighbours overlap: nothing skipped


def test_models_without_a_window_give_none():
    class NoWindow:
        pass

    assert model_window(NoWindow()) is None and count_over_window(NoWindow(), ["x"]) == (None, 0)
    with pytest.raises(ValueError, match="NoWindow does not state max_input_tokens"):
        window_spans("x", NoWindow(), 0)
