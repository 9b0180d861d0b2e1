"""Variants page (/variants): where the article departs from textbook attention (attention/forward/page.py)."""

from attention.forward.page import variants

variants()
