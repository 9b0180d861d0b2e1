"""Pure builders for the Decoding page: a decoding step's cache, scores and output as heatmaps, the full causal
score matrix with row t outlined, and the work and memory each way as tables. No st.* calls."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

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


def step_heatmap(decoding: Decoding, t: int, name: str, head: int | None = None, lang: str = "en") -> go.Figure:
    """One tensor of decoding step t (one head of it); the caches (and the keys and values made from a latent cache)
    with their new row, token t's, outlined (under a sliding window the cache's rows are the tokens it still holds,
    first … t)."""
    step = decoding.steps[t]
    cached = [decoding.case.tokens[i] for i in step.cached]  # the tokens whose keys and values the cache holds
    tensor = step[name]
    if head is not None and decoding.axes(name)[0] == "head":
        o = decoding.case.options
        kv = head // (o.heads // (o.kv_heads or o.heads))  # the key/value head query head `head` reads
        tensor = tensor[kv if name in KV else head]
    row_kind, col_kind = decoding.axes(name)[-2:]
    rows = cached if name in BY_CACHED else [decoding.case.tokens[t]]
    cols = cached if col_kind == "key" else [str(j + 1) for j in range(tensor.shape[-1])]
    said = {"t": t + 1, "first": step.first + 1, "keys": len(cached), "d_c": decoding.case.d_c}
    fig = figures.heatmap(tensor, rows, cols, row_kind, col_kind, title=text(lang, f"decoding.title_{name}", **said),
                          lang=lang)  # fmt: skip
    return figures.highlight(fig, (len(cached) - 1,), None) if name in BY_CACHED else fig


def causal_heatmap(causal: Trace, head: int | None = None, lang: str = "en") -> go.Figure:
    """The whole causal computation's scores (n × n, of one head; its trace), to outline a row of (row_outlined)."""
    scores = causal["scores"]
    scores = scores if head is None or scores.dim() == 2 else scores[head]
    tokens = list(causal.case.tokens)
    return figures.heatmap(scores, tokens, tokens, "query", "key", lang=lang)


def row_outlined(fig: go.Figure, t: int, lang: str = "en", first: int = 0) -> go.Figure:
    """A copy of causal_heatmap's figure titled for step t, with row t outlined from key `first` (the oldest the
    cache holds: 0 without a window) up to the diagonal: one outline (figures.highlight draws one per cell: 128
    shapes took 2.3 s at t = 64)."""
    at = 0.5 if fig.layout.meta["image"] else -0.5  # an image's cells are at 1, 2, …; a heatmap's at 0, 1, …
    out = go.Figure(fig)
    out.update_layout(title_text=text(lang, "decoding.causal_title", t=t + 1))
    for line in ({"color": figures.HALO, "width": 6}, {"color": figures.HIGHLIGHT, "width": 3}):
        out.add_shape(type="rect", x0=first + at, x1=t + 1 + at, y0=t + at, y1=t + 1 + at, line=line)
    return out


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
    columns = [text(lang, f"decoding.memory_{c}", tokens=tokens) for c in (*headers, "per_token", "after")]
    return pd.DataFrame(rows, columns=columns)
