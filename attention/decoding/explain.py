"""A cached score's arithmetic: q_t · k_j with k_j read from the cache (made once, at step j; with multi-head latent
attention made at step t from token j's cached latent; with cross-attention made once from the source's row j before
the first step), scaled, with ALiBi's or T5's bias and the cap where the case has them, the same number in the whole
(causal) computation's scores, and with a sink the weight it becomes."""

from __future__ import annotations

from ..base.explain import Context, Derivation, abbreviate, explains, factor
from ..base.i18n import msg
from ..base.numbers import approx
from ..forward.compute import positions, relative_bucket, scale_factor
from .compute import Decoding


@explains(Decoding, "scores_t")
def cached_score(c: Context, tensor: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """Score j of decoding step t (index: the query's one row, then j, the key's row in the cache: token first + j,
    or cross-attention's source token j)."""
    _, j = index
    o, step, t = c.case.options, c.step, c.step.t
    token = step.first + j  # the key's token: under a window the cache's first row is token `first`
    h = 0 if head is None else head
    kv = h // (o.heads // (o.kv_heads or o.heads))  # the key/value head this query head reads (its cache's row)
    q_t = c.view("q_t", head)[0]
    k_j = (step.keys[kv] if o.heads > 1 else step.keys)[j]  # the cache's key, or the one made from its latent
    value = c.view("scores_t", head)[0, j].item()
    causal = c.record.causal_scores
    causal = (causal[h] if o.heads > 1 else causal)[t, token].item()
    terms = [f"{factor(c.num(a))}·{factor(c.num(b))}" for a, b in zip(q_t.tolist(), k_j.tolist(), strict=True)]
    raw = float(q_t.double() @ k_j.double())
    multiplier = scale_factor(c.case) / o.temperature
    latent = "latent_cache" in step.tensors  # multi-head latent attention: the cache holds c_j, not k_j
    turned = ""
    if o.rope_base is not None:  # turned at each step from the cached latent, or once as it was cached (never cross)
        position = int(positions(c.case)[token])
        turned = msg("decoding.explain_latent_turned" if latent else "decoding.explain_turned", position=position)
    key = c.case.key_tokens[token]  # cross-attention's: the source token's own label
    title = msg("decoding.explain_title", t=t + 1, j=token + 1, query=c.token(t), key=key)
    cache = {"j": token + 1, "t": t + 1} | ({"key": key} if c.case.cross else {"turned": turned})
    cache |= {"d_c": c.case.d_c} if latent else {}
    if c.case.cross:  # made once from the source's row j of x_kv, before the first step
        made = msg("decoding.explain_latent_source" if latent else "decoding.explain_cache_source", **cache)
    else:
        made = msg("decoding.explain_latent" if latent else "decoding.explain_cache", **cache)
    lines = [
        made,
        msg("decoding.explain_dot", t=t + 1, j=token + 1, terms=abbreviate(terms), raw=approx(raw), count=len(terms)),
    ]
    scaled = raw * multiplier
    if multiplier != 1:
        said = {"raw": approx(raw), "multiplier": approx(multiplier), "value": approx(scaled)}
        lines.append(msg("decoding.explain_scaled", **said))
    lines += _options_lines(c, head, j, t, token, scaled)
    if isinstance(o.mask, tuple) and not o.mask[t][token]:  # cross-attention's explicit mask (self's: refused)
        lines.append(msg("decoding.explain_masked", t=t + 1, j=token + 1, key=key))
    said = {"t": t + 1, "j": token + 1, "causal": c.num(causal), "value": c.num(value)}
    lines.append(msg("decoding.explain_same_cross" if c.case.cross else "decoding.explain_same", **said))
    if o.sinks is not None:
        lines.append(_sink_line(c, head, j))
    parts = {"q_t": ((0,), None), "k_from_latent" if latent else "k_cache": ((j,), None), tensor: ((0,), (j,))}
    return Derivation(title, tuple(lines), parts, head)


def _options_lines(c: Context, head: int | None, j: int, t: int, token: int, scaled: float) -> list:
    """ALiBi's or T5's bias for the key's distance, then the cap, each with its numbers (none without them)."""
    o, lines, score, h = c.case.options, [], scaled, 0 if head is None else head
    if o.alibi is not None:  # − m_h (t − j): token indices, whatever the RoPE positions
        slope = o.alibi[h]
        bias = -slope * (t - token)
        said = {"slope": approx(slope), "t": t + 1, "j": token + 1, "bias": approx(bias), "before": approx(score)}
        score += bias
        lines.append(msg("decoding.explain_alibi", **said, value=approx(score)))
    if o.relative_bias is not None:  # T5's learned number for the bucket of j − t (a key back: T5's decoder's)
        bucket = relative_bucket(o, token - t)
        bias = o.relative_bias[h][bucket]
        said = {"distance": token - t, "bucket": bucket, "bias": approx(bias), "before": approx(score)}
        score += bias
        lines.append(msg("decoding.explain_relative", **said, value=approx(score)))
    if o.softcap is not None:
        uncapped = c.view("scores_uncapped_t", head)[0, j].item()
        said = {"cap": approx(o.softcap), "uncapped": approx(uncapped)}
        lines.append(msg("decoding.explain_softcap", **said, value=c.num(c.view("scores_t", head)[0, j].item())))
    return lines


def _sink_line(c: Context, head: int | None, j: int) -> str:
    """The score's weight with the sink's e^s_h in the denominator, and what the sink took of the row."""
    sink = c.case.options.sinks[0 if head is None else head]
    weight, taken = c.view("weights_t", head)[0, j].item(), c.view("weights_sink_t", head).flatten()[0].item()
    return msg("decoding.explain_sink", sink=approx(sink), weight=c.num(weight), taken=approx(taken))
