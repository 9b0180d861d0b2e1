"""Attention in tiles (FlashAttention's online softmax): step 7's outputs, a query tile against a key tile at a time
(with cross-attention the score matrix is n × n_kv: query tiles over the target's tokens, key tiles over the
source's)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import torch

from ..base.case import Case, CaseError, with_options
from ..base.device import resolve_device, synchronize
from ..base.i18n import excerpt, msg
from ..base.record import Check, Record, Step, compare
from ..forward.compute import (
    Trace,
    latent_of,
    position_bias,
    positions,
    qk_normed,
    rope,
    rope_theta,
    scale_factor,
    tolerance,
)  # fmt: skip

MAX_TILES = 4096  # tile visits of one run (a Python loop): n = 1024 in blocks of 16, about a second on one core
KEEP_ALL_MAX_N = 64  # up to this n every visit is recorded; past it only the query tiles asked for (the page's one)


def default_block(n: int) -> int:
    """Two tiles a side up to n = 128 (the article's 3 × 3 case: a tile of 2, then one of 1, so a causal mask
    skips one), then FlashAttention's usual 64."""
    return min(64, max(1, math.ceil(n / 2)))


def check_block(value: object, n: int, name: str, source: bool = False) -> int:
    """A block size as a person typed it or a link gave it: a whole number from 1 to n, else a CaseError naming it
    (source: cross-attention's B_k, of the n_kv source tokens: said so)."""
    where = msg(f"tiles.where_{name}")  # the field, as the page labels it
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdecimal() and len(value.strip()) < 8:
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        said = {"value": excerpt(value), "n": n}
        raise CaseError(where, msg("tiles.error_whole_kv" if source else "tiles.error_whole", **said))
    if not 1 <= value <= n:
        raise CaseError(where, msg("tiles.error_range_kv" if source else "tiles.error_range", value=value, n=n))
    return value


def check_blocks(block_q: object, block_k: object, n: int, n_kv: int | None = None) -> tuple[int, int]:
    """Both block sizes checked, B_q against the n queries and B_k against the n_kv keys (None: n; cross-attention's
    source tokens), and not so small that the tiles are more than MAX_TILES."""
    keys = n if n_kv is None else n_kv
    b_q, b_k = check_block(block_q, n, "block_q"), check_block(block_k, keys, "block_k", n_kv is not None)
    if math.ceil(n / b_q) * math.ceil(keys / b_k) > MAX_TILES:
        tiles = math.ceil(n / b_q) * math.ceil(keys / b_k)
        raise CaseError(msg("tiles.where_blocks"), msg("tiles.error_many", tiles=tiles, most=MAX_TILES))
    return b_q, b_k


def case_blocks(case: Case, block_q: object = None, block_k: object = None) -> tuple[int, int]:
    """The case's block sizes checked (None: default_block of its queries, of its keys): B_k against cross-attention's
    n_kv source tokens."""
    b_q = default_block(case.n) if block_q is None else block_q
    b_k = default_block(case.n_kv) if block_k is None else block_k
    return check_blocks(b_q, b_k, case.n, case.n_kv if case.cross else None)


# Each tile's tensors have the head axis first, whatever the heads (h, …)
AXES = {
    "position_bias": ("query", "key"),
    "scores_uncapped": ("query", "key"),
    "scores": ("query", "key"),
    "terms": ("query", "key"),
    "m_before": ("query",),
    "m": ("query",),
    "rescale": ("query",),
    "l_before": ("query",),
    "l": ("query",),
    "partial_before": ("query", "value dim"),
    "partial": ("query", "value dim"),
}
# What each is made from: the tile's scores, and the running m, ℓ and partial output before it
MADE_FROM = {
    "scores_uncapped": ("position_bias",),  # and the tile's q · k, scaled (not recorded: made inside the tile)
    "scores": ("position_bias",),  # with a cap: from scores_uncapped (visit())
    "m": ("m_before", "scores"),
    "rescale": ("m_before", "m"),
    "terms": ("scores", "m"),
    "l": ("l_before", "rescale", "terms"),
    "partial": ("partial_before", "rescale", "terms"),
}
SKIPPED = "skipped: every score of the tile masked"


