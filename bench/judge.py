"""Judge-guided recursive retrieval vs plain retrieve-then-synthesize, side by side in one run.

Per arm and data set: LLM calls, prompt tokens (tiktoken, counted over every prompt: judge, sub-answers, final
synthesis), wall time per question, retrieved-evidence recall (relevant documents among the chunks that reach the
answer: the top-k for plain RAG; every kept chunk of the tree for the judge) and, on RGB, answer EM / token F1
(``llama_index_convrag.evaluation``; character-level for Chinese).

Judges:
* ``oracle`` (default): grades from the gold data, so it shows what the tree search can reach when grading is
  perfect. SciFact train (qrels): a relevant abstract -> 2; a non-relevant one whose embedding is close to a relevant
  abstract (cosine >= ``--related``) -> 1 with the follow-up "<claim> <its title>"; else 0. RGB: a passage holding the
  gold answer (all parts for ``zh_int``) -> 2; holding the counterfactual answer -> 0; some ``zh_int`` parts -> 1
  with the follow-up "<question> <its first sentence>"; else 0. Oracle grades cost no model time: their LLM calls
  and tokens are what an LLM judge would be sent (the real judge prompt, formatted), their wall time is only the
  search machinery and the extra retrievals.
* ``--llm-base-url URL [--llm-model NAME]``: any OpenAI-compatible server (e.g. the llama.cpp Qwen2.5-0.5B of the
  real-LLM tier: ``python -m llama_index_convrag.testing.real_llm serve`` prints its URL) judges and answers, greedy
  and at most ``--llm-max-tokens`` per call, on ``--real-n`` questions per data set.

Answerer without a real LLM: a deterministic candidate vote (it knows the gold and the counterfactual answer of the
question and answers with whichever occurs more often in the context it is given; for ``zh_int`` the parts that
occur). It measures whether the evidence handed to synthesis favours the right answer, not how a model reads.

Retrieval: dense (the local MiniLM, query cache off, warmed up) over cached embeddings in numpy, per question pool for RGB (positive,
counterfactual and noise passages), the whole corpus for SciFact; k = ``--k``.

Run: ``PYTHONPATH=. python bench/judge.py [--n 100] [--rgb-n 30] [--k 5]``
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.query_engine.retriever_query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, cached_embeddings, load_scifact, shared_data  # noqa: E402

from llama_index_convrag.config import OpenAICompatible  # noqa: E402
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.evaluation import evaluate_answers  # noqa: E402
from llama_index_convrag.judge import (  # noqa: E402
    BaseJudge,
    JudgeQueryEngine,
    JudgeSynthesizer,
    LLMJudge,
    SearchLimits,
    TreeSearch,
    Verdict,
)
from llama_index_convrag.synthesizers import get_response_synthesizer  # noqa: E402
from llama_index_convrag.testing import ScriptedLLM  # noqa: E402

log = logging.getLogger("bench.judge")
SEED = 13


class DenseRetriever(BaseRetriever):
    """Top-k by dot product over pre-computed (normalised) embeddings."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], matrix: np.ndarray, model: Any, k: int) -> None:
        super().__init__()
        self.ids, self.texts, self.matrix, self.model, self.k = list(ids), list(texts), matrix, model, k

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        query = np.asarray(self.model.get_query_embedding(query_bundle.query_str), dtype=np.float32)
        scores = self.matrix @ query
        top = np.argsort(-scores)[: self.k]
        return [NodeWithScore(node=TextNode(id_=self.ids[i], text=self.texts[i]), score=float(scores[i])) for i in top]


# oracle judges ---------------------------------------------------------------------------------------------------
class OracleJudge(BaseJudge):
    """Grades with ``rule(root_question, chunk_text) -> (grade, follow_up)``; remembers which root each follow-up
    serves so sub-questions are graded against the same gold."""

    def __init__(self, rule: Callable[[str, str], Tuple[int, Optional[str]]]) -> None:
        super().__init__()
        self.rule = rule
        self.root_of: Dict[str, str] = {}

    def _grade(self, question: str, chunk: str) -> Verdict:
        root = self.root_of.get(question, question)
        grade, follow_up = self.rule(root, chunk)
        if follow_up is not None:
            self.root_of[follow_up] = root
        return Verdict(grade=grade, reason="oracle", follow_up=follow_up)


