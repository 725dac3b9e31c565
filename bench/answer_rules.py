"""Each rule of the extractive answer off (or set otherwise), side by side: does the gold answer stay in the answer?

The sets, retrieval and containment of ``bench/answer_containment.py`` (RGB English, RGB Chinese, CANARD one-sentence
answers, man pages of this machine): each question's top 5 passages are ranked once, then answered by
:class:`~llama_index_convrag.synthesizers.Extractive` under each :class:`AnswerRules` of :data:`VARIANTS` (the same
embedding model, its vectors memoised across variants). Printed per variant: contained / counted per set, all
questions and each half (first / second half by question order).

    PYTHONPATH=$PWD python bench/answer_rules.py                      # every variant
    PYTHONPATH=$PWD python bench/answer_rules.py --variants default,w_rank
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from answer_containment import canard, norm, real_files, retrieve, rgb  # noqa: E402

from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.synthesizers import Extractive  # noqa: E402
from llama_index_convrag.synthesizers.answer_rules import DEFAULT_ANSWER_RULES, AnswerType  # noqa: E402

D = DEFAULT_ANSWER_RULES


def _cues_without(*kinds: AnswerType) -> Any:
    return tuple((k, p) for k, p in D.cues if k not in kinds)


#: name -> the rules answered under (the default first).
VARIANTS: Dict[str, Any] = {
    "default": D,
    "cues: none (every question 'other')": replace(D, cues=(), name_nouns=()),
    "cues: no definition type": replace(D, cues=_cues_without(AnswerType.DEFINITION)),
    "cues: no how-to type": replace(D, cues=_cues_without(AnswerType.HOW_TO)),
    "cues: no opening 'when' rule": replace(D, cues=tuple((k, tuple(x for x in p if x != "^when")) for k, p in D.cues)),
    "name_nouns off": replace(D, name_nouns=()),
    "w_embed 0": replace(D, w_embed=0.0),
    "w_type 0": replace(D, w_type=0.0),
    "w_definition 0": replace(D, w_definition=0.0),
    "w_rank 0": replace(D, w_rank=0.0),
    "heading_penalty 0": replace(D, heading_penalty=0.0),
    "context_share 0": replace(D, context_share=0.0),
    "keep_share 0.5": replace(D, keep_share=0.5),
    "open_share = keep_share (0.6)": replace(D, open_share=0.6),
    "evidence_types none": replace(D, evidence_types=frozenset()),
    "evidence_types + who": replace(D, evidence_types=D.evidence_types | {AnswerType.WHO}),
    "who_single 1 (no full-name grading)": replace(D, who_single=1.0),
    "date_thirds off": replace(D, date_thirds=False),
    "factoid_types none (every type at open_share)": replace(D, factoid_types=frozenset()),
    "embed_chars 400 / embed_cjk_chars 128": replace(D, embed_chars=400, embed_cjk_chars=128),
    "embed_cap 8": replace(D, embed_cap=8),
}


class Memo(BaseEmbedding):
    """The wrapped model's vectors, each text embedded once for all variants."""

    _model: Any = PrivateAttr()
    _seen: Dict[Tuple[str, str], List[float]] = PrivateAttr(default_factory=dict)

    def __init__(self, model: BaseEmbedding) -> None:
        super().__init__(model_name="memo")
        self._model = model

    def _get(self, kind: str, text: str) -> List[float]:
        key = (kind, text)
        if key not in self._seen:
            fn = self._model.get_query_embedding if kind == "q" else self._model.get_text_embedding
            self._seen[key] = fn(text)
        return self._seen[key]

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._get("q", query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get("q", query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._get("t", text)


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {list(VARIANTS)}")
    parser.add_argument("--sets", default="rgb-en,rgb-zh,canard,real-files")
    args = parser.parse_args(argv or None)
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; accepted: {list(VARIANTS)}")
    model = LocalMiniLMEmbedding()
    memo = Memo(model)
    loaders = {"rgb-en": lambda: rgb("en_fact", 10**6),
               "rgb-zh": lambda: rgb("zh_fact", 10**6) + rgb("zh_refine", 60),
               "canard": lambda: canard(100), "real-files": lambda: real_files(10**6)}
    sets = args.sets.split(",")
    tops: Dict[str, List[Tuple[List[str], List[str]]]] = {}
    for name in sets:
        rows = []
        for question, gold, pool in loaders[name]():
            top = retrieve(model, question, pool, f"contain_{name}")
            golds = [norm(g) for g in gold]
            rows.append((question, golds, top) if any(g in norm(p) for p in top for g in golds) else None)
        tops[name] = rows
    print("| variant | " + " | ".join(f"{s} all (1st / 2nd)" for s in sets) + " |")
    print("|---|" + "---|" * len(sets), flush=True)
    for variant in names:
        synth = Extractive(memo, streaming=False, rules=VARIANTS[variant])
        cells = []
        t0 = time.perf_counter()
        for name in sets:
            rows = tops[name]
            hits = []
            for row in rows:
                if row is None:
                    hits.append(None)
                    continue
                question, golds, top = row
                nodes = [NodeWithScore(node=TextNode(text=t), score=1.0) for t in top]
                text = norm(synth.synthesize(question, nodes).response)
                hits.append(any(g in text for g in golds))
            half = len(hits) // 2
            parts = [[h for h in part if h is not None] for part in (hits, hits[:half], hits[half:])]
            cells.append(" / ".join(f"{sum(p)}/{len(p)}" for p in parts).replace(" / ", " (", 1) + ")")
        print(f"| {variant} | " + " | ".join(cells) + f" |  <!-- {time.perf_counter() - t0:.0f} s -->", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
