"""Limits shared by the command line and the service."""

#: The longest question, in characters, that ``convrag ask/chat`` and ``convrag serve`` accept: about 1,000 tokens,
#: a quarter of a 4k window, so a question never crowds out the passages it asks about.
MAX_QUESTION_CHARS = 4000
