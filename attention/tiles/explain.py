"""One query's step in a tile, with its numbers: the new running maximum m, the rescaling e^(m_old − m_new), ℓ, the
partial output's first number and the output so far."""

from __future__ import annotations

import math

from ..base.explain import Context, Derivation, abbreviate, explains
from ..base.i18n import msg
from ..base.numbers import approx, sub
from ..forward.compute import relative_bucket
from .compute import Tiled


@explains(Tiled, "m", "rescale", "l", "partial")
def online_softmax(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Query `row` of the tile (its place in it, from 0) after key tile j: m, the rescaling, ℓ, and the partial."""
    row, visit, o = index[0], c.step, c.case.options
    tile = visit.key_tile + 1  # as the page counts key tiles, from 1; m₀, ℓ₀ are before the first
    j, i = sub(tile - 1), sub(tile - 2)
    t = {name: c.view(name, head)[row] for name in visit.tensors}
    m_old, m_new, l_old, l_new, rescale = (t[k].item() for k in ("m_before", "m", "l_before", "l", "rescale"))
    s = [v for v in t["scores"].tolist() if v != float("-inf")]  # the keys this query may attend to in the tile
    m, r = approx(m_new), approx(rescale)
    shown = ", ".join(map(approx, s)) if len(s) <= 6 else f"{', '.join(map(approx, s[:3]))}, …, {approx(max(s))}"
    lines = _before(c, visit, row, head, i)
    lines.append(msg("tiles.explain_m", j=j, i=i, m_old=approx(m_old), s=shown or "−∞", m=m))
    lines.append(msg("tiles.explain_rescale", j=j, i=i, m_old=approx(m_old), m=m, rescale=r))
    terms = abbreviate([f"e^({approx(v)} − {m})" for v in s])
    total = sum(math.exp(v - m_new) for v in s) if math.isfinite(m_new) else 0.0
    said = {"l_old": approx(l_old), "rescale": r, "terms": terms or "0", "scaled": approx(l_old * rescale)}
    lines.append(msg("tiles.explain_l", tile=tile, j=j, i=i, **said, total=approx(total), l=approx(l_new)))
    before, after = approx(t["partial_before"][0].item()), t["partial"][0].item()
    lines.append(msg("tiles.explain_partial", j=j, i=i, before=before, rescale=r, after=approx(after)))
    if l_new > 0:
        estimate = approx(after / l_new)
        lines.append(msg("tiles.explain_estimate", j=j, partial=approx(after), l=approx(l_new), estimate=estimate))
    if o.sinks is not None and l_new > 0:  # the sink's share: e^(s_h − m) / ℓ, no value
        share = approx(math.exp(o.sinks[head or 0] - m_new) / l_new)
        lines.append(msg("tiles.explain_sink_share", j=j, sink=approx(o.sinks[head or 0]), m=m, l=approx(l_new),
                         share=share))  # fmt: skip
    title = msg("tiles.explain_title", token=c.token(visit.queries[row]), tile=tile)
    parts = {"scores": ((row,), None), "m_before": ((row,),), "l_before": ((row,),), tensor: ((row,),)}
    return Derivation(title, tuple(lines), parts, head)


def _before(c: Context, visit, row: int, head: int | None, i: str) -> list:
    """What the tile's scores and the running m, ℓ came with: ALiBi's or T5's bias from the query's and keys' absolute
    places, the cap, and before the first key tile the sink's start (m₀ = s_h, ℓ₀ = 1)."""
    o, lines = c.case.options, []
    query = visit.queries[row]
    if o.alibi is not None:
        slope = o.alibi[head or 0]
        said = {"slope": approx(slope), "query": query + 1, "first": visit.keys.start + 1, "last": visit.keys.stop}
        lines.append(msg("tiles.explain_alibi", **said, low=approx(-slope * (query - visit.keys.start)),
                         high=approx(-slope * (query - visit.keys.stop + 1))))  # fmt: skip
    if o.relative_bias is not None:  # T5's: the buckets of this tile's distances j − i, from the absolute places
        buckets = sorted({relative_bucket(o, j - query) for j in visit.keys})
        said = {"query": query + 1, "first": visit.keys.start + 1, "last": visit.keys.stop}
        lines.append(msg("tiles.explain_relative", **said, buckets=", ".join(map(str, buckets))))
    if o.softcap is not None:
        lines.append(msg("tiles.explain_softcap", cap=approx(o.softcap)))
    if o.sinks is not None and visit.key_tile == 0:
        lines.append(msg("tiles.explain_sink", i=i, sink=approx(o.sinks[head or 0])))
    return lines
