"""A cell as a person typed it: the number it stands for, or why it stands for none (one message, in words)."""

from __future__ import annotations

import math
import re

from ..base.case import MAX_ABS
from ..base.i18n import Message, excerpt, msg

# Numbers as people write them: -0.5, .5, 5., 1e5, 1E-3, +2; spaces around them are ignored, as a spreadsheet does.
# Nothing else: no thousands separators, no decimal comma, no Unicode minus, no "inf" or "nan" (float() takes those).
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
SPACES = " \t"


def number(text: str) -> float | None:
    """The number a typed text is, exactly (float() of the text), or None when it is no number as written above."""
    text = text.strip(SPACES)
    return float(text) if NUMBER.fullmatch(text) else None


def cell(value: object) -> object:
    """What a cell holds once typed: the number for a text that is one within the limit; anything else as it came
    (text past the limit or not a number stays text, so that it is shown and named exactly as typed)."""
    if not isinstance(value, str):
        return value
    found = number(value)
    return found if found is not None and abs(found) <= MAX_ABS else value


def problem(text: str) -> Message:
    """Why a typed text is not a number the case takes (the cell keeps the text): empty, past the limit (1e400, a
    float's inf, is past it too), or not a number, with a hint for the two usual slips."""
    stripped = text.strip(SPACES)
    value = excerpt(stripped)
    if not stripped:
        return msg("error.empty")
    if (found := number(stripped)) is not None and not abs(found) <= MAX_ABS:
        return msg("editor.over_limit", value=value, bound=MAX_ABS)
    if number(stripped.replace("\u2212", "-")) is not None:  # U+2212, the minus of typeset text
        return msg("editor.minus", value=value)
    if "," in stripped and number(stripped.replace(",", ".")) is not None:
        return msg("editor.comma", value=value)
    return msg("error.not_a_number", value=value)


def shown(value: object) -> str:
    """A cell's text for the editor: a number as Python writes it back exactly (2.0 as 2), anything else as typed."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isfinite(value):
        written = repr(value)
        return written[:-2] if written.endswith(".0") else written
    return value if isinstance(value, str) else str(value)


def sent(value: object) -> object:
    """A cell's value as a client sent it: a number, text or nothing; anything else (a list) as a short text."""
    return value if value is None or isinstance(value, int | float | str) else excerpt(value)
