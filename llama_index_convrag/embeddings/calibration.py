"""The text that calibrates the static int8 variant's activation scales: ``calibration.txt``, shipped with the package.

Static quantization fixes each quantized ``MatMul`` input's scale once, from the ranges the fp32 graph reaches on
some text. Ours is ``calibration.txt``: short paragraphs of general prose on everyday, scientific, technical and
civic topics, and conversational questions, written for this package (no benchmark text, nothing about the package
itself). :func:`calibration_texts` gives each line and each run of :data:`JOINED_LINES` lines joined (passages
near the model's window); :class:`CalibrationFeeds` feeds them to ONNX Runtime's calibrator one text per run, so no
padding enters the ranges.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy as np

CALIBRATION_FILE = Path(__file__).with_name("calibration.txt")
TOKENIZER_FILE = Path(__file__).with_name("minilm_tokenizer.json")
#: Lines joined into one calibration passage beside the single lines: four lines reach about 200 word pieces, most
#: of the 256-piece window the ingest fills, so long inputs' ranges are calibrated too.
JOINED_LINES = 4
#: Word pieces per calibration text, [CLS] and [SEP] included (the ingest's window).
CALIBRATION_MAX_LENGTH = 256


def calibration_texts(path: Path = CALIBRATION_FILE) -> List[str]:
    """The non-empty lines of ``path``, then each run of :data:`JOINED_LINES` of them joined by a space."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines + [" ".join(lines[i:i + JOINED_LINES]) for i in range(0, len(lines), JOINED_LINES)]


def calibration_inputs(texts: List[str], tokenizer_path: Path = TOKENIZER_FILE,
                       max_length: int = CALIBRATION_MAX_LENGTH) -> List[Dict[str, np.ndarray]]:
    """One ONNX feed per text (a batch of one, no padding), truncated to ``max_length`` word pieces."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path))
    tok.enable_truncation(max_length=max_length)
    tok.no_padding()
    feeds = []
    for enc in tok.encode_batch(texts):
        ids = np.asarray([enc.ids], dtype=np.int64)
        feeds.append({"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})
    return feeds


class CalibrationFeeds:
    """An ``onnxruntime.quantization.CalibrationDataReader`` over :func:`calibration_inputs` (ORT's reader protocol:
    ``get_next`` returns the next feed, then None)."""

    def __init__(self, feeds: List[Dict[str, np.ndarray]]) -> None:
        self._feeds: Iterator[Dict[str, np.ndarray]] = iter(feeds)

    def get_next(self) -> Optional[Dict[str, Any]]:
        return next(self._feeds, None)

    def __iter__(self) -> "CalibrationFeeds":
        return self

    def __next__(self) -> Dict[str, Any]:
        feed = self.get_next()
        if feed is None:
            raise StopIteration
        return feed
