"""User text inside Markdown: shown as typed, never as links, emphasis, HTML, LaTeX or icons."""

from __future__ import annotations

import re


def plain(text: str) -> str:
    """Text that may hold user input (a token label, a file name), for Markdown: a code span, in which Streamlit
    makes no links, emphasis, HTML, LaTeX, emoji or icons (escaping characters leaves autolinks and icons)."""
    fence = "`" * (max(map(len, re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}"
