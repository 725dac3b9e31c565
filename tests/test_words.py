"""The shared word folding of the no-LLM text rules (``llama_index_convrag._words``)."""

import pytest

from llama_index_convrag._words import CJK_RUN, fold, stem


@pytest.mark.parametrize("word, folded", [
    ("Sharks's", "shark"), ("companies", "company"), ("Files", "file"), ("class", "class"), ("status", "status"),
    ("analysis", "analysis"), ("ties", "tie"), ("it’s", "it"), ("-gzip-", "gzip"), ("ls", "ls"),
])
def test_fold_case_possessive_and_plural(word, folded):
    assert fold(word) == folded


@pytest.mark.parametrize("word, stemmed", [
    ("listing", "list"), ("listed", "list"), ("lists", "list"), ("Written", "writ"), ("wrote", "writ"),
    ("hidden", "hid"), ("abilities", "ability"), ("red", "red"), ("--all", "--all"), ("-A", "-a"),
])
def test_stem_cuts_verb_endings_and_keeps_options(word, stemmed):
    assert stem(word) == stemmed


def test_cjk_runs():
    assert CJK_RUN.findall("北京 is 中国的首都。") == ["北京", "中国的首都"]
