"""A cached score's arithmetic: q_t · k_j with k_j read from the cache (made once, at step j), scaled, and the same
number in the whole causal computation's scores."""

from __future__ import annotations

from ..base.explain import Context, Derivation, abbreviate, explains, factor
from ..base.i18n import msg
from ..base.numbers import approx
from ..forward.compute import positions, scale_factor
from .compute import Decoding


@explains(Decoding, "scores_t")
def cached_score(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Score j of decoding step t (index: the query's one row, then j)."""
    _, j = index
    o, step, t = c.case.options, c.step, c.step.t
    h = 0 if head is None else head
    kv = h // (o.heads // (o.kv_heads or o.heads))  # the key/value head this query head reads (its cache's row)
    q_t = c.view("q_t", head)[0]
    k_j = (step["k_cache"][kv] if o.heads > 1 else step["k_cache"])[j]
    value = c.view("scores_t", head)[0, j].item()
    causal = c.record.causal_scores
    causal = (causal[h] if o.heads > 1 else causal)[t, j].item()
    terms = [f"{factor(c.num(a))}·{factor(c.num(b))}" for a, b in zip(q_t.tolist(), k_j.tolist(), strict=True)]
    raw = float(q_t.double() @ k_j.double())
    multiplier = scale_factor(c.case) / o.temperature
    turned = msg("decoding.explain_turned", position=int(positions(c.case)[j])) if o.rope_base is not None else ""
    title = msg("decoding.explain_title", t=t + 1, j=j + 1, query=c.token(t), key=c.token(j))
    lines = [
        msg("decoding.explain_cache", j=j + 1, t=t + 1, turned=turned),
        msg("decoding.explain_dot", t=t + 1, j=j + 1, terms=abbreviate(terms), raw=approx(raw), count=len(terms)),
    ]
    if multiplier != 1:
        scaled = {"raw": approx(raw), "multiplier": approx(multiplier), "value": c.num(value)}
        lines.append(msg("decoding.explain_scaled", **scaled))
    lines.append(msg("decoding.explain_same", t=t + 1, j=j + 1, causal=c.num(causal), value=c.num(value)))
    parts = {"q_t": ((0,), None), "k_cache": ((j,), None), tensor: ((0,), (j,))}
    return Derivation(title, tuple(lines), parts, head)
