"""Conversational retrieval bench data: CAsT 2021/2022 and CANARD dev as (dialogues, corpus), chunked, embedded once.

Each set becomes dialogues of :class:`~llama_index_convrag.evaluation.datasets.ConversationTurn` plus a pseudo-corpus:

* ``cast21``: the 2021 gold passages (one document per canonical id); a turn's previous answers are the passages the
  system showed (the earlier turns' gold passages).
* ``cast22``: the 2022 gold responses (one document per distinct text); previous answers are the earlier responses.
* ``canard``: the QuAC answer spans (``I don't know.`` turns are dropped); the dialogue's Wikipedia title and
  section open the history as a zeroth turn (what the asker saw in QuAC, and what CANARD's own History starts with).

Embeddings are cached per text in ``bench/out/conv_emb_<model>.npz`` so any new query string is embedded once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from bench._data import OUT, shared_data
from llama_index_convrag.evaluation.datasets import (ConversationTurn, Dialogue, cast_passage_corpus,
                                                     load_canard, load_cast_turns)

log = logging.getLogger("bench")
NO_ANSWER = "I don't know."


@dataclass
class ConvSet:
    name: str
    dialogues: List[Dialogue]
    corpus: Dict[str, str]
    language: str = "en"


def _with(turn: ConversationTurn, **changes) -> ConversationTurn:
    fields = {k: getattr(turn, k) for k in ("turn_id", "dialogue_id", "position", "utterance", "rewrite", "answer",
                                             "relevant", "metadata")}
    fields.update(changes)
    return ConversationTurn(**fields)


def _doc_id(text: str) -> str:
    return "d" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def cast21() -> ConvSet:
    dialogues = load_cast_turns(shared_data() / "trec_cast" / "turns.jsonl", years=[2021])
    corpus = {d: doc.text for d, doc in cast_passage_corpus(dialogues).items()}
    out = [Dialogue(d.dialogue_id, tuple(_with(t, answer=t.metadata.get("gold_passage")) for t in d.turns),
                    d.metadata) for d in dialogues]
    return ConvSet("cast21", out, corpus)


def cast22() -> ConvSet:
    dialogues = load_cast_turns(shared_data() / "trec_cast" / "turns.jsonl", years=[2022])
    corpus: Dict[str, str] = {}
    out = []
    for d in dialogues:
        turns = []
        for t in d.turns:
            rel = {}
            if t.answer:
                rel = {_doc_id(t.answer): 1}
                corpus[_doc_id(t.answer)] = t.answer
            turns.append(_with(t, relevant=rel))
        out.append(Dialogue(d.dialogue_id, tuple(turns), d.metadata))
    return ConvSet("cast22", out, corpus)


def canard(max_dialogues: Optional[int] = None) -> ConvSet:
    dialogues = load_canard(shared_data() / "canard" / "dialogues_dev.jsonl", max_dialogues=max_dialogues)
    corpus: Dict[str, str] = {}
    out = []
    for d in dialogues:
        topic = " ".join(x for x in (d.metadata.get("wikipedia_title"), d.metadata.get("section_title")) if x)
        turns = [ConversationTurn(turn_id=f"{d.dialogue_id}#0", dialogue_id=d.dialogue_id, position=0,
                                  utterance=topic, rewrite=None, metadata={"pseudo": True})]
        for t in d.turns:
            rel = {}
            if t.answer and t.answer != NO_ANSWER:
                rel = {_doc_id(t.answer): 1}
                corpus[_doc_id(t.answer)] = t.answer
            turns.append(_with(t, relevant=rel, answer=t.answer if t.answer != NO_ANSWER else None))
        out.append(Dialogue(d.dialogue_id, tuple(turns), d.metadata))
    return ConvSet("canard", out, corpus)


def chunk_corpus(corpus: Dict[str, str], chunk_size: int, overlap: int) -> Tuple[List[str], List[str]]:
    """(chunk doc ids, chunk texts) through LlamaIndex's SentenceSplitter, as ingestion does."""
    from llama_index.core.node_parser import SentenceSplitter

    splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=overlap)
    ids, texts = [], []
    for doc_id, text in corpus.items():
        for chunk in splitter.split_text(text):
            ids.append(doc_id)
            texts.append(chunk)
    return ids, texts


