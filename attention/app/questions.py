"""Questions a newcomer asks, on the overview, each a link that opens its answer in one click, with the case's own
numbers in the question."""

from __future__ import annotations

import math

import streamlit as st

from ..core import Trace
from ..figures import HIDDEN
from . import picked
from .language import t
from .session import Session
from .text import plain

ASK = "ask"  # the link's parameter: which question, answered once when its page opens
PAGE = {"score": "explain", "output": "explain", "causal": "walkthrough", "sqrt_dk": "variants"}


def links(trace: Trace) -> None:
    """The questions as links, written with this trace's numbers: the score of query 2 on key 3 and output 3, as
    the article has them, and what a causal mask and ÷√d_k change."""
    tokens, (query, key), row = trace.case.tokens, _score_cell(trace.case.n), _output_row(trace.case.n)
    score = trace["scores"][..., query, key].flatten()[0].item()  # the first head's, when there are several
    output = ", ".join(_number(v) for v in trace.outputs[row].tolist())
    asks = {
        "score": t("question.score", query=tokens[query], key=tokens[key], value=_number(score)),
        "output": t("question.output", token=tokens[row], row=f"[{output}]"),
        "causal": t("question.causal", token=tokens[0]),
        "sqrt_dk": t("question.sqrt_dk"),
    }
    for ask, question in asks.items():
        st.page_link(f"pages/{PAGE[ask]}.py", label=plain(question), icon=":material/help:", query_params={ASK: ask})


def answer(session: Session) -> None:
    """Set up the view a question's link asks for, once: the number to explain, or the mask and the step."""
    ask = st.query_params.get(ASK)
    if ask not in PAGE:
        return
    st.query_params.pop(ASK)
    case, o = session.case, session.case.options
    if ask == "score":  # a score's index starts with its head when there are several: the first
        picked.pick("scores_raw", ((0,) if o.heads > 1 else ()) + _score_cell(case.n))
    elif ask == "output":
        d_out = len(o.w_out[0]) if o.w_out else case.d_v
        picked.pick("outputs", (_output_row(case.n), min(1, d_out - 1)))  # the article's output 3: its 7.8
    elif ask == "causal":
        session.choose(mask="causal")
        session.go_to("outputs")  # step 7 by its name: on a RoPE case too, where it is the 8th of nine


def _number(v: float) -> str:
    """A number of the question, or "?" where an open exercise hides it (NaN: see exercise.redacted)."""
    return HIDDEN if math.isnan(v) else f"{v:.4g}"


def _score_cell(n: int) -> tuple[int, int]:
    return min(1, n - 1), min(2, n - 1)  # query 2, key 3


def _output_row(n: int) -> int:
    return min(2, n - 1)  # output 3
