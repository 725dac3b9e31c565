"""Pick the BM25 analyzer of a new collection from the language of its documents (Chinese or not).

A sample of the files (the first :data:`SAMPLE_CHARS` characters of up to :data:`SAMPLE_FILES` files) is read; a
Chinese character counts as one word, any other word as one word (:func:`llama_index_convrag.text.words`). When Chinese makes at least
:data:`CHINESE_SHARE` of the words the analyzer is ``chinese`` (jieba word segmentation; Latin words stay whole
words), else ``english``. A mixed folder therefore gets the analyzer of most of its words, and the choice is said.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from llama_index_convrag.errors import ReaderError
from llama_index_convrag.ingest.readers import read_file
from llama_index_convrag.text import HAN, words

SAMPLE_FILES = 50
SAMPLE_CHARS = 4000
CHINESE_SHARE = 0.3


@dataclass(frozen=True)
class AnalyzerChoice:
    """The analyzer picked, the share of Chinese words in the sample and how many files were sampled."""

    analyzer: str
    chinese_share: float
    files: int

    def __str__(self) -> str:
        return (f"BM25 analyzer: {self.analyzer} (detected: {self.chinese_share:.0%} of the words in {self.files} "
                f"sampled file{'s' if self.files != 1 else ''} are Chinese; --analyzer to choose)")


def chinese_share(text: str) -> float:
    """Chinese characters over all words of ``text`` (0.0 for text without words)."""
    cjk = len(HAN.findall(text))
    total = cjk + len(words(HAN.sub(" ", text)))
    return cjk / total if total else 0.0


def choose_analyzer(files: Sequence[Path]) -> AnalyzerChoice:
    """The analyzer for a new collection of ``files`` (unreadable files are skipped: ingestion reports them)."""
    sample = []
    for path in list(files)[:SAMPLE_FILES]:
        try:
            sample.append("".join(d.text for d in read_file(path))[:SAMPLE_CHARS])
        except (OSError, ReaderError):  # an unreadable file is reported by the ingest itself
            continue
    share = chinese_share("\n".join(sample))
    return AnalyzerChoice("chinese" if share >= CHINESE_SHARE else "english", share, len(sample))
