"""Single-word vectors of the local model's whole-word vocabulary, made once per machine and cached.

Episodic recall's vocabulary bridge compares single-word embeddings (``memory/bridge.py``); a word it meets for the
first time in a process costs a model run. A :class:`WordTable` holds the vector of every whole word of the
tokenizer's vocabulary (:func:`vocabulary_words`: a WordPiece entry that is not a ``##`` continuation and holds only
letters), each embedded alone, as the bridge embeds a word, and made unit length by :func:`unit_rows`, so that a word
read from the table has the vector a lookup would have computed. The table is a few ``.npy`` files (parts of
:data:`PART_WORDS` words, the most frequent first) in the model files' cache folder
(:func:`~llama_index_convrag.embeddings.model_files.default_cache_dir`), read memory-mapped, keyed by the model's
identity, the ONNX file it runs and the word list (:func:`word_table_paths`).

:class:`WordTableSource` is how a process gets it: :meth:`~WordTableSource.get` answers the parts on disk and makes
the missing ones in one background thread (each part under a file lock, so processes share the work and none makes a
part twice); :meth:`~WordTableSource.ensure` makes them now. Only the local model has a table
(:func:`word_table_source`): a remote model's calls are not spent on words nobody asked for.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding, _load_tokenizer
from llama_index_convrag.embeddings.model_files import default_cache_dir
from llama_index_convrag.errors import ConfigurationError

logger = logging.getLogger(__name__)

#: Bumped when the table's words or vectors are made differently (an older file is then not read).
TABLE_VERSION = 1
#: Words embedded per call while a table is made (all one word piece wide: no padding, the same vectors as alone).
BUILD_BATCH = 256
#: Words per part file. A part is made and written whole (a few seconds of CPU), so a process that exits while the
#: table is being made loses at most one part's work; the vocabulary's most frequent words come first.
PART_WORDS = 2048
#: Seconds between two looks for parts another thread or process has written since.
RECHECK_S = 1.0
#: Seconds the interpreter's exit waits for a background maker to finish its current call.
EXIT_WAIT_S = 10.0

_LOCK = threading.Lock()
_PARTS: Dict[str, Tuple[Sequence[str], np.ndarray]] = {}
_TABLES: Dict[str, Tuple[int, "WordTable"]] = {}
_STARTED: Dict[str, threading.Thread] = {}
_STOP = threading.Event()


def unit_rows(rows: Sequence[Sequence[float]]) -> List[np.ndarray]:
    """Each row as a float32 vector of unit length (a zero row stays zero)."""
    out = []
    for r in rows:
        v = np.asarray(r, dtype=np.float32)
        n = float(np.linalg.norm(v))
        out.append(v / n if n > 0 else v)
    return out


@lru_cache(maxsize=4)
def vocabulary_words(tokenizer_path: str) -> Tuple[str, ...]:
    """The whole words of a WordPiece vocabulary, in id order: entries that are not ``##`` continuations and hold
    only letters (22,501 of the local model's 30,522). Read once per file and process."""
    vocab = _load_tokenizer(tokenizer_path, 0).get_vocab(with_added_tokens=False)
    return tuple(w for w, _ in sorted(vocab.items(), key=lambda item: item[1])
                 if w.isalpha() and not w.startswith("##"))


class WordTable(Mapping[str, np.ndarray]):
    """Read-only ``word -> unit vector`` over parts ``(words, matrix)``, each matrix one row per word of its part."""

    def __init__(self, parts: Sequence[Tuple[Sequence[str], np.ndarray]] = ()) -> None:
        self._rows: Dict[str, np.ndarray] = {}
        for words, matrix in parts:
            if matrix.ndim != 2 or matrix.shape[0] != len(words):
                raise ConfigurationError(f"a word table needs one row per word: {len(words)} words, matrix of shape "
                                 f"{matrix.shape}")
            self._rows.update(zip(words, matrix))

    def __getitem__(self, word: str) -> np.ndarray:
        return self._rows[word]

    def __contains__(self, word: object) -> bool:
        return word in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def word_table_paths(model: LocalMiniLMEmbedding, words: Sequence[str],
                     cache_dir: Optional[Path] = None) -> List[Tuple[List[str], Path]]:
    """The table's parts: each run of :data:`PART_WORDS` words (in the given order) with its file,
    ``<cache>/words-<key>-<part>.npy``; the key hashes the table version, the part size, the model's identity, the
    name of the ONNX file it runs (which names the source file's hash and the runtime's version) and the words."""
    h = hashlib.sha256(f"{TABLE_VERSION}\0{PART_WORDS}\0{model.embed_model_id}\0{Path(model.onnx_path).name}\0"
                       .encode())
    h.update("\n".join(words).encode("utf-8"))
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    key = h.hexdigest()[:24]
    return [(list(words[i:i + PART_WORDS]), folder / f"words-{key}-{i // PART_WORDS:03d}.npy")
            for i in range(0, len(words), PART_WORDS)]


def build_word_table(model: BaseEmbedding, words: Sequence[str], path: Path,
                     stop: Optional[threading.Event] = None) -> bool:
    """Embed ``words`` (one word a text, as :class:`~llama_index_convrag.memory.bridge.WordVectors` embeds them:
    :data:`BUILD_BATCH` a call), write their unit vectors to ``path`` through a temporary file renamed into place
    (a reader never sees half a part). Returns False, writing nothing, when ``stop`` is set between two calls."""
    rows: List[np.ndarray] = []
    for i in range(0, len(words), BUILD_BATCH):
        if stop is not None and stop.is_set():
            return False
        rows.extend(unit_rows(model.get_text_embedding_batch(list(words[i:i + BUILD_BATCH]))))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, np.stack(rows))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return True