@dataclass(frozen=True, kw_only=True)
class Visit(Step):
    """Key tile j's pass over query tile i: the online softmax's step (i, j), named "i.j" from 1.

    Tensors, each with the head axis first (h, …): `scores` (h, b_q, b_k) the tile's scores (scaled, ALiBi's bias
    added and capped where the case has them: `position_bias`, `scores_uncapped`; masked);
    `m_before`, `m` the running maximum of each query's scores before and after; `rescale` = e^(m_before − m), what
    the sums so far are multiplied by; `l_before`, `l` the running sum of e^(s − m); `terms` (h, b_q, b_k) the tile's
    e^(s − m); `partial_before`, `partial` (h, b_q, d_v/h) the running sum of e^(s − m) · v (divided by ℓ at the end).
    """

    query_tile: int  # i, from 0
    key_tile: int  # j, from 0
    queries: range  # the tile's queries (rows of the score matrix)
    keys: range  # its keys (columns)
    skipped: bool  # every score of the tile masked: nothing computed, nothing read (causal FlashAttention's saving)


def visit(i: int, j: int, rows: range, cols: range, tensors: dict, device: str) -> Visit:
    """Visit (i, j) with its tensors on the CPU (none when the tile is skipped)."""
    name = f"{i + 1}.{j + 1}"
    reads = {k: tuple(p for p in parents if p in tensors) for k, parents in MADE_FROM.items() if k in tensors}
    if "scores_uncapped" in tensors:  # the cap came last
        reads["scores"] = ("scores_uncapped",)
    tensors = MappingProxyType({k: t.detach().cpu() for k, t in tensors.items()})
    notes = () if tensors else (SKIPPED,)
    title = f"query tile {i + 1}, key tile {j + 1}"
    return Visit(0, name, name, title, "", "", tensors, MappingProxyType(reads), device, notes=notes,
                 query_tile=i, key_tile=j, queries=rows, keys=cols, skipped=not tensors)  # fmt: skip


@dataclass(frozen=True)
class Tiled(Record):
    """The tiled run of a case: the visits recorded (in order), its outputs, and what it held."""

    AXES: ClassVar = AXES
    TITLE: ClassVar = "Attention in tiles"
    case: Case  # as computed: with the exact softmax (a weights override is not attention)
    block_q: int
    block_k: int
    steps: tuple[Visit, ...]  # the recorded ones: every visit, or those of the query tiles asked for
    recorded: tuple[int, ...] | None  # the query tiles whose visits are recorded; None: all
    outputs: torch.Tensor  # (n, d_out): as step 7's
    head_outputs: torch.Tensor  # (h, n, d_v/h): each head's, before the heads are joined (and w_out)
    skipped: tuple[tuple[int, int], ...]  # (query tile, key tile) of every tile skipped
    tile_bytes: int  # the most bytes the loop's tensors held at once (a tile's scores and terms, m, ℓ, the partial)
    device: str
    seconds: float

    def axes(self, name: str) -> tuple[str, ...]:
        return ("head", *AXES[name])  # whatever the heads

    @property
    def visits(self) -> tuple[Visit, ...]:
        return self.steps

    @property
    def query_tiles(self) -> int:
        return math.ceil(self.case.n / self.block_q)

    @property
    def key_tiles(self) -> int:
        return math.ceil(self.case.n_kv / self.block_k)  # cross-attention: over the source's n_kv tokens

    @property
    def tiles(self) -> int:
        return self.query_tiles * self.key_tiles

    def behind_window(self, query_tile: int, key_tile: int) -> bool:
        """Whether a tile's every key is before the sliding window of every query of it (i − j ≥ window): skipped
        for the window's sake (a tile above the diagonal is the causal mask's)."""
        window = self.case.options.window
        last_key = min((key_tile + 1) * self.block_k, self.case.n_kv) - 1
        return window is not None and query_tile * self.block_q - last_key >= window

    def visit(self, query_tile: int, key_tile: int) -> Visit | None:
        """A recorded visit by its tile; None when it was not recorded."""
        return next((v for v in self.steps if (v.query_tile, v.key_tile) == (query_tile, key_tile)), None)

    def heading(self) -> str:
        recorded = (
            "" if self.recorded is None else f" (recorded: query tiles {', '.join(str(i + 1) for i in self.recorded)})"
        )
        n = f"n = {self.case.n}" + (f", n_kv = {self.case.n_kv}" if self.case.cross else "")
        return (f"{n}, tiles of {self.block_q} × {self.block_k}: {self.tiles} tiles, {len(self.skipped)} "
                f"skipped{recorded} · {self.case.options.dtype} · {self.device}")  # fmt: skip