def first_sentence(text: str, limit: int = 80) -> str:
    return re.split(r"(?<=[.!?。！？])\s*|\n", text.strip(), maxsplit=1)[0][:limit]


# arms --------------------------------------------------------------------------------------------------------------
def final_synth(llm: Any) -> Any:
    return get_response_synthesizer(llm=llm, response_mode="compact")


def run_arm(engine: Any, questions: List[Tuple[str, str]]) -> Dict[str, Any]:
    """Query every question; per qid: answer, evidence doc ids, calls, tokens, seconds, tree outcome."""
    out: Dict[str, Any] = {}
    for qid, text in questions:
        t0 = time.perf_counter()
        response = engine.query(text)
        seconds = time.perf_counter() - t0
        meta = response.metadata or {}
        tree = meta.get("judge_tree")
        calls, tokens = int(meta.get("llm_calls", 0)), int(meta.get("prompt_tokens", 0))
        if tree is not None:
            stats = tree.stats
            calls += stats.llm_calls
            tokens += stats.judge_prompt_tokens + stats.answer_prompt_tokens
            evidence = tree.evidence_doc_ids()
        else:
            evidence = list(dict.fromkeys(n.node.node_id for n in response.source_nodes))
        graded = [] if tree is None else [c for c in tree.chunks() if c.grade is not None]
        out[qid] = {"answer": str(response.response), "evidence": evidence, "calls": calls, "tokens": tokens,
                    "seconds": seconds, "recursed": bool(tree is not None and tree.stats.sub_questions),
                    "grades": [c.grade for c in graded], "malformed": sum(c.error is not None for c in graded)}
    return out


def summarise(per_q: Dict[str, Any], rels: Dict[str, Set[str]]) -> Dict[str, float]:
    n = len(per_q)
    recall = [len(rels[q] & set(r["evidence"])) / len(rels[q]) for q, r in per_q.items() if rels.get(q)]
    return {
        "questions": n,
        "llm_calls": sum(r["calls"] for r in per_q.values()) / n,
        "prompt_tokens": sum(r["tokens"] for r in per_q.values()) / n,
        "ms_per_question": 1000 * sum(r["seconds"] for r in per_q.values()) / n,
        "evidence_recall": sum(recall) / len(recall) if recall else float("nan"),
        "evidence_size": sum(len(r["evidence"]) for r in per_q.values()) / n,
        "recursed_share": sum(r["recursed"] for r in per_q.values()) / n,
        "grades": [sum(g == grade for r in per_q.values() for g in r["grades"]) for grade in (0, 1, 2)],
        "malformed": sum(r["malformed"] for r in per_q.values()),
    }


def engines(retriever: BaseRetriever, judge: BaseJudge, llm: Any, limits: SearchLimits) -> Dict[str, Any]:
    search = TreeSearch(retriever=retriever, judge=judge, answerer=final_synth(llm), limits=limits)
    judged = JudgeQueryEngine(retriever=retriever,
                              response_synthesizer=JudgeSynthesizer(search=search, synthesizer=final_synth(llm)))
    return {"plain": RetrieverQueryEngine(retriever=retriever, response_synthesizer=final_synth(llm)),
            "judge": judged}


