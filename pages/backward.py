"""Backward page (/backward): how attention learns, the loss's gradient through the eight steps in reverse
(attention/backward/page.py)."""

from attention.backward.page import backward

backward()
