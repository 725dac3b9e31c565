"""What a real model answers through the chat engine, per answer setting, beside the extractive answer on the same
passages: Qwen2.5-Coder-0.5B-Instruct (``--model 1.5b``: the 1.5B) GGUF behind llama.cpp's OpenAI-compatible server,
greedy decoding.

Sets (the first ``--n`` questions each): RGB English (``en_fact``) and Chinese (``zh_fact``): a question's positive
and negative passages are its pool; and questions over Paul Graham's essay (:data:`ESSAY_QUESTIONS`, each gold answer
checked in the text), the essay cut into :data:`ESSAY_CHUNK` -token chunks as its pool. Each question's top
:data:`TOP_K` passages of its pool (``answer_containment.retrieve``: dense MiniLM cosine and term overlap fused) are
the same for every setting; each turn is one fresh conversation of ``ConvRAGChatEngine`` over those passages.

Settings (``--settings``): :data:`SETTINGS`, among them the citation prompt the package had before
(:data:`OLD_CITATION_QA_TMPL`, passed as ``text_qa_template``) to show what it made a small model answer,
``(core prompt)``, the default asking with core's QA prompt as it is (without the rule to answer in the query's
language), and tried alternatives: ``(zh prompt)``, core's QA prompt in Chinese (:data:`ZH_QA_TMPL`, for the
Chinese set), ``(evidence)``, the model reading only the extractive answer's best 5 sentences instead of the
passages, ``(evidence first)``, those sentences as one more passage before the passages, and ``(quote prompt)``,
core's QA system prompt asking for the answering sentence word for word (:data:`QUOTE_SYSTEM`); and ``(no echo
check)``, the default without replacing an answer that only restates the question (``AnswerFallback(echo=False)``).

Per set and setting: answers whose passages hold a gold answer; gold contained in the shown answer; exact match and
token F1 (``evaluation.answers``) against the gold, of the answer without its ``[n]`` markers; ``cited``: answers
shown with at least one ``[n]``; ``model [n] only``: answers the model gave that were empty, only citation markers,
or only the question restated (the engine recovered them: ``answer_source``); ``shown [n] only``: such answers shown
(the target is 0); ``retry`` / ``extractive``: how the recovered ones were answered; ``widened``: answers shown as their
passage writes them (``TurnRecord.answer_completion``) and how many held the gold before; sentences flagged unsupported
(``grounding``) per answer; seconds per turn (answer only; on a loaded 2-core machine).

    python -m llama_index_convrag.testing.real_llm setup       # once
    PYTHONPATH=. python bench/real_answers.py --n 5            # starts its own server (docs/results/answers.md)
    PYTHONPATH=. python bench/real_answers.py --base-url http://127.0.0.1:PORT/v1   # a running one
    PYTHONPATH=. python bench/real_answers.py --report bench/out/real_answers.jsonl  # the table of a saved run

With ``--report``, each setting is also set beside the extractive answer question by question (:func:`overlap`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, shared_data  # noqa: E402
from answer_containment import norm, retrieve, rgb  # noqa: E402

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate  # noqa: E402
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TEXT_QA_PROMPT_SEL  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine  # noqa: E402
from llama_index_convrag.chat.fallback import AnswerFallback  # noqa: E402
from llama_index_convrag.config import OpenAICompatible  # noqa: E402
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.evaluation.answers import exact_match, token_f1  # noqa: E402
from llama_index_convrag.synthesizers import Extractive, get_response_synthesizer  # noqa: E402
from llama_index_convrag.synthesizers.citations import has_answer_text, parse_markers, strip_markers  # noqa: E402
from llama_index_convrag.testing.real_llm import MODELS, locate, start_server, weights_of  # noqa: E402

TOP_K = 3
ESSAY_CHUNK = 256
MAX_TOKENS = 80
OLD_CITATION_QA_TMPL = (
    "Context information is below, as numbered sources.\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "Given the context information and not prior knowledge, answer the query. "
    "Cite the numbered sources you use with their numbers in square brackets, e.g. [1] or [2][3]; "
    "cite only sources that support the sentence.\n"
    "Query: {query_str}\n"
    "Answer: "
)
"""The package's citation QA template before it showed the marker inside a sentence (kept here to measure it)."""

