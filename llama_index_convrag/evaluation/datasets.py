"""Evaluation data as typed records: BEIR-layout collections, TREC CAsT turns and CANARD dialogues.

Loaders read files only when called and never touch the network. Relevance judgments are plain
``{query_id: {doc_id: grade}}`` dictionaries (``Qrels``), the shape every metric function here takes.
"""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union
from llama_index_convrag.errors import ConfigurationError, PathNotFoundError

logger = logging.getLogger(__name__)

Qrels = Dict[str, Dict[str, int]]
PathLike = Union[str, Path]


@dataclass(frozen=True)
class Document:
    """One corpus entry."""

    doc_id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def full_text(self) -> str:
        """``title + "\\n" + text`` (the BEIR convention), or the text alone when there is no title."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Query:
    """One evaluation query."""

    query_id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BeirDataset:
    """A BEIR-layout collection: corpus, the queries judged in one split, and that split's qrels."""

    name: str
    split: str
    corpus: Dict[str, Document]
    queries: Dict[str, Query]
    qrels: Qrels

    def subset(self, max_queries: int, corpus_size: Optional[int] = None) -> "BeirDataset":
        """A small, deterministic slice for tests and notebooks.

        Takes the first ``max_queries`` queries (file order) with at least one positive judgment, every
        document judged positive for them, then pads with other documents in file order up to
        ``corpus_size`` (distractors). Qrels are restricted to the kept queries and documents.
        """
        if max_queries < 1:
            raise ConfigurationError(f"max_queries must be >= 1, got {max_queries!r}")
        picked = [qid for qid in self.queries if any(g > 0 for g in self.qrels.get(qid, {}).values())]
        picked = picked[:max_queries]
        keep: Dict[str, None] = {}
        for qid in picked:
            for doc_id, grade in self.qrels[qid].items():
                if grade > 0 and doc_id in self.corpus:
                    keep.setdefault(doc_id)
        if corpus_size is not None:
            if corpus_size < len(keep):
                raise ConfigurationError(
                    f"corpus_size={corpus_size} is smaller than the {len(keep)} documents judged relevant "
                    f"for the first {len(picked)} queries; raise corpus_size or lower max_queries"
                )
            for doc_id in self.corpus:
                if len(keep) >= corpus_size:
                    break
                keep.setdefault(doc_id)
        corpus = {doc_id: self.corpus[doc_id] for doc_id in self.corpus if doc_id in keep}
        qrels = {
            qid: {d: g for d, g in self.qrels[qid].items() if d in corpus} for qid in picked
        }
        return BeirDataset(
            name=self.name,
            split=self.split,
            corpus=corpus,
            queries={qid: self.queries[qid] for qid in picked},
            qrels=qrels,
        )


def _read_jsonl(path: Path) -> Iterator[Dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigurationError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc


def _require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise PathNotFoundError(f"{what} not found: {str(path)!r}")
    return path


def load_qrels(path: PathLike) -> Qrels:
    """Read a BEIR qrels TSV (``query-id  corpus-id  score`` with a header row)."""
    path = _require_file(Path(path), "qrels file")
    qrels: Qrels = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:3]] != ["query-id", "corpus-id", "score"]:
            raise ConfigurationError(
                f"{path}: expected a header 'query-id<TAB>corpus-id<TAB>score', got {header!r}"
            )
        for number, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) < 3:
                raise ConfigurationError(f"{path}:{number}: expected 3 tab-separated columns, got {row!r}")
            qrels.setdefault(row[0], {})[row[1]] = int(float(row[2]))
    return qrels


def load_corpus(path: PathLike) -> Dict[str, Document]:
    """Read a BEIR ``corpus.jsonl`` ({_id, title, text, metadata})."""
    path = _require_file(Path(path), "corpus file")
    return {
        str(row["_id"]): Document(
            doc_id=str(row["_id"]),
            text=row.get("text") or "",
            title=row.get("title") or "",
            metadata=row.get("metadata") or {},
        )
        for row in _read_jsonl(path)
    }


def load_queries(path: PathLike) -> Dict[str, Query]:
    """Read a BEIR ``queries.jsonl`` ({_id, text, metadata})."""
    path = _require_file(Path(path), "queries file")
    return {
        str(row["_id"]): Query(query_id=str(row["_id"]), text=row["text"], metadata=row.get("metadata") or {})
        for row in _read_jsonl(path)
    }


def available_splits(path: PathLike) -> List[str]:
    """Split names with a ``qrels/<split>.tsv`` file under a BEIR folder."""
    return sorted(p.stem for p in (Path(path) / "qrels").glob("*.tsv"))


def load_beir(path: PathLike, split: Optional[str] = None) -> BeirDataset:
    """Load a BEIR folder; queries are those judged in ``split`` (the only split when ``None``)."""
    root = Path(path)
    if not root.is_dir():
        raise PathNotFoundError(f"BEIR data folder not found: {str(root)!r}")
    splits = available_splits(root)
    if split is None:
        if len(splits) != 1:
            raise ConfigurationError(f"{root}: choose a split, one of {splits}" if splits else f"{root}: no qrels/*.tsv")
        split = splits[0]
    elif split not in splits:
        raise ConfigurationError(f"split must be one of {splits}, got {split!r}")
    qrels = load_qrels(root / "qrels" / f"{split}.tsv")
    all_queries = load_queries(root / "queries.jsonl")
    missing = [qid for qid in qrels if qid not in all_queries]
    if missing:
        raise ConfigurationError(f"{root}: {len(missing)} judged queries are absent from queries.jsonl, e.g. {missing[:3]}")
    queries = {qid: q for qid, q in all_queries.items() if qid in qrels}
    return BeirDataset(name=root.name, split=split, corpus=load_corpus(root / "corpus.jsonl"),
                       queries=queries, qrels=qrels)