class EmbeddingCache:
    """Text -> vector, persisted as one npz per model; ``embed`` only runs the model on unseen texts."""

    def __init__(self, model) -> None:
        self.model = model
        from llama_index_convrag.embeddings.identity import embed_model_id

        name = re.sub(r"[^0-9A-Za-z_.-]", "_", embed_model_id(model) or type(model).__name__)  # the variant too
        self.path = OUT / f"conv_emb_{name}.npz"
        self.vectors: Dict[str, np.ndarray] = {}
        if self.path.is_file():
            data = np.load(self.path)
            self.vectors = dict(zip(data["keys"].tolist(), data["vectors"]))
        self.dirty = False

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def embed(self, texts: Sequence[str], batch: int = 64) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in self.vectors))
        t0 = time.perf_counter()
        for i in range(0, len(todo), batch):
            part = todo[i:i + batch]
            for text, vec in zip(part, np.asarray(self.model.embed(part), dtype=np.float32)):
                self.vectors[self.key(text)] = vec
            self.dirty = True
            if (i // batch) % 20 == 0 and len(todo) > batch:
                log.info("embedded %d/%d new texts (%.0f s)", i + len(part), len(todo), time.perf_counter() - t0)
        return np.stack([self.vectors[k] for k in keys]) if keys else np.zeros((0, 384), dtype=np.float32)

    def save(self) -> None:
        if not self.dirty:
            return
        OUT.mkdir(parents=True, exist_ok=True)
        keys = list(self.vectors)
        tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")  # helpers share bench/out
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([self.vectors[k] for k in keys]))
        tmp.rename(self.path)
        self.dirty = False


def load_sets(names: Sequence[str]) -> Dict[str, ConvSet]:
    builders = {"cast21": cast21, "cast22": cast22, "canard": canard}
    unknown = [n for n in names if n not in builders]
    if unknown:
        raise ValueError(f"sets must be among {sorted(builders)}, got {unknown}")
    return {n: builders[n]() for n in names}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding

    cache = EmbeddingCache(LocalMiniLMEmbedding())
    for name, s in load_sets(["cast21", "cast22", "canard"]).items():
        texts = [t.utterance for d in s.dialogues for t in d.turns] + \
                [t.rewrite for d in s.dialogues for t in d.turns if t.rewrite]
        for size, overlap in ((256, 20), (700, 50)):
            texts += chunk_corpus(s.corpus, size, overlap)[1]
        log.info("%s: %d dialogues, %d docs, %d texts", name, len(s.dialogues), len(s.corpus), len(texts))
        cache.embed(texts)
        cache.save()
    print(json.dumps({"cached": len(cache.vectors)}))


@dataclass(frozen=True)
class HandMade:
    """A small written dialogue for one follow-up rule: the history, the follow-up and the words its query must hold."""

    rule: str
    history: Tuple[Tuple[str, str], ...]
    question: str
    expected: Tuple[str, ...]


HAND_MADE: Tuple[HandMade, ...] = (
    HandMade("answer subject", (("What are the largest moons of Jupiter?", "Io, Europa, Ganymede and Callisto."),
                                ("Who discovered them?", "Galileo Galilei discovered them in January 1610.")),
             "Where was he born?", ("Galileo",)),
    HandMade("answer subject", (("Which company makes the Model 3?", "Tesla makes the Model 3 in Fremont."),),
             "When was it founded?", ("Tesla",)),
    HandMade("answer subject", (("Who wrote Pride and Prejudice?", "Jane Austen wrote it; it was published in 1813."),),
             "What else did she write?", ("Austen",)),
    HandMade("answer subject", (("Which band recorded Abbey Road?", "The Beatles recorded Abbey Road in 1969."),),
             "When did they break up?", ("Beatles",)),
    HandMade("topic switch", (("What is the Hubble telescope?", "A space telescope launched in 1990."),
                              ("Who is it named after?", "Edwin Hubble, an American astronomer.")),
             "Which university did he attend?", ("Hubble", "Edwin")),
    HandMade("topic switch", (("How are glaciers formed?", "Snow compacts into ice over many years."),
                              ("Who first studied them scientifically?", "Louis Agassiz proposed the ice age theory.")),
             "What was his nationality?", ("Agassiz",)),
    HandMade("list item", (("What are the main types of renewable energy?",
                            "The main types are solar power, wind power, hydropower and geothermal energy."),),
             "Tell me more about the second one.", ("wind",)),
    HandMade("list item", (("Which phones have the best battery?",
                            "1. Moto G7 Power: a 5000 mAh battery\n2. Galaxy M30: 5000 mAh\n3. iPhone 11"),),
             "How much does the last one cost?", ("iPhone",)),
    HandMade("list item", (("Should I learn Python or Rust first?", "Both are good choices."),),
             "Why would I pick the latter?", ("Rust",)),
    HandMade("list item", (("What symptoms does the flu cause?", "Fever, cough, sore throat and muscle aches."),),
             "How long does the first one last?", ("Fever",)),
    HandMade("Chinese", (("你喜欢猫还是狗", "都喜欢"),), "为什么更喜欢后者", ("狗",)),
    HandMade("Chinese", (("北京有哪些景点", "有故宫、长城和颐和园。"),), "第二个要门票吗", ("长城",)),
    HandMade("Chinese", (("谁写了红楼梦", "曹雪芹写的"),), "他是哪个朝代的人", ("曹雪芹",)),
)
"""Written for the follow-up rules (never taken from a data set); the bench's ``--followups`` reports how many of
each rule's dialogues put the expected words into the query."""
