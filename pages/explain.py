"""Explain page (/explain): any number's arithmetic, with its own numbers (attention/forward/explain_page.py)."""

from attention.forward.explain_page import explain_page

explain_page()
