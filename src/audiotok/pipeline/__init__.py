"""Tokenizing whole corpora: `tokenize(source, model, out)` and `audiotok tokenize`."""

from .run import Summary, tokenize

__all__ = ["Summary", "tokenize"]
