"""Tiles page (/tiles): how attention is run in tiles, FlashAttention's online softmax (attention/tiles/page.py)."""

from attention.tiles.page import tiles

tiles()
