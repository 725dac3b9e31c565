"""The retriever's choice lists, in one pure module (the CLI's ``--search-type``/``--ranker`` read them too)."""

SEARCH_TYPES = ("dense", "sparse", "hybrid")
#: Fusions of per-field result lists; also the first stage of the ``model`` ranker.
FUSION_TYPES = ("rrf", "weighted")
RANKER_TYPES = (*FUSION_TYPES, "model")
PRE_RANKER_TYPES = FUSION_TYPES