ZH_QA_TMPL = (
    "上下文信息如下。\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "请只根据上下文信息（而不是先验知识）回答问题。\n"
    "问题：{query_str}\n"
    "回答："
)
"""Core's plain QA prompt in Chinese (the ``(zh prompt)`` setting: for the Chinese set)."""
_CORE_SYSTEM = (
    "You are an expert Q&A system that is trusted around the world.\n"
    "Always answer the query using the provided context information, and not prior knowledge.\n"
    "Some rules to follow:\n"
    "1. Never directly reference the given context in your answer.\n"
    "2. Avoid statements like 'Based on the context, ...' or 'The context information ...' or anything along those "
    "lines.\n"
)
_CORE_USER = (
    "Context information is below.\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Query: {query_str}\n"
    "Answer: "
)
QUOTE_SYSTEM = _CORE_SYSTEM + (
    "3. Answer with the sentence of the context that answers the query, copied word for word.\n"
)
"""Core's QA system prompt with a rule to quote the answering sentence (the ``(quote prompt)`` setting)."""
EVIDENCE_FIRST = "_evidence_first"
"""A setting keyword (not the engine's): the extractive answer's best N sentences come first, as one more passage,
before the passages (the ``(evidence first)`` setting)."""
EVIDENCE = "_evidence_sentences"
"""A setting keyword (not the engine's): the model reads only the extractive answer's best N sentences, not the
passages (the ``(evidence)`` setting)."""

#: name -> chat engine settings: ``AnswerOptions`` fields, ``chat_mode``, a ``text_qa_template`` (given to the
#: synthesizer, ``synthesizer=``) and the bench's own evidence keys (``None``: the extractive answer, no LLM).
SETTINGS: Dict[str, Optional[Dict[str, Any]]] = {
    "compact+cite (old prompt)": {"response_mode": "compact", "citations": True,
                                  "text_qa_template": PromptTemplate(OLD_CITATION_QA_TMPL)},
    "compact+cite": {"response_mode": "compact", "citations": True, "citation_mode": "inline"},
    "compact+aligned": {"response_mode": "compact", "citations": True, "citation_mode": "aligned"},
    "compact": {"response_mode": "compact", "citations": False},
    "refine+cite": {"response_mode": "refine", "citations": True, "citation_mode": "inline"},
    "tree_summarize+cite": {"response_mode": "tree_summarize", "citations": True, "citation_mode": "inline"},
    "condense_plus_context+cite": {"chat_mode": "condense_plus_context", "citations": True,
                                   "citation_mode": "inline"},
    "refine+aligned": {"response_mode": "refine", "citations": True, "citation_mode": "aligned"},
    "condense_plus_context+aligned": {"chat_mode": "condense_plus_context", "citations": True,
                                      "citation_mode": "aligned"},
    "compact+aligned (zh prompt)": {"response_mode": "compact", "citations": True, "citation_mode": "aligned",
                                    "text_qa_template": PromptTemplate(ZH_QA_TMPL)},
    "compact+aligned (evidence)": {"response_mode": "compact", "citations": True, "citation_mode": "aligned",
                                   EVIDENCE: 5},
    "compact+aligned (evidence first)": {"response_mode": "compact", "citations": True, "citation_mode": "aligned",
                                         EVIDENCE_FIRST: 3},
    "compact+aligned (no echo check)": {"response_mode": "compact", "citations": True, "citation_mode": "aligned",
                                        "answer_fallback": False},
    "compact+aligned (quote prompt)": {"response_mode": "compact", "citations": True, "citation_mode": "aligned",
                                 "text_qa_template": ChatPromptTemplate(message_templates=[
                                     ChatMessage(role=MessageRole.SYSTEM, content=QUOTE_SYSTEM),
                                     ChatMessage(role=MessageRole.USER, content=_CORE_USER)])},
    "compact+aligned (core prompt)": {"response_mode": "compact", "citations": True, "citation_mode": "aligned",
                                      "text_qa_template": DEFAULT_TEXT_QA_PROMPT_SEL},
    "extractive": None,
}
DEFAULT_SETTINGS = "compact+cite,compact+aligned,compact,extractive"

