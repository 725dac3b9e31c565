"""Answer containment of extractive answers: is the gold answer string inside the printed answer?

For each question the passages of its set are ranked (dense MiniLM cosine fused with term overlap, reciprocal rank
fusion, in memory), the top 5 go to the extractive synthesizer, and a turn counts where one of those 5 passages
holds the gold answer. Printed per set and for the first / second half of its questions: turns counted, containment
of the old answer (the 3 sentences most similar to the question by embedding, every sentence embedded) and of the
current :class:`~llama_index_convrag.synthesizers.Extractive`, ms per turn and the answer's mean length in characters
of each (a longer answer contains more by chance: read the two together).

Sets: RGB English (``en_fact``: question, answer, positive + negative passages), RGB Chinese (``zh_fact`` and the
first ``--zh-refine`` questions of ``zh_refine``), CANARD (each dialogue's one-sentence answers, three to a passage,
pooled with four neighbouring dialogues; the human rewrite is the question; answers that say "I don't know" are
not counted: :data:`NON_ANSWERS`), and real files: man pages on this
machine rendered with ``man | col -bx``, chunked as ingestion chunks, with questions whose answers were checked by
hand (:data:`REAL_FILES`).

    python bench/answer_containment.py            # all sets
    python bench/answer_containment.py --quick    # 40 questions a set

``--passages`` measures the passages the answerer reads instead of the answer (see :func:`passages_main`): the
former 700-token chunks, window-sized chunks, window-sized chunks widened to their neighbours, and the default: the
first 5 passages of the top 10 window-sized chunks widened (hits merged into another's passage leave their place to
the next), ingested and retrieved through the package (real MiniLM, real Milvus Lite, the default hybrid retriever).

    PYTHONPATH=. python bench/answer_containment.py --passages [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, cached_embeddings, shared_data  # noqa: E402

from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.synthesizers import Extractive  # noqa: E402
from llama_index_convrag.synthesizers import sentences as S  # noqa: E402

TOP_K = 5
#: (man page, question, answer string the extractive answer must contain); each answer checked by hand in the page.
REAL_FILES: Tuple[Tuple[str, str, str], ...] = (
    ("ls", "How do I list hidden files with ls?", "--all"),
    ("ls", "Who wrote ls?", "Richard M. Stallman"),
    ("grep", "How do I make grep ignore case?", "--ignore-case"),
    ("gzip", "How do I keep the input files when compressing with gzip?", "--keep"),
    ("cp", "How do I copy directories recursively with cp?", "--recursive"),
    ("df", "How can df print the file system type?", "--print-type"),
    ("du", "How do I print sizes in human readable format with du?", "--human-readable"),
    ("chmod", "How do I change the mode of files and directories recursively with chmod?", "--recursive"),
    ("head", "How do I print the first NUM lines with head?", "--lines"),
    ("find", "Which find test matches the base of the file name?", "-name pattern"),
    ("tar", "How do I extract files from an archive with tar?", "--extract"),
    ("wc", "How do I print the newline counts with wc?", "--lines"),
    ("sort", "How do I sort by string numerical value?", "--numeric-sort"),
    ("tail", "How do I output appended data as the file grows with tail?", "--follow"),
    ("ssh", "Which ssh option sets the port to connect to on the remote host?", "-p port"),
    ("rm", "How do I remove directories and their contents recursively?", "--recursive"),
    ("sort", "Who wrote sort?", "Mike Haertel"),
    ("tar", "Which tar option filters the archive through gzip?", "--gzip"),
)

Item = Tuple[str, List[str], List[str]]  # question, gold answers (any), passage pool


def norm(text: str) -> str:
    return " ".join(text.replace("\u2010", "-").split()).lower()


def rgb(name: str, limit: int) -> List[Item]:
    rows = [json.loads(line) for line in (shared_data() / "rgb" / f"{name}.json").open(encoding="utf-8")][:limit]
    out = []
    for r in rows:
        gold = r["answer"] if isinstance(r["answer"], list) else [r["answer"]]
        gold = [g for x in gold for g in (x if isinstance(x, list) else [x])]
        out.append((r["query"], gold, list(r["positive"]) + list(r["negative"])))
    return out


#: CANARD answers that say the passage does not answer (QuAC's ``CANNOTANSWER`` and the "I don't know." its
#: annotators also typed): no question with one of these as its gold is counted.
NON_ANSWERS = frozenset({"cannotanswer", "i don't know.", "i don't know"})


def answers_it(answer: str) -> bool:
    return bool(answer) and norm(answer) not in NON_ANSWERS


def canard(limit: int) -> List[Item]:
    dialogues = [json.loads(line) for line in (shared_data() / "canard" / "dialogues_dev.jsonl").open(encoding="utf-8")]
    passages_of = []
    for d in dialogues:
        answers = [t["answer"] for t in d["turns"] if t["answer"] and t["answer"] != "CANNOTANSWER"]
        passages_of.append([" ".join(answers[i : i + 3]) for i in range(0, len(answers), 3)])
    out: List[Item] = []
    for n, d in enumerate(dialogues):
        pool = [p for m in range(max(0, n - 2), min(len(dialogues), n + 3)) for p in passages_of[m]]
        for t in d["turns"]:
            if answers_it(t["answer"]) and len(S.split_sentences(t["answer"])) == 1:
                out.append((t["rewrite"], [t["answer"]], pool))
        if len(out) >= limit:
            break
    return out[:limit]


def real_files(limit: int) -> List[Item]:
    from llama_index.core.node_parser import SentenceSplitter

    from llama_index_convrag.ingest.pipeline import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE

    splitter = SentenceSplitter(chunk_size=DEFAULT_CHUNK_SIZE, chunk_overlap=DEFAULT_CHUNK_OVERLAP)
    pool: List[str] = []
    for page in sorted({p for p, _, _ in REAL_FILES}):
        text = subprocess.run(f"MANWIDTH=80 man {page} | col -bx", shell=True, capture_output=True, text=True).stdout
        pool.extend(splitter.split_text(text))
    return [(q, [a], pool) for _, q, a in REAL_FILES][:limit]


def retrieve(model: LocalMiniLMEmbedding, question: str, pool: Sequence[str], tag: str) -> List[str]:
    """Top ``TOP_K`` of ``pool``: reciprocal rank fusion of dense cosine and question-term overlap."""
    vectors = cached_embeddings(model, list(pool), tag)
    q = np.asarray(model.get_query_embedding(question), dtype=np.float32)
    dense = np.argsort(-(vectors @ q), kind="stable")
    terms = S.question_of(question).terms
    overlap = [sum(t in p.lower() for t in terms) for p in pool]
    sparse = sorted(range(len(pool)), key=lambda i: (-overlap[i], i))
    fused: Dict[int, float] = {}
    for ranking in (dense, sparse):
        for r, i in enumerate(ranking[:50]):
            fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (60 + r)
    return [pool[i] for i in sorted(fused, key=lambda i: -fused[i])[:TOP_K]]


def old_answer(model: LocalMiniLMEmbedding, question: str, texts: Sequence[str]) -> str:
    """The extractive answer before sentence scoring: every sentence embedded, the 3 most similar kept."""
    candidates = S.sentences_of(texts)
    scores = S.cosine(model.get_query_embedding(question), model.get_text_embedding_batch([c.text for c in candidates]))
    return S.compose([candidates[i] for i in S.select(scores, [1] * len(scores), 3)])


def run_set(name: str, items: List[Item], model: LocalMiniLMEmbedding, answerers: Dict[str, Callable]) -> None:
    rows = []
    for question, gold, pool in items:
        top = retrieve(model, question, pool, f"contain_{name}")
        golds = [norm(g) for g in gold]
        if not any(g in norm(p) for p in top for g in golds):
            rows.append(None)
            continue
        row = {}
        for label, answer in answerers.items():
            t0 = time.perf_counter()
            text = answer(question, top)
            row[label] = (any(g in norm(text) for g in golds), (time.perf_counter() - t0) * 1000, len(text))
        rows.append(row)
    half = len(rows) // 2
    for part, chunk in (("all", rows), ("1st half", rows[:half]), ("2nd half", rows[half:])):
        held = [r for r in chunk if r is not None]
        cells = []
        for label in answerers:
            hit = sum(r[label][0] for r in held)
            ms = sum(r[label][1] for r in held) / len(held) if held else 0.0
            chars = sum(r[label][2] for r in held) / len(held) if held else 0.0
            cells.append(f"{label} {hit}/{len(held)} = {hit / len(held) if held else 0:.0%} ({ms:.1f} ms/turn, "
                         f"{chars:.0f} chars)")
        print(f"| {name} | {part} | {len(chunk)} | {len(held)} | " + " | ".join(cells) + " |", flush=True)


# --- the passages the answerer reads -------------------------------------------------------------------------------

PASSAGE_KINDS = ("700/50 chunks (before)", "window chunks", "window + neighbours",
                 "window + neighbours, 5 passages of the top 10 (default)")
PassageItem = Tuple[str, str, List[str], str]  # question, the document that holds the answer, gold answers, half


def cast_passage_items(kind: str) -> Tuple[Dict[str, str], List[PassageItem]]:
    """CAsT 2021: one document per canonical id (its gold passages); a turn's gold is its whole gold passage;
    ``kind`` ``raw`` asks the utterance as typed, ``manual`` the human rewrite. Halves: dialogues in file order."""
    from llama_index_convrag.evaluation.datasets import cast_passage_corpus, load_cast_turns

    dialogues = load_cast_turns(shared_data() / "trec_cast" / "turns.jsonl", years=[2021])
    corpus = {d: doc.text for d, doc in cast_passage_corpus(dialogues).items()}
    items = []
    for n, d in enumerate(dialogues):
        for t in d.turns:
            passage, doc = t.metadata.get("gold_passage"), t.metadata.get("canonical_result_id")
            question = t.utterance if kind == "raw" else t.rewrite
            if passage and doc in corpus and question:
                items.append((question, doc, [passage], "1st" if n < len(dialogues) // 2 else "2nd"))
    return corpus, items


def rgb_page_items(name: str, limit: int) -> Tuple[Dict[str, str], List[PassageItem]]:
    """RGB: question ``n``'s page holds its first positive passage among its own negatives and those of questions
    ``n+1`` and ``n+2`` (the answer in one paragraph of a long page), shuffled (seed ``n``); the corpus holds every
    question's page. Halves: questions in file order."""
    import random

    rows = [json.loads(line) for line in (shared_data() / "rgb" / f"{name}.json").open(encoding="utf-8")][:limit]
    corpus, items = {}, []
    for n, r in enumerate(rows):
        parts = [r["positive"][0]] + [p for m in (n, n + 1, n + 2) for p in rows[m % len(rows)]["negative"]]
        random.Random(n).shuffle(parts)
        doc = f"{name}_{n:03d}"
        corpus[doc] = "\n\n".join(parts)
        gold = r["answer"] if isinstance(r["answer"], list) else [r["answer"]]
        gold = [g for x in gold for g in (x if isinstance(x, list) else [x])]
        items.append((r["query"], doc, gold, "1st" if n < len(rows) // 2 else "2nd"))
    return corpus, items


def passage_indexes(set_name: str, corpus: Dict[str, str], model: LocalMiniLMEmbedding) -> Dict[str, Any]:
    """``{kind: ConvRAGIndex}``: the corpus written as files (bench/out/passages/<set>) and ingested twice, with
    the former chunks and with window-sized ones (re-runs skip unchanged files)."""
    from llama_index.core.node_parser import SentenceSplitter

    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.ingest.pipeline import Ingestor
    from llama_index_convrag.milvus.client import MilvusTarget

    folder = OUT / "passages" / set_name
    folder.mkdir(parents=True, exist_ok=True)
    for doc, text in corpus.items():
        path = folder / f"{doc}.txt"
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    target = MilvusTarget(uri=str(OUT / "passages.db"))
    out = {}
    for kind, size in ((PASSAGE_KINDS[0], 700), (PASSAGE_KINDS[1], None)):  # the widened kinds read the window's
        name = f"{set_name.replace('-', '_')}_{'c700' if size else 'window'}"
        ingestor = Ingestor.from_defaults(collection_name=name, embed_model=model, target=target,
                                          chunk_size=size, chunk_overlap=50 if size else None)
        if size:
            ingestor.splitter = SentenceSplitter(chunk_size=700, chunk_overlap=50)  # the former default, as it was
        ingestor.run([folder])
        out[kind] = ConvRAGIndex.from_collection(name, embed_model=model, target=target)
    return out


def passage_rows(items: List[PassageItem], indexes: Dict[str, Any]) -> Dict[str, List[Dict[str, float]]]:
    """Per kind, per question: right document in the top 5, gold inside one passage read, passages, tokens."""
    from llama_index_convrag.config.tokens import count_tokens
    from llama_index_convrag.postprocessors.widen import NeighbourWidener, WidenRules
    from llama_index_convrag.prompts.synthesis import ALIGNED_QA_TMPL

    rows: Dict[str, List[Dict[str, float]]] = {k: [] for k in PASSAGE_KINDS}
    retrievers = {k: indexes[k].as_retriever(similarity_top_k=TOP_K) for k in PASSAGE_KINDS[:2]}
    deep = indexes[PASSAGE_KINDS[1]].as_retriever(similarity_top_k=2 * TOP_K)
    widener = NeighbourWidener.from_retriever(deep, WidenRules(passages=None))
    filling = NeighbourWidener.from_retriever(deep, WidenRules(passages=TOP_K))
    for question, doc, gold, _ in items:
        hits = {k: r.retrieve(question) for k, r in retrievers.items()}
        hits[PASSAGE_KINDS[2]] = widener.postprocess_nodes(hits[PASSAGE_KINDS[1]])
        hits[PASSAGE_KINDS[3]] = filling.postprocess_nodes(deep.retrieve(question))
        golds = [norm(g) for g in gold]
        for kind, nodes in hits.items():
            texts = [n.node.get_content() for n in nodes]
            prompt = ALIGNED_QA_TMPL.format(context_str="\n\n".join(texts), query_str=question)
            rows[kind].append({
                "doc": float(any(Path(str(n.node.ref_doc_id)).stem == doc for n in nodes)),
                "contained": float(any(g in norm(t) for t in texts for g in golds)),
                "passages": float(len(texts)), "tokens": float(sum(count_tokens(t) for t in texts)),
                "prompt": float(count_tokens(prompt))})
    return rows


def print_passages(set_name: str, items: List[PassageItem], rows: Dict[str, List[Dict[str, float]]]) -> None:
    for half in ("all", "1st", "2nd"):
        keep = [i for i, it in enumerate(items) if half == "all" or it[3] == half]
        for kind in PASSAGE_KINDS:
            r = [rows[kind][i] for i in keep]
            mean = {m: float(np.mean([x[m] for x in r])) if r else 0.0 for m in r[0]} if r else {}
            print(f"| {set_name} | {half} | {len(r)} | {kind} | {mean.get('doc', 0):.3f} | "
                  f"{mean.get('contained', 0):.3f} | {mean.get('passages', 0):.2f} | {mean.get('tokens', 0):.0f} | "
                  f"{mean.get('prompt', 0):.0f} |", flush=True)


def passages_main(sets: Sequence[str], limit: int) -> None:
    """The passages the answerer reads, per set and half: the right document among the top 5 hits, the gold answer
    inside one passage read (CAsT: the whole gold passage), passages and tokens read per turn (cl100k), and the
    tokens of the QA prompt sent to the LLM (the engine's default template, the passages and the question)."""
    model = LocalMiniLMEmbedding()
    loaders = {"cast21-raw": lambda: cast_passage_items("raw"), "cast21-manual": lambda: cast_passage_items("manual"),
               "rgb-en": lambda: rgb_page_items("en_fact", limit), "rgb-zh": lambda: rgb_page_items("zh_fact", limit)}
    print("| set | half | questions | passages read | right document in top 5 | answer inside a passage read | "
          "passages / turn | tokens read / turn | prompt tokens / turn |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in sets:
        corpus, items = loaders[name]()
        items = [it for half in ("1st", "2nd") for it in [x for x in items if x[3] == half][:limit // 2]] \
            if len(items) > limit else items  # both halves, whatever the limit
        indexes = passage_indexes(name.split("-")[0] if name.startswith("cast21") else name, corpus, model)
        print_passages(name, items, passage_rows(items, indexes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 questions a set")
    parser.add_argument("--sets", default="rgb-en,rgb-zh,canard,real-files")
    parser.add_argument("--new-only", action="store_true", help="skip the old answer (every sentence embedded: slow)")
    parser.add_argument("--zh-refine", type=int, default=60, help="zh_refine questions added to zh_fact")
    parser.add_argument("--canard", type=int, default=100, help="CANARD questions")
    parser.add_argument("--passages", action="store_true", help="the passages the answerer reads (see the docstring)")
    parser.add_argument("--passage-sets", default="cast21-raw,cast21-manual,rgb-en,rgb-zh")
    args = parser.parse_args()
    limit = 40 if args.quick else 10**6
    if args.passages:
        passages_main(args.passage_sets.split(","), limit)
        return
    model = LocalMiniLMEmbedding()
    new = Extractive(model, streaming=False)
    answerers = {
        "old": lambda q, texts: old_answer(model, q, texts),
        "new": lambda q, texts: new.synthesize(q, [NodeWithScore(node=TextNode(text=t), score=1.0) for t in texts]).response,
    }
    if args.new_only:
        del answerers["old"]
    loaders = {
        "rgb-en": lambda: rgb("en_fact", limit),
        "rgb-zh": lambda: rgb("zh_fact", limit) + rgb("zh_refine", min(limit, args.zh_refine)),
        "canard": lambda: canard(min(limit, args.canard)),
        "real-files": lambda: real_files(limit),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    print("(figures from a loaded 2-core machine; ms per turn is the answer alone, retrieval excluded)")
    print("| set | questions | n | top-5 holds the answer | " + " | ".join(f"{a} extractive" for a in answerers) + " |")
    print("|---|---|---|---|" + "---|" * len(answerers))
    for name in args.sets.split(","):
        run_set(name, loaders[name](), model, answerers)


if __name__ == "__main__":
    main()
