"""Pure builders for the Decoding page: a decoding step's cache, scores and output as heatmaps, the full causal
score matrix with row t outlined, cross-attention's alignment (each target token's weights over the source tokens),
and the work and memory each way as tables. No st.* calls."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import torch

from ..base.i18n import text
from ..forward.compute import Trace
from ..show import heatmap as figures
from .compute import (
    Decoding,
    Sizes,
    cache_bytes,
    cache_bytes_per_token,
    full_heads,
    multiply_adds,
    without_latent,
)

MAX_ROWS_SHOWN = 16  # the work table: the first tokens, then the last one
# per key/value head: with grouped-query attention, fewer than the queries
KV = ("k_t", "v_t", "k_cache", "v_cache", "k_from_latent", "v_from_latent")
BY_CACHED = ("k_cache", "v_cache", "latent_cache", "k_from_latent", "v_from_latent")  # a row per token cached
CROSS_TITLES = (*BY_CACHED, "scores_t")  # titled otherwise with cross-attention: the source's cache, made once


def step_heatmap(decoding: Decoding, t: int, name: str, head: int | None = None, lang: str = "en") -> go.Figure:
    """One tensor of decoding step t (one head of it); the caches (and the keys and values made from a latent cache)
    with their new row, token t's, outlined (under a sliding window the cache's rows are the tokens it still holds,
    first … t). Cross-attention's cache is the source's tokens, by their own labels, with no new row."""
    step, cross = decoding.steps[t], decoding.case.cross
    cached = [decoding.case.key_tokens[i] for i in step.cached]  # the tokens whose keys and values the cache holds
    tensor = step[name]
    if head is not None and decoding.axes(name)[0] == "head":
        o = decoding.case.options
        kv = head // (o.heads // (o.kv_heads or o.heads))  # the key/value head query head `head` reads
        tensor = tensor[kv if name in KV else head]
    row_kind, col_kind = decoding.axes(name)[-2:]
    rows = cached if name in BY_CACHED else [decoding.case.tokens[t]]
    cols = cached if col_kind == "key" else [str(j + 1) for j in range(tensor.shape[-1])]
    said = {"t": t + 1, "first": step.first + 1, "keys": len(cached), "d_c": decoding.case.d_c}
    title = text(lang, f"decoding.title_{name}_cross", **said) if cross and name in CROSS_TITLES else None
    title = title or text(lang, f"decoding.title_{name}", **said)
    fig = figures.heatmap(tensor, rows, cols, row_kind, col_kind, title=title, lang=lang)
    return figures.highlight(fig, (len(cached) - 1,), None) if name in BY_CACHED and not cross else fig


def causal_heatmap(causal: Trace, head: int | None = None, lang: str = "en") -> go.Figure:
    """The whole causal computation's scores (n × n, of one head; its trace), to outline a row of (row_outlined);
    cross-attention's n × n_kv, target tokens down and source tokens across."""
    scores = causal["scores"]
    scores = scores if head is None or scores.dim() == 2 else scores[head]
    return figures.heatmap(scores, list(causal.case.tokens), list(causal.case.key_tokens), "query", "key", lang=lang)


def row_outlined(fig: go.Figure, t: int, lang: str = "en", first: int = 0, cross: bool = False) -> go.Figure:
    """A copy of causal_heatmap's figure titled for step t, with row t outlined from key `first` (the oldest the
    cache holds: 0 without a window) up to the diagonal (cross-attention's: across every source key): one outline
    (figures.highlight draws one per cell: 128 shapes took 2.3 s at t = 64)."""
    at = 0.5 if fig.layout.meta["image"] else -0.5  # an image's cells are at 1, 2, …; a heatmap's at 0, 1, …
    out = go.Figure(fig)
    out.update_layout(title_text=text(lang, "decoding.causal_title_cross" if cross else "decoding.causal_title",
                                      t=t + 1))  # fmt: skip
    last = fig.layout.meta["cols"] if cross else t + 1  # the key after the last outlined
    for line in ({"color": figures.HALO, "width": 6}, {"color": figures.HIGHLIGHT, "width": 3}):
        out.add_shape(type="rect", x0=first + at, x1=last + at, y0=t + at, y1=t + 1 + at, line=line)
    return out


def alignment(decoding: Decoding, t: int, head: int | None = None, lang: str = "en") -> go.Figure:
    """Cross-attention's alignment so far: the weights of target tokens 1 … t + 1 (one head's), each decoded step's
    row over the source tokens, target tokens down and source tokens across by their own labels; row t outlined.
    Each row says which source tokens that target token looked at (a translation's word alignment)."""
    case = decoding.case
    rows = [step["weights_t"] for step in decoding.steps[: t + 1]]  # (h?, 1, n_kv) each
    weights = torch.cat(rows, dim=-2)  # (h?, t + 1, n_kv)
    weights = weights if head is None or weights.dim() == 2 else weights[head]
    title = text(lang, "decoding.alignment_title", t=t + 1)
    fig = figures.heatmap(weights, list(case.tokens[: t + 1]), list(case.key_tokens), "query", "key", title, lang)
    return figures.highlight(fig, (t,), None)


def work_table(sizes: Sizes, n: int, lang: str = "en") -> pd.DataFrame:
    """Multiply-adds for each token with and without the cache, and the ratio; the first tokens and the last."""
    shown = [*range(min(n, MAX_ROWS_SHOWN)), *([n - 1] if n > MAX_ROWS_SHOWN else [])]
    rows = []
    for t in shown:
        with_cache, without = multiply_adds(sizes, t, cache=True), multiply_adds(sizes, t, cache=False)
        rows.append((t + 1, with_cache, without, f"{without / with_cache:.1f}×"))
    columns = [text(lang, f"decoding.work_{c}") for c in ("token", "with", "without", "ratio")]
    return pd.DataFrame(rows, columns=columns)


def memory_table(sizes: Sizes, tokens: int, lang: str = "en") -> pd.DataFrame:
    """The cache's bytes per token and after `tokens` tokens (under a sliding window, of the last `window` tokens
    alone: the cache evicts the others): with multi-head latent attention its latent first, then with the sizes'
    key/value heads and with a full key and value head per query head (no grouped-query attention), each caching
    keys and values."""
    rows = []
    if sizes.latent is not None:  # d_c numbers a token, whatever the heads
        formula = f"{sizes.latent} × {sizes.layers} × {sizes.bytes}"
        rows.append((text(lang, "decoding.memory_latent", d_c=sizes.latent), formula, cache_bytes_per_token(sizes),
                     cache_bytes(sizes, tokens)))  # fmt: skip
    for label, s in (("grouped", without_latent(sizes)), ("full", full_heads(sizes))):
        per_token = cache_bytes_per_token(s)
        widths = f"2 × {s.d_head}" if s.d_head == s.d_value_head else f"({s.d_head} + {s.d_value_head})"
        formula = f"{widths} × {s.layers} × {s.kv_heads} × {s.bytes}"
        rows.append((text(lang, f"decoding.memory_{label}", kv_heads=s.kv_heads), formula, per_token,
                     cache_bytes(s, tokens)))  # fmt: skip
    headers = ("kind", "formula") if sizes.latent is None else ("kind_latent", "formula_latent")
    after = "after" if sizes.source is None else "after_cross"  # cross-attention: the source's tokens, fixed
    said = {"tokens": tokens, "n_kv": sizes.source}
    per_token = "per_token" if sizes.source is None else "per_source_token"
    columns = [text(lang, f"decoding.memory_{c}", **said) for c in (*headers, per_token, after)]
    return pd.DataFrame(rows, columns=columns)