#: (question, gold answer) over the essay; each gold string occurs in the essay.
ESSAY_QUESTIONS: Tuple[Tuple[str, str], ...] = (
    ("What was the first computer Paul Graham wrote programs on?", "IBM 1401"),
    ("What programming language did Paul Graham use on the IBM 1401?", "Fortran"),
    ("Which microcomputer did Paul Graham's father buy him?", "TRS-80"),
    ("What did Paul Graham plan to study when he went to college?", "philosophy"),
    ("Which company making software for creating documents did Paul Graham work for?", "Interleaf"),
    ("What was the company Paul Graham started with Robert Morris to build online stores?", "Viaweb"),
    ("Which company bought Viaweb?", "Yahoo"),
    ("How much seed funding did Viaweb get from Julian?", "$10,000"),
    ("Which art school in Providence did Paul Graham attend?", "RISD"),
    ("Who became the second president of YC?", "Sam Altman"),
    ("What was Y Combinator's first summer program called?", "Summer Founders Program"),
    ("What did Paul Graham write in Arc to test the new version?", "Hacker News"),
    ("Whom did Robert recommend as another programmer for Viaweb?", "Trevor Blackwell"),
    ("In which city is the Accademia that Paul Graham went to?", "Florence"),
    ("What new Lisp dialect did Paul Graham write after leaving YC?", "Bel"),
)

Item = Tuple[str, List[str], List[str]]  # question, gold answers, passage pool


class Passages(BaseRetriever):
    """The same passages for every query (this question's top passages)."""

    def __init__(self, texts: Sequence[str]) -> None:
        super().__init__()
        self.nodes = [NodeWithScore(node=TextNode(text=t, id_=f"p{i}"), score=1.0 - i / 100)
                      for i, t in enumerate(texts)]

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return list(self.nodes)


def essay_items(n: int) -> List[Item]:
    from llama_index.core.node_parser import SentenceSplitter

    text = (shared_data() / "paul_graham" / "paul_graham_essay.txt").read_text(encoding="utf-8")
    flat = norm(text)
    missing = [a for _, a in ESSAY_QUESTIONS if norm(a) not in flat]
    if missing:
        raise SystemExit(f"gold answers not in the essay: {missing}")
    pool = SentenceSplitter(chunk_size=ESSAY_CHUNK, chunk_overlap=20).split_text(text)
    return [(q, [a], pool) for q, a in ESSAY_QUESTIONS[:n]]


def answerer(name: str, kwargs: Optional[Dict[str, Any]], llm: Any, embed: Any) -> Callable[[str, List[str]], Any]:
    """A function ``(question, passages) -> turn record`` for one setting."""
    def answer(question: str, passages: List[str]) -> Any:
        kw = dict(kwargs) if kwargs is not None else {"response_mode": "extractive"}
        evidence = kw.pop(EVIDENCE, None)
        if evidence is not None:
            passages = evidence_of(question, passages, Extractive(embed, max_sentences=evidence))
        first = kw.pop(EVIDENCE_FIRST, None)
        if first is not None:
            found = evidence_of(question, passages, Extractive(embed, max_sentences=first))
            passages = [" ".join(found), *passages] if found != passages else passages
        echo = kw.pop("answer_fallback", True)  # False: the setting without the echo check
        fallback = AnswerFallback(echo=echo, extractive=Extractive(embed))
        chat_mode = kw.pop("chat_mode", "condense_question")
        template = kw.pop("text_qa_template", None)
        if template is not None:  # a prompt of the synthesizer's own: synthesizer=
            synthesizer = get_response_synthesizer(llm=llm, text_qa_template=template, **kw)
            engine = ConvRAGChatEngine.from_defaults(Passages(passages), llm, synthesizer=synthesizer,
                                                     answer=AnswerOptions(fallback=fallback))
        else:
            engine = ConvRAGChatEngine.from_defaults(
                Passages(passages), llm if kwargs is not None else None, chat_mode=chat_mode,
                answer=AnswerOptions(fallback=fallback, embed_model=embed if kwargs is None else None, **kw))
        return engine.chat(question).metadata["turn"]
    return answer


_GROUP = re.compile(r"(.*?) \[(\d+)\](?: |$)", re.S)


def evidence_of(question: str, passages: List[str], extractive: Extractive) -> List[str]:
    """The extractive answer's sentences over ``passages``, one text per passage they come from (its ``[n]`` runs)."""
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"p{i}"), score=1.0 - i / 100) for i, t in enumerate(passages)]
    runs = [text for text, _ in _GROUP.findall(str(extractive.synthesize(question, nodes)))]
    return runs or passages