# SciFact -----------------------------------------------------------------------------------------------------------
def scifact(args: argparse.Namespace, model: Any, real_llm: Any) -> List[Dict[str, Any]]:
    ids, texts, queries, qrels = load_scifact()
    corpus = cached_embeddings(model, texts, "scifact_corpus")
    row_of = {d: i for i, d in enumerate(ids)}
    id_of_text = {t: d for d, t in zip(ids, texts)}
    rng = random.Random(SEED)
    n = args.real_n if real_llm is not None else args.n
    qids = sorted(rng.sample(sorted(queries), min(n, len(queries))), key=int)
    rels = {q: {d for d, r in qrels[q].items() if r > 0} for q in qids}
    root_rels = {queries[q]: rels[q] for q in qids}

    def rule(root: str, chunk: str) -> Tuple[int, Optional[str]]:
        doc = id_of_text.get(chunk)
        gold = root_rels[root]
        if doc in gold:
            return 2, None
        gold_rows = [row_of[d] for d in gold if d in row_of]
        if doc is not None and gold_rows and float((corpus[gold_rows] @ corpus[row_of[doc]]).max()) >= args.related:
            return 1, f"{root} {first_sentence(chunk)}"
        return 0, None

    retriever = DenseRetriever(ids, texts, corpus, model, args.k)
    llm = real_llm if real_llm is not None else ScriptedLLM.fixed("An answer.", context_window=4096, num_output=256)
    judge = LLMJudge(real_llm) if real_llm is not None else OracleJudge(rule)
    rows = []
    for arm, engine in engines(retriever, judge, llm, limits_of(args)).items():
        per_q = run_arm(engine, [(q, queries[q]) for q in qids])
        rows.append({"data": "scifact-train", "arm": arm, "judge": judge_name(real_llm), **summarise(per_q, rels)})
        log.info("%s", rows[-1])
    return rows


# RGB ---------------------------------------------------------------------------------------------------------------
def _aliases(part: Any) -> List[str]:
    return [str(a) for a in part] if isinstance(part, list) else [str(part)]


def load_rgb(name: str, n: int) -> List[Dict[str, Any]]:
    rows = [json.loads(line) for line in open(shared_data() / "rgb" / f"{name}.json", encoding="utf-8")]
    out = []
    for row in rows[:n]:
        positives = [p for group in row["positive"] for p in (group if isinstance(group, list) else [group])]
        wrong = list(row.get("positive_wrong", []))
        passages = list(dict.fromkeys(positives + wrong + list(row["negative"])))
        if name == "zh_int":
            parts = [_aliases(p) for p in row["answer"]]
            fake: List[str] = []
        else:
            parts = [_aliases(row["answer"])]
            fake = _aliases(row["fakeanswer"])
        gold_ids = {f"{row['id']}:{i}" for i, p in enumerate(passages) if any(a in p for part in parts for a in part)
                    and not any(f in p for f in fake)}
        out.append({"qid": str(row["id"]), "query": row["query"], "passages": passages, "parts": parts,
                    "fake": fake, "gold_ids": gold_ids})
    return out


def rgb_rule(row: Dict[str, Any]) -> Callable[[str, str], Tuple[int, Optional[str]]]:
    def rule(root: str, chunk: str) -> Tuple[int, Optional[str]]:
        if any(f in chunk for f in row["fake"]):
            return 0, None
        found = sum(any(a in chunk for a in part) for part in row["parts"])
        if found == len(row["parts"]):
            return 2, None
        if found > 0:
            return 1, f"{root} {first_sentence(chunk)}"
        return 0, None

    return rule


def vote_answer(row: Dict[str, Any], context: str) -> str:
    """Deterministic answerer: the parts found in the context (zh_int), or the more frequent of gold vs fake."""
    if not row["fake"]:
        found = [next(a for a in part if a in context) for part in row["parts"] if any(a in context for a in part)]
        return " ".join(found) if found else "insufficient information"
    gold = max(row["parts"][0], key=context.count)
    fake = max(row["fake"], key=context.count)
    g, f = context.count(gold), context.count(fake)
    if g == f == 0:
        return "insufficient information"
    return gold if g > f or (g == f and context.find(gold) < context.find(fake)) else fake


