"""Storage: the conversation stores live in :mod:`llama_index_convrag.storage.conversation`."""

__all__: list = []
