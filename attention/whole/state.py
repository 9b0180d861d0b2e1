"""The model view's state: how its heads are sorted (its link's sort=), which heads are switched off and how, and
the two sentences patched. Plain values, no Streamlit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..base.i18n import Message, excerpt, msg
from .compute import HOWS

SORTS = ("head", "kind")  # heads in the model's order, or each layer's grouped by kind
OPENS = ("head", "layer")  # a click opens the head, or its whole layer as one multi-head case
PARAMS = ("sort",)
CLEAN, CORRUPT = "The capital of France is", "The capital of Italy is"


@dataclass
class Looking:
    """The model view: its order, what a click opens, the heads switched off and how, the sentences patched."""

    sort: str = "head"  # SORTS
    opens: str = "head"  # OPENS
    switched: tuple[tuple[int, int], ...] = ()  # (layer, head), from 1, as people say them
    how: str = "zero"  # compute.HOWS
    clean: str = CLEAN  # the sentence whose heads are patched in
    corrupt: str = CORRUPT  # the sentence they are patched into
    ranked_layer: int | None = None  # a layer whose heads were ranked (from 1): ranking costs a pass a head
    patched_layer: int | None = None  # a layer whose heads were patched (from 1)
    ablating: bool = False  # the model was run again with heads switched off (then on every change)
    first_shown: bool = False  # the open head was run without its first token (then on every change)
    leave: bool = False  # a layer was opened: to the walkthrough, once
    other: str = "A"  # the first token put in place of the sentence's own (its first token, as the model cuts it)
    model: str = ""  # the model these layers and heads are of

    def of(self, model: str) -> bool:
        """Whether the view was of another model: then its layers and heads are forgotten (another model has other
        ones); its sort and sentences stay."""
        if self.model in (model, ""):  # the same model, or a fresh view (a link's question may have set it up)
            self.model = model
            return False
        self.model, self.switched, self.ranked_layer, self.patched_layer = model, (), None, None
        self.ablating = self.first_shown = False
        return True

    def choose(self, **changes: object) -> None:
        """The view's new values; one that is not one of its kind's is left as it was."""
        for name, value in changes.items():
            allowed = {"sort": SORTS, "opens": OPENS, "how": HOWS}.get(name)
            if allowed is None or value in allowed:
                setattr(self, name, value)


def open_link(params: Mapping[str, str | None]) -> tuple[Looking | None, Message | None]:
    """The view a link asks for (?sort=kind), or None and why its sort was refused."""
    sort = params.get("sort")
    if sort is None:
        return None, None
    if sort not in SORTS:
        return None, msg("whole.bad_sort", value=excerpt(sort), sorts=", ".join(SORTS))
    return Looking(sort=sort), None


def link(view: Looking) -> dict[str, str | None]:
    """The view as link parameters: the sort, when not the model's order."""
    return {"sort": None if view.sort == "head" else view.sort}


# The overview's questions about the whole model, each answered on this page in a click

ASK = "ask"  # the link's parameter (as the forward pass's questions): which question, set up once


def questions(layers: int, heads: int, layer: int, causal: bool, top: str | None) -> dict[str, Message]:
    """The questions, by the id their link carries: the first token's heads and why, and (a causal model) which
    heads matter for the next token, which carry France to Paris, which are induction heads."""
    out = {"first": msg("whole.question.first", all=layers * heads), "why_first": msg("whole.question.why_first")}
    if causal and top is not None:
        out["rank"] = msg("whole.question.rank", layer=layer, token=top)
        out["patch"] = msg("whole.question.patch")
        out["induction"] = msg("whole.question.induction")
    return out


def answer(view: Looking, ask: str, layer: int) -> None:
    """The view a question's link asks for: heads grouped by kind, or a layer's heads ranked or patched."""
    if ask in ("first", "induction"):
        view.sort = "kind"
    elif ask == "why_first":
        view.first_shown = True
    elif ask == "rank":
        view.ranked_layer = layer
    elif ask == "patch":
        view.clean, view.corrupt, view.patched_layer = CLEAN, CORRUPT, layer
