"""Whole model page (/whole): every head of a real model at once, and what a head does for the next token
(attention/whole/page.py)."""

from attention.whole.page import whole

whole()
