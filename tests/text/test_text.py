"""The text layer on the issue's probes: words in any script, sentences, stems, languages, rules off."""

from __future__ import annotations

from llama_index_convrag.text import identify, rules_on, split_sentences, stem, terms


def test_words_of_any_script_are_words() -> None:
    assert terms("Müller bought a café in Zürich") == ["müller", "bought", "café", "zürich"]
    assert terms("Москва — столица России") == ["москв", "столиц", "росс"]
    assert terms("서울은 한국의 수도") == ["서울", "울은", "한국", "국의", "수도"]  # pairs: a word matches without its particle
    assert terms("北京是中国的首都") == ["北京", "中国", "首都"]


def test_sentences_keep_abbreviations_and_cut_after_full_width_ends() -> None:
    assert split_sentences("Dr. Smith went home. He slept.") == ["Dr. Smith went home.", "He slept."]
    assert split_sentences("東京は日本の首都です。大阪は大きい。") == ["東京は日本の首都です。", "大阪は大きい。"]


def test_stems_are_snowball_as_the_english_analyzer_indexes() -> None:
    assert [stem(w) for w in ("running", "runs", "companies", "generously")] == ["run", "run", "compani", "generous"]


def test_languages_and_the_rules_they_get() -> None:
    assert [identify(q) for q in ("Wie alt ist er?", "Where was he born?", "彼は何歳ですか？", "그는 몇 살입니까?",
                                  "他出生在哪里？", "Сколько ему лет?")] == ["de", "en", "ja", "ko", "zh", "ru"]
    assert rules_on("de") and not rules_on("ja") and not rules_on("ko")
