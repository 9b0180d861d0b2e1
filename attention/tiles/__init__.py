"""Attention in tiles: FlashAttention's online softmax on the case, checked against step 7."""

from . import explain  # noqa: F401  (registers the online softmax's explainer with the explain engine)
