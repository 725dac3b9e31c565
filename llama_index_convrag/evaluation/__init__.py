"""Evaluation: data loaders, retrieval and answer metrics, conversation replay, JSON reports and plots."""

from llama_index_convrag.evaluation.answers import (AnswerMetrics, answer_tokens, evaluate_answers, exact_match,
                                                    normalize_answer, token_f1)
from llama_index_convrag.evaluation.conversation import (MANUAL, RAW, ConversationResult, RewriteEffect,
                                                         StrategyResult, ScoredTurn, collect_records,
                                                         concat_history, contextual_strategy, raw_utterance, replay_conversations,
                                                         rewrite_effect, strategy_from_records)
from llama_index_convrag.evaluation.datasets import (BeirDataset, ConversationTurn, Dialogue, Document, Qrels,
                                                     Query, available_splits, cast_passage_corpus,
                                                     dialogue_qrels, load_beir, load_canard, load_cast_turns,
                                                     load_corpus, load_qrels, load_queries)
from llama_index_convrag.evaluation.plots import plot_latency_distribution, plot_metric_bars, plot_turn_curves
from llama_index_convrag.evaluation.report import (REPORT_SCHEMA, build_report, latency_summary, load_report,
                                                   metric_table, write_report)
from llama_index_convrag.evaluation.retrieval import (METRICS, RetrievalMetrics, RetrievalResult,
                                                      aevaluate_retriever, evaluate_retriever, evaluate_run,
                                                      metric_names, nodes_to_ranked, ranked_to_run_entry)

__all__ = [
    "AnswerMetrics", "BeirDataset", "ConversationResult", "ConversationTurn", "Dialogue", "Document", "MANUAL",
    "METRICS", "Qrels", "Query", "RAW", "REPORT_SCHEMA", "RetrievalMetrics", "RetrievalResult", "RewriteEffect",
    "StrategyResult", "ScoredTurn", "aevaluate_retriever", "answer_tokens", "available_splits", "build_report",
    "cast_passage_corpus", "collect_records", "concat_history", "contextual_strategy", "dialogue_qrels", "evaluate_answers",
    "evaluate_retriever", "evaluate_run", "exact_match", "latency_summary", "load_beir", "load_canard",
    "load_cast_turns", "load_corpus", "load_qrels", "load_queries", "load_report", "metric_names", "metric_table",
    "nodes_to_ranked", "normalize_answer", "plot_latency_distribution", "plot_metric_bars", "plot_turn_curves",
    "ranked_to_run_entry", "raw_utterance", "replay_conversations", "rewrite_effect", "strategy_from_records",
    "token_f1", "write_report",
]