def tiled(case: Case, block_q: int | None = None, block_k: int | None = None, keep: tuple[int, ...] | None = None):
    """Attention a tile at a time with the online softmax: for each query tile, the key tiles in order, each
    updating the running maximum m, the running sum ℓ and the partial output; output = partial / ℓ. No n × n tensor
    is made. With gpt-oss's sinks each query's m and ℓ start from its head's sink (m = s_h, ℓ = e^0 = 1, no value).
    Cross-attention's key tiles are over the source's n_kv keys. `keep`: the query tiles whose visits are recorded
    (None: all up to KEEP_ALL_MAX_N, none past it)."""
    case = case if case.options.weights_override is None else with_options(case, weights_override=None)
    o, n, n_kv = case.options, case.n, case.n_kv
    b_q, b_k = case_blocks(case, block_q, block_k)
    keep = (tuple(range(math.ceil(n / b_q))) if n <= KEEP_ALL_MAX_N else ()) if keep is None else keep
    device = resolve_device(o.device)
    queries, keys, values = _qkv(case, device)  # (h, n, d_k/h), (h, n, d_k/h), (h, n, d_v/h)
    dtype = queries.dtype
    sinks = None if o.sinks is None else torch.tensor(o.sinks, dtype=dtype, device=device)
    visits, skipped, peak = [], [], 0
    head_outputs = values.new_empty((values.shape[0], n, values.shape[-1]))  # (h, n, d_v/h): a query tile at a time
    synchronize(device)
    start = time.perf_counter()
    for i, q0 in enumerate(range(0, n, b_q)):
        rows = range(q0, min(q0 + b_q, n))
        q = queries[:, q0 : rows.stop]  # (h, b_q, d)
        # each query's largest score so far, m, and ℓ, the sum of e^(s − m) so far (h, b_q): −∞ and 0, or the sink
        m = q.new_full(q.shape[:-1], float("-inf")) if sinks is None else sinks[:, None].expand(q.shape[:-1]).clone()
        ell = q.new_zeros(q.shape[:-1]) if sinks is None else q.new_ones(q.shape[:-1])  # the sink's e^(s_h − s_h)
        partial = q.new_zeros((*q.shape[:-1], values.shape[-1]))  # (h, b_q, d_v): the sum of e^(s − m) · v so far
        for j, k0 in enumerate(range(0, n_kv, b_k)):
            cols = range(k0, min(k0 + b_k, n_kv))
            allowed = _tile_mask(o, rows, cols, device)  # (b_q, b_k) bool, or None: every key allowed
            if allowed is not None and not allowed.any():  # the whole tile masked (above the diagonal, behind the
                skipped.append((i, j))  # window): skip it
                if i in keep:
                    visits.append(visit(i, j, rows, cols, {}, str(device)))
                continue
            s, parts = _tile_scores(q, keys[:, k0 : cols.stop], rows, cols, case, allowed)  # (h, b_q, b_k)
            m_new = torch.maximum(m, s.amax(dim=-1))  # (h, b_q)
            # a query with no key allowed yet keeps m = −∞: shift by 0 there, so that −∞ − (−∞) makes no NaN
            shift = m_new.masked_fill(m_new == float("-inf"), 0.0)
            rescale = torch.exp(m - shift)  # (h, b_q): the sums so far were made under m; now they are under m_new
            terms = torch.exp(s - shift[..., None])  # (h, b_q, b_k): e^(s − m_new), 0 where masked
            l_new = ell * rescale + terms.sum(dim=-1)
            partial_new = partial * rescale[..., None] + terms @ values[:, k0 : cols.stop]  # (h, b_q, d_v)
            held = (s, terms, m, m_new, rescale, ell, l_new, partial, partial_new, *parts.values())
            held += () if allowed is None else (allowed,)
            peak = max(peak, sum(t.numel() * t.element_size() for t in held))
            if i in keep:
                tensors = parts | {"scores": s, "m_before": m, "m": m_new, "rescale": rescale, "l_before": ell}
                tensors |= {"l": l_new, "terms": terms, "partial_before": partial, "partial": partial_new}
                visits.append(visit(i, j, rows, cols, tensors, str(device)))
            m, ell, partial = m_new, l_new, partial_new
        # a query that may attend to no key has ℓ = 0 and partial 0: its output 0, as fused attention gives
        head_outputs[:, q0 : rows.stop] = partial / torch.where(ell > 0, ell, 1.0)[..., None]
    synchronize(device)
    seconds = time.perf_counter() - start
    concat = head_outputs.transpose(0, 1).flatten(1)  # (n, d_v): the heads side by side, as step 7 joins them
    outputs = concat if o.w_out is None else concat @ torch.tensor(o.w_out, dtype=concat.dtype, device=device)
    kept = None if len(keep) == math.ceil(n / b_q) else tuple(keep)
    return Tiled(
        case, b_q, b_k, tuple(visits), kept, outputs.cpu(), head_outputs.cpu(), tuple(skipped), peak, str(device),
        seconds,
    )  # fmt: skip


