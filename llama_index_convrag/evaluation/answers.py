"""Answer metrics: exact match and token F1 with SQuAD normalisation; character tokens for Chinese.

English follows the official SQuAD v1.1 script (lowercase, drop punctuation and the articles a/an/the,
collapse whitespace, whitespace tokens). Text containing CJK characters is tokenised as in the CMRC 2018
script: each CJK character is a token, runs of Latin letters/digits stay one token, punctuation (ASCII and
full-width) is dropped.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence, Union

import regex

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.text import CJK, has_cjk

Gold = Union[str, Sequence[str]]

# One CJK character (the text layer's definition), or a run of other letters/digits (which stops at the next CJK one).
_CJK_TOKENS = regex.compile(f"{CJK.pattern}|(?:(?!{CJK.pattern})[^\\W_])+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation; for CJK text, also drops Unicode punctuation and all whitespace between CJK tokens."""
    if has_cjk(text):
        return " ".join(_cjk_tokens(text))
    lowered = text.lower()
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", no_punct).split())


def _cjk_tokens(text: str) -> List[str]:
    cleaned = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text.lower())
    return _CJK_TOKENS.findall(cleaned)


def answer_tokens(text: str) -> List[str]:
    """Tokens F1 is computed over: words for English, characters (and Latin words) for CJK text."""
    return normalize_answer(text).split()


def _golds(gold: Gold) -> List[str]:
    golds = [gold] if isinstance(gold, str) else list(gold)
    if not golds:
        raise ConfigurationError("gold must be a string or a non-empty list of strings")
    return golds


def exact_match(prediction: str, gold: Gold) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (best over several golds)."""
    pred = normalize_answer(prediction)
    return max(float(pred == normalize_answer(g)) for g in _golds(gold))


def _f1(pred_tokens: List[str], gold_tokens: List[str]) -> float:
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, gold: Gold) -> float:
    """Bag-of-tokens F1 between prediction and gold (best over several golds); empty vs empty is 1."""
    pred = answer_tokens(prediction)
    return max(_f1(pred, answer_tokens(g)) for g in _golds(gold))


@dataclass
class AnswerMetrics:
    """Mean exact match and F1, and both per query."""

    means: Dict[str, float]
    per_query: Dict[str, Dict[str, float]]

    def to_dict(self) -> Dict[str, object]:
        return {"metrics": self.means, "per_query": self.per_query}


def evaluate_answers(predictions: Mapping[str, str], golds: Mapping[str, Gold]) -> AnswerMetrics:
    """Score ``{qid: prediction}`` against ``{qid: gold or [golds]}``; a missing prediction scores 0."""
    if not golds:
        raise ConfigurationError("golds must not be empty")
    extra = sorted(set(predictions) - set(golds))
    if extra:
        raise ConfigurationError(f"predictions for queries without a gold answer: {extra[:5]}")
    per_query = {}
    for qid, gold in golds.items():
        pred = predictions.get(qid)
        per_query[qid] = (
            {"exact_match": 0.0, "f1": 0.0} if pred is None
            else {"exact_match": exact_match(pred, gold), "f1": token_f1(pred, gold)}
        )
    n = len(per_query)
    means = {m: sum(s[m] for s in per_query.values()) / n for m in ("exact_match", "f1")}
    return AnswerMetrics(means=means, per_query=per_query)