def _read(path: Path, words: Sequence[str]) -> Optional[Tuple[Sequence[str], np.ndarray]]:
    """A part's words and rows (memory-mapped), or None, with a warning, when its file is not one row per word."""
    try:
        matrix = np.load(path, mmap_mode="r").view(np.ndarray)  # the mapped pages, without memmap's row overhead
        WordTable([(words, matrix)])
        return words, matrix
    except (OSError, ValueError) as exc:
        logger.warning("word table part %s is unreadable (%s); its words are embedded as before", path, exc)
        return None


class WordTableSource:
    """The word table of one local model (``words``: :func:`vocabulary_words` of its tokenizer when None), its parts
    shared by every source of the same files in this process. Nothing is read or made in ``__init__``."""

    def __init__(self, model: LocalMiniLMEmbedding, words: Optional[Sequence[str]] = None,
                 cache_dir: Optional[Path] = None) -> None:
        self._model = model
        self._words = list(words) if words is not None else None
        self._cache_dir = cache_dir
        self._parts: Optional[List[Tuple[List[str], Path]]] = None
        self._table: Optional[WordTable] = None
        self._loaded = 0
        self._checked = -float("inf")

    @property
    def parts(self) -> List[Tuple[List[str], Path]]:
        """Each part's words and file (:func:`word_table_paths`)."""
        if self._parts is None:
            if self._words is None:
                self._words = vocabulary_words(self._model.tokenizer_path)
            self._parts = word_table_paths(self._model, self._words, self._cache_dir)
        return self._parts

    @property
    def complete(self) -> bool:
        """Whether every part is on disk."""
        return all(path.is_file() for _, path in self.parts)

    def _load(self) -> Optional[WordTable]:
        """The parts on disk, read once each (looked for again at most every :data:`RECHECK_S` seconds)."""
        now = time.monotonic()
        if self._loaded == len(self.parts) or now - self._checked < RECHECK_S:
            return self._table
        self._checked = now
        with _LOCK:
            found = []
            for words, path in self.parts:
                part = _PARTS.get(str(path))
                if part is None and path.is_file():
                    part = _read(path, words)
                    if part is not None:
                        _PARTS[str(path)] = part
                if part is not None:
                    found.append(part)
            if len(found) > self._loaded:  # one table of the parts found so far, per process
                key = str(self.parts[0][1])
                if _TABLES.get(key, (0, None))[0] < len(found):
                    _TABLES[key] = (len(found), WordTable(found))
                self._loaded, self._table = _TABLES[key]
        return self._table

    def get(self) -> Optional[WordTable]:
        """The parts of the table on disk (None: none yet); when some are missing, makes them in a background thread
        (once per process; a part another process is making is left to it)."""
        table = self._load()
        if self._loaded < len(self.parts):
            key = str(self.parts[0][1])
            with _LOCK:
                if key not in _STARTED and not _STOP.is_set():
                    if not _STARTED:
                        atexit.register(_stop_makers)
                    _STARTED[key] = threading.Thread(target=self._make_quietly, name="convrag-word-table",
                                                     daemon=True)
                    _STARTED[key].start()
        return table

    def ensure(self) -> WordTable:
        """The whole table, its missing parts made now (about half a minute of CPU for the local model's vocabulary;
        waits for a part another process is making)."""
        self._make(blocking=True)
        self._checked = -float("inf")
        table = self._load()
        if table is None or self._loaded < len(self.parts):
            raise OSError(f"the word table's parts at {self.parts[0][1].parent} could not all be made or read")
        return table

    def _make(self, blocking: bool, stop: Optional[threading.Event] = None) -> None:
        from filelock import FileLock, Timeout

        for words, path in self.parts:
            if path.is_file():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with FileLock(str(path) + ".lock", timeout=-1 if blocking else 0):
                    if not path.is_file() and not build_word_table(self._model, words, path, stop):
                        return
            except Timeout:
                logger.info("another process is making the word table part %s", path)

    def _make_quietly(self) -> None:
        try:
            self._make(blocking=False, stop=_STOP)
        except Exception:  # a cache folder that cannot be written: words are embedded as before
            logger.warning("could not make the word table in %s", self.parts[0][1].parent, exc_info=True)


def _stop_makers() -> None:
    """At exit: background makers stop after their current call (its part is not written) and are waited for, so
    that none is inside the model while the interpreter shuts down."""
    _STOP.set()
    for thread in list(_STARTED.values()):
        thread.join(EXIT_WAIT_S)


def word_table_source(model: BaseEmbedding) -> Optional[WordTableSource]:
    """The word table of ``model`` when it is the local model, else None."""
    return WordTableSource(model) if isinstance(model, LocalMiniLMEmbedding) else None