def _tile_scores(q, k, rows: range, cols: range, case: Case, allowed) -> tuple[torch.Tensor, dict]:
    """One tile's scores (h, b_q, b_k), as step 4 makes them for its rows and columns alone: scaled, ALiBi's or T5's
    bias from the tile's absolute query and key indices, the cap, the mask; and the parts before the end
    (position_bias, scores_uncapped) where the case has them."""
    o, parts = case.options, {}
    s = (q @ k.mT) * (scale_factor(case) / o.temperature)  # (h, b_q, b_k): this tile's scores alone
    if o.biased:
        parts["position_bias"] = position_bias(o, rows, cols, s.dtype, q.device)  # (h, b_q, b_k)
        s = s + parts["position_bias"]
    if o.softcap is not None:
        parts["scores_uncapped"] = s
        s = o.softcap * torch.tanh(s / o.softcap)
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    return s, parts


def _qkv(case: Case, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Steps 1-3 (and the q/k norm, RoPE) as the eight steps make them, each with a head axis: (h, n, d/h). With
    multi-head latent attention the keys and values are made from the latent c = x W_DKV (normed where the case
    has the latent's norm), as step 3 makes them; with cross-attention from the source's x_kv (h, n_kv, d/h)."""
    o, dtype = case.options, getattr(torch, case.options.dtype)
    h, g = o.heads, o.kv_heads or o.heads
    x = torch.tensor(case.x, dtype=dtype, device=device)  # (n, d_in)
    x_kv = x if not case.cross else torch.tensor(case.x_kv, dtype=dtype, device=device)  # (n_kv, d_in): the source
    w_query, w_key, w_value = (
        torch.tensor(w, dtype=dtype, device=device) for w in (case.w_query, case.w_key, case.w_value)
    )
    w_latent = None if o.w_latent is None else torch.tensor(o.w_latent, dtype=dtype, device=device)  # (d_in, d_c)
    read, _ = latent_of(o, x_kv, w_latent)  # what keys and values are made from: x (x_kv), or the latent (n, d_c)
    queries = (x @ w_query).unflatten(-1, (h, -1)).transpose(0, 1)  # (h, n, d_k/h)
    keys, values = ((read @ w).unflatten(-1, (g, -1)).transpose(0, 1) for w in (w_key, w_value))  # (g, n, d/g)
    keys, values = keys.repeat_interleave(h // g, dim=0), values.repeat_interleave(h // g, dim=0)  # (h, n, d/h)
    queries, keys = qk_normed(o, queries, keys)  # a q/k norm's step 3a, where the case has it
    if o.rope_base is not None:
        t, theta = positions(case).to(device), rope_theta(o, case.d_rot)  # partial rotary: the first d_rot dims
        queries, keys = rope(queries, t, theta), rope(keys, t, theta)
    return queries, keys, values


def _tile_mask(o, rows: range, cols: range, device: torch.device) -> torch.Tensor | None:
    """The tile's part of the mask and the sliding window (True: the query may attend to the key), made for the
    tile alone; None: every key of the tile allowed."""
    r = torch.arange(rows.start, rows.stop, device=device)[:, None]
    c = torch.arange(cols.start, cols.stop, device=device)[None, :]
    allowed = None
    if (o.mask == "causal" or o.window is not None) and cols.stop - 1 > rows.start:  # some key after some query
        allowed = r >= c  # query i may attend to keys 1..i
    if isinstance(o.mask, tuple):
        given = torch.tensor([row[cols.start : cols.stop] for row in o.mask[rows.start : rows.stop]], device=device)
        allowed = given != 0 if allowed is None else allowed & (given != 0)
    if o.window is not None and rows.stop - 1 - cols.start >= o.window:  # some key before some query's window
        inside = r - c < o.window  # keys i − window < j
        allowed = inside if allowed is None else allowed & inside
    return allowed


def check(run: Tiled, exact: Trace) -> Check:
    """Compare the tiled outputs with step 7's of the same case (the trace with the exact softmax), each number
    within the one rule's tolerance (base/tolerance.py): the tiles sum the same terms in another order."""
    if exact.case != run.case:
        raise ValueError("the trace is not of the case as tiled (the exact softmax)")
    return compare("step 7", run.outputs, exact.outputs, tolerance(exact.case, exact.__getitem__))


def step_7_heads(trace: Trace) -> torch.Tensor:
    """Step 7's outputs of each head, before the heads are joined and w_out: (h, n, d_v/h)."""
    step = trace.step("outputs").tensors
    if "head_outputs" in step:
        return step["head_outputs"]
    return step.get("concat", step["outputs"])[None]


def matrix_bytes(trace: Trace) -> int:
    """The bytes of the trace's n × n tensors (each head's scores, weights), each storage counted once."""
    seen, total = set(), 0
    for step in trace.steps:
        for name, t in step.tensors.items():
            square = trace.axes(name)[-2:] == ("query", "key")  # scores_raw, scores, weights_exact, weights
            if square and isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                seen.add(t.untyped_storage().data_ptr())
                total += t.numel() * t.element_size()
    return total


def estimates(run: Tiled, query: int, head: int) -> torch.Tensor:
    """Query's output after each key tile, partial / ℓ, (key tiles, d_v/h): how it converges to step 7's
    (a skipped tile leaves it as it was; before any key is allowed, 0). Needs the query's tile recorded."""
    i = query // run.block_q
    r, rows, last = query - i * run.block_q, [], None
    for j in range(run.key_tiles):
        v = run.visit(i, j)
        if v is None:
            raise KeyError(f"query tile {i + 1} was not recorded")
        if not v.skipped:
            ell = v.tensors["l"][head, r]
            last = v.tensors["partial"][head, r] / (ell if ell > 0 else 1.0)
        rows.append(torch.zeros(run.head_outputs.shape[-1], dtype=run.head_outputs.dtype) if last is None else last)
    return torch.stack(rows)
