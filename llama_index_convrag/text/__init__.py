"""The one text layer of the package's rules: which language, which words, which sentences, which stems.

Every text rule (the extractive answer, grounding, the echo check, the LLM-free rewrite, the ingest's analyzer
choice) reads text through this package, so a word, a sentence and a Chinese character are the same thing
everywhere, and the stems match what Milvus' BM25 analyzers index. Models and word lists load on first use.
"""

from llama_index_convrag.text.language import SUPPORTED, UNDETERMINED, identify, rules_on
from llama_index_convrag.text.lexicon import stemmer, stop_words
from llama_index_convrag.text.scripts import CJK, CJK_RUN, HAN, has_cjk, is_cjk
from llama_index_convrag.text.sentences import split_sentences
from llama_index_convrag.text.words import stem, terms, words

__all__ = ["CJK", "CJK_RUN", "HAN", "SUPPORTED", "UNDETERMINED", "has_cjk", "identify", "is_cjk", "rules_on",
           "split_sentences", "stem", "stemmer", "stop_words", "terms", "words"]
