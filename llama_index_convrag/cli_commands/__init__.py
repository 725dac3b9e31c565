"""The ``convrag`` command groups (the argument parser and exit codes live in :mod:`llama_index_convrag.cli`)."""

__all__: list = []
