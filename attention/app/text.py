"""Text inside Markdown, in the normal font: user text shown exactly as typed, and the catalogue's own prose."""

from __future__ import annotations

import re

# What Markdown, Streamlit's LaTeX and its icons would read in a line of text: these characters anywhere, an
# underscore that is not inside a word (d_k stays as it is), and a list, heading or quote marker at the start.
SPECIAL = re.compile(r"[\\`*\[\]<$~|]|(?<![^\W_])_|_(?![^\W_])|^\s*(?:[#>+-]|\d+[.)])(?=\s)", re.MULTILINE)
ZERO_WIDTH = "\u200b"
PUNCTUATION = set("\\`*[]<$~|_#>+-.)")  # a backslash escapes these; before a digit it would show


def prose(text: str) -> str:
    """The catalogue's own prose for Markdown: no `$` starts LaTeX, no `*` or `_` emphasis, no list or link."""
    return SPECIAL.sub(lambda m: "".join("\\" + c if c in PUNCTUATION else c for c in m.group(0)), text)


def plain(text: str) -> str:
    """Text that may hold user input (a token label, a file name, a message quoting one) for Markdown, shown as
    typed in the text's own font: what prose() escapes, and what Streamlit would still turn into an icon, an emoji or
    a link (":name:", "http://", "www.", "a@b") broken by a zero-width space."""
    escaped = prose(text)
    escaped = re.sub(r":(?=//|[A-Za-z][\w/+-]*:)", ":" + ZERO_WIDTH, escaped)  # http://, :rocket:, :material/home:
    return re.sub(r"www\.|@", lambda m: m.group(0)[0] + ZERO_WIDTH + m.group(0)[1:], escaped)
