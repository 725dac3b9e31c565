import pytest

from llama_index_convrag.evaluation.answers import (answer_tokens, evaluate_answers, exact_match,
                                                    normalize_answer, token_f1)
from llama_index_convrag.text import has_cjk


@pytest.mark.parametrize(("text", "normalised"), [
    ("The Cat!", "cat"),
    ("  an   apple, a pear ", "apple pear"),
    ("Theory of the 'Mothers'", "theory of mothers"),
    ("北京。", "北 京"),
    ("“北京”是中国的首都！", "北 京 是 中 国 的 首 都"),
    ("iPhone 15 在2023年发布", "iphone 15 在 2023 年 发 布"),
])
def test_normalisation(text, normalised):
    assert normalize_answer(text) == normalised


def test_cjk_detection():
    assert has_cjk("价格是多少")
    assert has_cjk("the 北京 office")
    assert not has_cjk("café naïve — résumé")


def test_exact_match_uses_squad_normalisation_and_the_best_gold():
    assert exact_match("The Cat!", "cat") == 1.0
    assert exact_match("a dog", "cat") == 0.0
    assert exact_match("a dog", ["cat", "Dog."]) == 1.0
    assert exact_match("北京。", "北京") == 1.0
    assert exact_match("北京市", "北京") == 0.0


def test_english_f1_is_over_words():
    # [big, red, dog] vs [red, dog, barks]: precision 2/3, recall 2/3.
    assert token_f1("the big red dog", "Red dog barks") == pytest.approx(2 / 3)
    assert token_f1("red dog", ["cat", "red dog barks"]) == pytest.approx(2 * 1 * (2 / 3) / (1 + 2 / 3))
    assert token_f1("cat", "dog") == 0.0


def test_chinese_f1_is_over_characters():
    # 8 predicted characters, 4 gold, all 4 gold characters found: P = 1/2, R = 1.
    assert answer_tokens("北京是中国的首都") == list("北京是中国的首都")
    assert token_f1("北京是中国的首都", "首都北京") == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    # Latin words inside Chinese text stay whole: [iphone, 15, 发, 布] vs [iphone, 发, 布].
    assert token_f1("iPhone 15发布", "iPhone发布") == pytest.approx(2 * 0.75 * 1.0 / 1.75)


def test_empty_answers_follow_squad_v2():
    assert token_f1("", "") == 1.0
    assert token_f1("the", "") == 1.0  # both normalise to nothing
    assert token_f1("", "cat") == 0.0
    with pytest.raises(ValueError, match="non-empty list"):
        token_f1("cat", [])


def test_evaluate_answers_means_and_missing_predictions():
    result = evaluate_answers({"a": "The cat", "b": "北京"}, {"a": "cat", "b": ["首都北京"], "c": "dog"})
    assert result.per_query == {
        "a": {"exact_match": 1.0, "f1": 1.0},
        "b": {"exact_match": 0.0, "f1": pytest.approx(2 * 1.0 * 0.5 / 1.5)},
        "c": {"exact_match": 0.0, "f1": 0.0},
    }
    assert result.means["exact_match"] == pytest.approx(1 / 3)
    assert result.means["f1"] == pytest.approx((1.0 + 2 / 3) / 3)
    with pytest.raises(ValueError, match=r"predictions for queries without a gold answer: \['z'\]"):
        evaluate_answers({"z": "x"}, {"a": "cat"})
