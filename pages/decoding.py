"""Decoding page (/decoding): how attention is run, one token at a time with a KV cache (attention/decoding/page.py)."""

from attention.decoding.page import decoding

decoding()
