"""The retriever's choice lists, in one pure module (the CLI's ``--search-type``/``--ranker`` read them too)."""

SEARCH_TYPES = ("dense", "sparse", "hybrid")
#: Fusions of per-field result lists; also the first stage of the ``model`` ranker.
FUSION_TYPES = ("rrf", "weighted")
RANKER_TYPES = (*FUSION_TYPES, "model")
PRE_RANKER_TYPES = FUSION_TYPES
#: The library default (``as_retriever``, ``as_query_engine``, ``as_chat_engine``) and the CLI's ``--ranker``:
#: per-query min-max weighted fusion (compared with RRF by ``bench/quality_matrix.py``).
DEFAULT_RANKER_TYPE = "weighted"