# ---------------------------------------------------------------------------------------- dialogues


@dataclass(frozen=True)
class ConversationTurn:
    """One user turn: the raw utterance, the human standalone rewrite and, where known, gold data."""

    turn_id: str
    dialogue_id: str
    position: int
    utterance: str
    rewrite: Optional[str] = None
    answer: Optional[str] = None
    relevant: Mapping[str, int] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Dialogue:
    """An ordered conversation."""

    dialogue_id: str
    turns: Tuple[ConversationTurn, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)


def dialogue_qrels(dialogues: Iterable[Dialogue]) -> Qrels:
    """``{turn_id: relevant}`` for every turn that has judgments."""
    return {t.turn_id: dict(t.relevant) for d in dialogues for t in d.turns if t.relevant}


def load_cast_turns(path: PathLike, years: Optional[Sequence[int]] = None) -> List[Dialogue]:
    """TREC CAsT turns (``trec_cast/turns.jsonl``) grouped into dialogues in file order.

    ``relevant`` is ``{canonical_result_id: 1}`` where the year gives one (2020, 2021); ``answer`` is the
    2022 gold response; the 2021 gold passage text is kept in ``metadata["gold_passage"]`` (see
    :func:`cast_passage_corpus`). 2022 dialogues are paths through topic trees that share turns, so
    their turn ids are qualified as ``"<topic_id>:<turn_id>"`` to stay unique.
    """
    path = _require_file(Path(path), "CAsT turns file")
    wanted = None if years is None else {int(y) for y in years}
    grouped: Dict[str, List[Dict[str, Any]]] = {}
    for row in _read_jsonl(path):
        if wanted is not None and int(row["year"]) not in wanted:
            continue
        grouped.setdefault(str(row["topic_id"]), []).append(row)
    dialogues = []
    for topic_id, rows in grouped.items():
        turns = []
        for position, row in enumerate(rows, start=1):
            turn_id = str(row["turn_id"])
            if int(row["year"]) >= 2022:
                turn_id = f"{topic_id}:{turn_id}"
            canonical = row.get("canonical_result_id")
            turns.append(ConversationTurn(
                turn_id=turn_id,
                dialogue_id=topic_id,
                position=position,
                utterance=row["raw_utterance"].strip(),
                rewrite=(row.get("manual_rewrite") or "").strip() or None,
                answer=row.get("gold_response"),
                relevant={canonical: 1} if canonical else {},
                metadata={k: row[k] for k in ("year", "automatic_rewrite", "gold_passage", "provenance",
                                                "canonical_result_id", "topic_title") if row.get(k) is not None},
            ))
        dialogues.append(Dialogue(dialogue_id=topic_id, turns=tuple(turns),
                                  metadata={"year": int(rows[0]["year"])}))
    return dialogues


def cast_passage_corpus(dialogues: Iterable[Dialogue]) -> Dict[str, Document]:
    """A pseudo-corpus of the gold passages carried by the turns (CAsT 2021).

    One document per ``canonical_result_id``; when several turns cite the same id with different passage
    text, the texts are joined (the id names a document, the passages are parts of it).
    """
    texts: Dict[str, List[str]] = {}
    for dialogue in dialogues:
        for turn in dialogue.turns:
            passage = turn.metadata.get("gold_passage")
            doc_id = turn.metadata.get("canonical_result_id")
            if passage and doc_id and passage not in texts.setdefault(doc_id, []):
                texts[doc_id].append(passage)
    return {doc_id: Document(doc_id=doc_id, text="\n".join(parts)) for doc_id, parts in texts.items() if parts}


def load_canard(path: PathLike, max_dialogues: Optional[int] = None) -> List[Dialogue]:
    """CANARD dialogues (``canard/dialogues_dev.jsonl``): question, human rewrite and QuAC answer per turn.

    CANARD has no passages, so turns carry no relevance judgments; use it for rewrite quality.
    """
    path = _require_file(Path(path), "CANARD dialogues file")
    dialogues = []
    for row in _read_jsonl(path):
        if max_dialogues is not None and len(dialogues) >= max_dialogues:
            break
        dialogue_id = str(row["dialog_id"])
        turns = tuple(
            ConversationTurn(
                turn_id=f"{dialogue_id}#{t['turn']}",
                dialogue_id=dialogue_id,
                position=position,
                utterance=t["question"],
                rewrite=t.get("rewrite"),
                answer=t.get("answer"),
            )
            for position, t in enumerate(row["turns"], start=1)
        )
        dialogues.append(Dialogue(
            dialogue_id=dialogue_id, turns=turns,
            metadata={"wikipedia_title": row.get("wikipedia_title"), "section_title": row.get("section_title")},
        ))
    return dialogues