def answer_row(name: str, number: int, item: Item, embed: Any, label: str, answer: Callable) -> Dict[str, Any]:
    question, golds, pool = item
    top = retrieve(embed, question, pool, f"real_answers_{name}")[:TOP_K]
    t0 = time.perf_counter()
    record = answer(question, top)
    seconds = time.perf_counter() - t0
    text = record.answer
    widened = record.answer_completion
    before = text if widened is None else text.replace(widened["shown"], widened["answer"], 1)
    return {"set": name, "number": number, "question": question, "gold": golds, "setting": label,
            "held": any(norm(g) in norm(p) for p in top for g in golds), "answer": text,
            "answer_source": record.answer_source, "contained": any(norm(g) in norm(text) for g in golds),
            "shown_marker_only": not has_answer_text(text), "widened": widened,
            "contained_unwidened": any(norm(g) in norm(before) for g in golds),
            "unsupported": len((record.grounding or {}).get("unsupported", [])), "seconds": seconds}


def run(sets: Dict[str, List[Item]], embed: Any, answerers: Dict[str, Callable], log: Any,
        first: int = 1) -> List[Dict[str, Any]]:
    """Question k of every set before question k + 1 of any (a run cut short still covers every set); ``first`` is
    the number of each set's first question (rows carry theirs)."""
    rows = []
    for k in range(max(len(items) for items in sets.values())):
        for name, items in sets.items():
            if k >= len(items):
                continue
            for label, answer in answerers.items():
                row = answer_row(name, first + k, items[k], embed, label, answer)
                rows.append(row)
                log.write(json.dumps(row, ensure_ascii=False) + "\n")
                log.flush()
                print(f"  [{name} {k + 1}/{len(items)}] {label}: {row['seconds']:.1f} s, {row['answer_source']}, "
                      f"contained={row['contained']}: {row['answer'][:100]!r}", flush=True)
    return rows


def scores(row: Dict[str, Any]) -> Tuple[float, float]:
    """Exact match and token F1 of a row's answer against its gold, its ``[n]`` markers left out (pure)."""
    text = strip_markers(row["answer"])
    return exact_match(text, row["gold"]), token_f1(text, row["gold"])


