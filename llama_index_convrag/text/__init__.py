"""The one text layer of the package's rules: which language, which words, which sentences, which stems.

Every text rule (the extractive answer, grounding, the echo check, the LLM-free rewrite, the ingest's analyzer
choice) reads text through this package, so a word, a sentence and a Chinese character are the same thing
everywhere, and the stems match what Milvus' BM25 analyzers index. Models and word lists load on first use.
"""

from llama_index_convrag.text.language import SUPPORTED, UNDETERMINED, identify, rules_on
from llama_index_convrag.text.lexicon import month_names, stemmer, stop_words
from llama_index_convrag.text.scripts import CJK, HAN, has_cjk, is_cjk
from llama_index_convrag.text.sentences import may_end_sentence, sentence_spans, split_sentences
from llama_index_convrag.text.words import holds_phrase, stem, terms, words

__all__ = ["CJK", "HAN", "SUPPORTED", "UNDETERMINED", "has_cjk", "holds_phrase", "identify", "is_cjk", "may_end_sentence", "month_names", "rules_on", "sentence_spans",
           "split_sentences", "stem", "stemmer", "stop_words", "terms", "words"]