def rgb(args: argparse.Namespace, name: str, model: Any, real_llm: Any) -> List[Dict[str, Any]]:
    rows = load_rgb(name, args.real_n if real_llm is not None else args.rgb_n)
    per_arm: Dict[str, Dict[str, Any]] = {"plain": {}, "judge": {}}
    for row in rows:
        ids = [f"{row['qid']}:{i}" for i in range(len(row["passages"]))]
        matrix = cached_embeddings(model, row["passages"], f"rgb_{name}_{row['qid']}")
        retriever = DenseRetriever(ids, row["passages"], matrix, model, args.k)
        if real_llm is not None:
            llm, judge = real_llm, LLMJudge(real_llm)
        else:
            llm = ScriptedLLM.from_fn(lambda prompt, row=row: vote_answer(row, prompt), context_window=4096,
                                      num_output=256)
            judge = OracleJudge(rgb_rule(row))
        for arm, engine in engines(retriever, judge, llm, limits_of(args)).items():
            per_arm[arm].update(run_arm(engine, [(row["qid"], row["query"])]))
    golds = {r["qid"]: " ".join(p[0] for p in r["parts"]) if not r["fake"] else r["parts"][0] for r in rows}
    rels = {r["qid"]: r["gold_ids"] for r in rows}
    out = []
    for arm, per_q in per_arm.items():
        metrics = evaluate_answers({q: r["answer"] for q, r in per_q.items()}, golds).means
        out.append({"data": f"rgb-{name}", "arm": arm, "judge": judge_name(real_llm), **summarise(per_q, rels),
                    "em": metrics["exact_match"], "f1": metrics["f1"]})
        log.info("%s", out[-1])
    return out


# main --------------------------------------------------------------------------------------------------------------
def limits_of(args: argparse.Namespace) -> SearchLimits:
    return SearchLimits(max_depth=args.max_depth, max_branching=args.max_branching, max_llm_calls=args.max_llm_calls)


def judge_name(real_llm: Any) -> str:
    return "oracle" if real_llm is None else f"llm:{real_llm.metadata.model_name}"


def table(rows: List[Dict[str, Any]]) -> str:
    head = ("| data | arm | judge | n | LLM calls | prompt tokens | ms/question | evidence recall | evidence size | "
            "recursed | grades 0/1/2 (malformed) | EM | F1 |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        em = f"{r['em']:.3f}" if "em" in r else "-"
        f1 = f"{r['f1']:.3f}" if "f1" in r else "-"
        grades = "/".join(map(str, r["grades"])) + f" ({r['malformed']})" if r["arm"] == "judge" else "-"
        lines.append(f"| {r['data']} | {r['arm']} | {r['judge']} | {r['questions']} | {r['llm_calls']:.2f} | "
                     f"{r['prompt_tokens']:.0f} | {r['ms_per_question']:.1f} | {r['evidence_recall']:.3f} | "
                     f"{r['evidence_size']:.2f} | {r['recursed_share']:.2f} | {grades} | {em} | {f1} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100, help="SciFact train claims (seeded sample)")
    parser.add_argument("--rgb-n", type=int, default=30, help="RGB questions per set (the first ones)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--related", type=float, default=0.6, help="oracle: cosine to a relevant abstract for 1")
    parser.add_argument("--max-depth", type=int, default=2)
    parser.add_argument("--max-branching", type=int, default=2)
    parser.add_argument("--max-llm-calls", type=int, default=30)
    parser.add_argument("--sets", default="scifact,zh_int,en_fact,zh_fact")
    parser.add_argument("--llm-base-url", default=None, help="an OpenAI-compatible server: judge + answer with it")
    parser.add_argument("--llm-model", default="qwen2.5-0.5b-instruct")
    parser.add_argument("--real-n", type=int, default=5, help="questions per set with --llm-base-url")
    parser.add_argument("--llm-context", type=int, default=4096, help="the server's context window")
    parser.add_argument("--llm-max-tokens", type=int, default=256, help="output tokens per call (greedy decoding)")
    parser.add_argument("--out", default=str(OUT / "judge.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    model = LocalMiniLMEmbedding(query_cache_size=0)  # no query cache: the second arm must not ride on the first
    model.get_query_embedding("warm up")
    real_llm = None if args.llm_base_url is None else OpenAICompatible(  # greedy, bounded: reproducible rows
        model=args.llm_model, api_base=args.llm_base_url, api_key="not-needed", context_window=args.llm_context,
        max_tokens=args.llm_max_tokens, temperature=0.0, timeout=600.0, max_retries=0)
    rows: List[Dict[str, Any]] = []
    for name in args.sets.split(","):
        rows += scifact(args, model, real_llm) if name == "scifact" else rgb(args, name, model, real_llm)
    print(table(rows))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