def table(rows: List[Dict[str, Any]], settings: Sequence[str]) -> List[str]:
    out = ["| set | setting | answers (passages hold gold) | gold contained | EM | F1 | cited | model [n] only | "
           "shown [n] only | retry / extractive | widened (gold contained before) | unsupported per answer | s per turn |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in [*dict.fromkeys(r["set"] for r in rows), "all"]:
        for label in settings:
            mine = [r for r in rows if name in (r["set"], "all") and r["setting"] == label]
            held = [r for r in mine if r["held"]]
            if not mine:
                continue
            recovered = [r for r in mine if r["answer_source"] in ("llm_retry_without_citations", "extractive_fallback")]
            retry = sum(r["answer_source"] == "llm_retry_without_citations" for r in mine)
            contained = sum(r["contained"] for r in held)
            if all("widened" in r for r in mine):  # rows of runs before answers were widened have neither
                unwidened = sum(r["contained_unwidened"] for r in held)
                widened = f"{sum(r['widened'] is not None for r in mine)} ({unwidened}/{len(held)})"
            else:
                widened = "-"
            out.append(
                f"| {name} | {label} | {len(mine)} ({len(held)}) | {contained}/{len(held)} = "
                f"{contained / len(held) if held else 0:.0%} | "
                f"{sum(scores(r)[0] for r in held) / max(1, len(held)):.2f} | "
                f"{sum(scores(r)[1] for r in held) / max(1, len(held)):.2f} | "
                f"{sum(bool(parse_markers(r['answer'])) for r in mine)} | {len(recovered)} | "
                f"{sum(r['shown_marker_only'] for r in mine)} | {retry} / {len(recovered) - retry} | {widened} | "
                f"{sum(r['unsupported'] for r in mine) / len(mine):.2f} | "
                f"{sum(r['seconds'] for r in mine) / len(mine):.1f} |")
    return out


def overlap(rows: List[Dict[str, Any]], setting: str, other: str = "extractive") -> List[str]:
    """Per set, over the questions whose passages hold a gold answer and that both settings answered: how many
    answers of each hold it, of both, of only one, of neither. ``setting`` or ``other`` alone plus the questions only
    the other gets right is the most any per-question choice between the two answers could reach."""
    out = [f"| set | questions | {setting} | {other} | both | {setting} only | {other} only | neither |",
           "|---|---|---|---|---|---|---|---|"]
    pairs: Dict[str, List[Tuple[bool, bool]]] = {}
    by_question: Dict[Tuple[str, str], Dict[str, Dict[str, Any]]] = {}
    for r in rows:
        by_question.setdefault((r["set"], r["question"]), {})[r["setting"]] = r
    for (name, _), found in by_question.items():
        if setting in found and other in found and found[setting]["held"]:
            pair = (found[setting]["contained"], found[other]["contained"])
            pairs.setdefault(name, []).append(pair)
            pairs.setdefault("all", []).append(pair)
    for name in [*(n for n in pairs if n != "all"), "all"] if pairs else []:
        got = pairs[name]
        out.append(f"| {name} | {len(got)} | {sum(a for a, _ in got)} | {sum(b for _, b in got)} | "
                   f"{sum(a and b for a, b in got)} | {sum(a and not b for a, b in got)} | "
                   f"{sum(b and not a for a, b in got)} | {sum(not a and not b for a, b in got)} |")
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=15, help="questions per set")
    parser.add_argument("--skip", type=int, default=0, help="questions skipped per set (a run of questions "
                        "--skip+1 .. --n, to extend an earlier run; --report takes several files)")
    parser.add_argument("--sets", default="rgb-en,rgb-zh,essay")
    parser.add_argument("--settings", default=DEFAULT_SETTINGS, help=f"comma-separated, of {list(SETTINGS)}")
    parser.add_argument("--base-url", default=None, help="a running llama.cpp server (else one is started)")
    parser.add_argument("--n-threads", type=int, default=2)
    parser.add_argument("--model", default="0.5b", choices=list(MODELS),
                        help="the tier's model (set up with `real_llm setup --model M`)")
    parser.add_argument("--report", type=Path, nargs="+", default=None,
                        help="print the table of saved runs' JSON lines")
    parser.add_argument("--out", type=Path, default=OUT / "real_answers.jsonl", help="where the run's JSON lines go")
    args = parser.parse_args(argv)
    settings = args.settings.split(",")
    if args.report is not None:
        rows = [json.loads(line) for path in args.report for line in path.open(encoding="utf-8")]
        print("\n".join(table(rows, [s for s in SETTINGS if any(r["setting"] == s for r in rows)])))
        if any(r["setting"] == "extractive" for r in rows):
            for setting in [s for s in SETTINGS if s != "extractive" and any(r["setting"] == s for r in rows)]:
                print("\n" + "\n".join(overlap(rows, setting)))
        return 0
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown settings {unknown}; accepted: {list(SETTINGS)}")
    server = None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.base_url is None:
        server = start_server(locate(model=args.model), n_threads=args.n_threads,
                              log_path=args.out.with_suffix(".server.log"))
        client = server.client_kwargs(max_tokens=MAX_TOKENS)
    else:
        client = {"model": weights_of(args.model).alias, "api_base": args.base_url, "api_key": "not-needed",
                  "context_window": 4096, "max_tokens": MAX_TOKENS, "temperature": 0.0, "timeout": 600.0,
                  "max_retries": 0}
    try:
        llm = OpenAICompatible(**client)
        embed = LocalMiniLMEmbedding()
        answerers = {s: answerer(s, SETTINGS[s], llm, embed) for s in settings}
        loaders = {"rgb-en": lambda: rgb("en_fact", args.n), "rgb-zh": lambda: rgb("zh_fact", args.n),
                   "essay": lambda: essay_items(args.n)}
        sets = {name: loaders[name]()[args.skip:] for name in args.sets.split(",")}
        with open(args.out, "w", encoding="utf-8") as log:
            rows = run(sets, embed, answerers, log, first=args.skip + 1)
    finally:
        if server is not None:
            server.stop()
    print(f"({weights_of(args.model).gguf_name}, llama.cpp, greedy, max {MAX_TOKENS} tokens; "
          f"top {TOP_K} passages; seconds from a loaded 2-core machine)")
    print("\n".join(table(rows, settings)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
