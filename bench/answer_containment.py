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
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 questions a set")
    parser.add_argument("--sets", default="rgb-en,rgb-zh,canard,real-files")
    parser.add_argument("--new-only", action="store_true", help="skip the old answer (every sentence embedded: slow)")
    parser.add_argument("--zh-refine", type=int, default=60, help="zh_refine questions added to zh_fact")
    parser.add_argument("--canard", type=int, default=100, help="CANARD questions")
    args = parser.parse_args()
    limit = 40 if args.quick else 10**6
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
