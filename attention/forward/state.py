"""The Explain page's view (the number explained: its tensor and index) and its link: plain values, no Streamlit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PARAM = "explain"  # the link's number explained: "scores_raw.2.3", its tensor then its index from 1 (head first)
MAX_PART = 5  # digits of one index in a link (an index is below 1,024 × 64 …): a longer part is junk


@dataclass(frozen=True)
class Explained:
    """The number the Explain page explains; a link's is set on its pickers when the page is drawn next."""

    tensor: str | None = None  # None: not chosen yet (the page's default)
    index: tuple[int, ...] = ()  # from 0, the head first where the tensor has one
    pending: bool = False  # from a link: the pickers are not yet set to it


def link(view: Explained) -> dict[str, str | None]:
    """The view as the link's parameter (None, left out, until a number is chosen)."""
    if view.tensor is None:
        return {PARAM: None}
    return {PARAM: ".".join((view.tensor, *(str(i + 1) for i in view.index)))}


def from_link(value: str, shapes: Mapping[str, tuple[int, ...]]) -> Explained | None:
    """A link's number to explain, checked against the shapes of the tensors this case can explain; None: it names
    no number of them (the caller says so)."""
    tensor, *parts = value.split(".")
    shape = shapes.get(tensor)
    if shape is None or len(parts) != len(shape):
        return None
    if not all(p.isascii() and p.isdecimal() and len(p) <= MAX_PART for p in parts):
        return None
    index = tuple(int(p) - 1 for p in parts)
    if not all(0 <= i < size for i, size in zip(index, shape, strict=True)):
        return None
    return Explained(tensor, index, pending=True)
