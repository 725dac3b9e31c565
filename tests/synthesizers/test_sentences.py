import pytest

from llama_index_convrag.synthesizers.sentences import (
    Sentence,
    compose,
    cosine,
    select,
    sentences_of,
    split_sentences,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("He said \"stop.\" Then he left.", ["He said \"stop.\"", "Then he left."]),
        ("Use e.g. the first. Pi is 3.14 here.", ["Use e.g. the first.", "Pi is 3.14 here."]),
        ("北京是首都。长城很长！你去过吗？好", ["北京是首都。", "长城很长！", "你去过吗？", "好"]),
        ("他说：“走吧。”然后走了。", ["他说：“走吧。”", "然后走了。"]),
        ("hard\nwrapped line. Next", ["hard wrapped line.", "Next"]),
        ("Title\n\nBody text", ["Title", "Body text"]),
        ("Wow!!! Really?!", ["Wow!!!", "Really?!"]),
        ("...  \n\n -- ", []),
        ("", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_sentences_of_keeps_order_and_drops_repeats():
    assert sentences_of(["A one. B two.", "B two. C three."]) == [
        Sentence(0, 0, "A one."),
        Sentence(0, 1, "B two."),
        Sentence(1, 1, "C three."),
    ]


def test_cosine_handles_scale_and_zero_vectors():
    assert cosine([1.0, 0.0], [[2.0, 0.0], [0.0, 3.0], [0.0, 0.0], [1.0, 1.0]]) == pytest.approx(
        [1.0, 0.0, 0.0, 2**-0.5]
    )


def test_select_best_first_with_ties_in_document_order():
    assert select([0.1, 0.9, 0.5, 0.9], [1, 1, 1, 1], max_sentences=3) == [1, 3, 2]


def test_select_skips_what_overflows_the_token_limit():
    # 1 (0.9, 8 tokens) fits, 2 (0.8, 5) would make 13 > 10, 0 (0.5, 2) fits
    assert select([0.5, 0.9, 0.8], [2, 8, 5], max_sentences=3, max_tokens=10) == [1, 0]


def test_select_stops_below_the_cutoff():
    assert select([0.5, 0.9, 0.2], [1, 1, 1], max_sentences=3, similarity_cutoff=0.4) == [1, 0]


def test_compose_document_order_one_marker_per_run():
    chosen = [Sentence(2, 0, "C."), Sentence(0, 3, "A2."), Sentence(0, 1, "A1."), Sentence(1, 0, "B.")]
    assert compose(chosen) == "A1. A2. [1] B. [2] C. [3]"


def test_compose_joins_chinese_without_spaces():
    assert compose([Sentence(0, 1, "长城很长！"), Sentence(0, 0, "北京是首都。")]) == "北京是首都。长城很长！ [1]"
    assert compose([]) == ""
