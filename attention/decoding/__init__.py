"""Decoding with a KV cache: attention one token at a time, checked against the whole causal computation."""

from . import explain  # noqa: F401  (registers the cached score's explainer with the explain engine)
