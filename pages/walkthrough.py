"""Walkthrough page (/walkthrough): the eight steps one at a time (attention/forward/page.py)."""

from attention.forward.page import walkthrough

walkthrough()
