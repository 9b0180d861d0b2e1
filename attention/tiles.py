"""Attention in tiles (FlashAttention's online softmax): step 7's outputs, a query tile against a key tile at a time."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import torch

from .case import Case, CaseError, with_options
from .core import Trace, positions, rope, scale_factor
from .devices import resolve_device, synchronize
from .i18n import excerpt, msg, text
from .numbers import approx

MAX_TILES = 4096  # tile visits of one run (a Python loop): n = 1024 in blocks of 16, about a second on one core
KEEP_ALL_MAX_N = 64  # up to this n every visit is recorded; past it only the query tiles asked for (the page's one)
TOLERANCE = {"float32": 1e-6, "float64": 1e-12}  # |tiled − step 7| relative to step 7's largest |number|
PARAMS = ("bq", "bk", "tile")  # the link's block sizes and tile ("2.1": query tile 2, key tile 1, from 1)


def default_block(n: int) -> int:
    """Two tiles a side up to n = 128 (the article's 3 × 3 case: a tile of 2, then one of 1, so a causal mask
    skips one), then FlashAttention's usual 64."""
    return min(64, max(1, math.ceil(n / 2)))


def check_block(value: object, n: int, name: str) -> int:
    """A block size as a person typed it or a link gave it: a whole number from 1 to n, else a CaseError naming it."""
    where = msg(f"tiles.where_{name}")  # the field, as the page labels it
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdecimal() and len(value.strip()) < 8:
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise CaseError(where, msg("tiles.error_whole", value=excerpt(value), n=n))
    if not 1 <= value <= n:
        raise CaseError(where, msg("tiles.error_range", value=value, n=n))
    return value


def check_blocks(block_q: object, block_k: object, n: int) -> tuple[int, int]:
    """Both block sizes checked, and not so small that the tiles are more than MAX_TILES."""
    b_q, b_k = check_block(block_q, n, "block_q"), check_block(block_k, n, "block_k")
    if math.ceil(n / b_q) * math.ceil(n / b_k) > MAX_TILES:
        tiles = math.ceil(n / b_q) * math.ceil(n / b_k)
        raise CaseError(msg("tiles.where_blocks"), msg("tiles.error_many", tiles=tiles, most=MAX_TILES))
    return b_q, b_k


@dataclass(frozen=True)
class Visit:
    """Key tile j's pass over query tile i: the online softmax's step (i, j), with what it read and made.

    Tensors, each with the head axis first (h, …): `scores` (h, b_q, b_k) the tile's scores (scaled, masked);
    `m_before`, `m` the running maximum of each query's scores before and after; `rescale` = e^(m_before − m), what
    the sums so far are multiplied by; `l_before`, `l` the running sum of e^(s − m); `terms` (h, b_q, b_k) the tile's
    e^(s − m); `partial_before`, `partial` (h, b_q, d_v/h) the running sum of e^(s − m) · v (divided by ℓ at the end).
    """

    query_tile: int  # i, from 0
    key_tile: int  # j, from 0
    queries: range  # the tile's queries (rows of the score matrix)
    keys: range  # its keys (columns)
    skipped: bool  # every score of the tile masked: nothing computed, nothing read (causal FlashAttention's saving)
    tensors: Mapping[str, torch.Tensor]  # empty when skipped


@dataclass(frozen=True)
class Tiled:
    """The tiled run of a case: the visits recorded (in order), its outputs, and what it held."""

    case: Case  # as computed: with the exact softmax (a weights override is not attention)
    block_q: int
    block_k: int
    visits: tuple[Visit, ...]  # the recorded ones: every visit, or those of the query tiles asked for
    recorded: tuple[int, ...] | None  # the query tiles whose visits are recorded; None: all
    outputs: torch.Tensor  # (n, d_out): as step 7's
    head_outputs: torch.Tensor  # (h, n, d_v/h): each head's, before the heads are joined (and w_out)
    skipped: tuple[tuple[int, int], ...]  # (query tile, key tile) of every tile skipped
    tile_bytes: int  # the most bytes the loop's tensors held at once (a tile's scores and terms, m, ℓ, the partial)
    device: str
    seconds: float

    @property
    def query_tiles(self) -> int:
        return math.ceil(self.case.n / self.block_q)

    @property
    def key_tiles(self) -> int:
        return math.ceil(self.case.n / self.block_k)

    @property
    def tiles(self) -> int:
        return self.query_tiles * self.key_tiles

    def visit(self, query_tile: int, key_tile: int) -> Visit | None:
        """A recorded visit by its tile; None when it was not recorded."""
        for v in self.visits:
            if (v.query_tile, v.key_tile) == (query_tile, key_tile):
                return v
        return None

    def _repr_html_(self) -> str:
        """The tiles, what each did (m and ℓ of its first query), and the outputs' shape: how it shows in Jupyter."""
        from .notebook import tiled_html  # only a notebook needs it

        return tiled_html(self)


def tiled(case: Case, block_q: int | None = None, block_k: int | None = None, keep: tuple[int, ...] | None = None):
    """Attention a tile at a time with the online softmax: for each query tile, the key tiles in order, each
    updating the running maximum m, the running sum ℓ and the partial output; output = partial / ℓ. No n × n tensor
    is made. `keep`: the query tiles whose visits are recorded (None: all up to KEEP_ALL_MAX_N, none past it)."""
    case = case if case.options.weights_override is None else with_options(case, weights_override=None)
    o, n = case.options, case.n
    b_q, b_k = check_blocks(*(default_block(n) if b is None else b for b in (block_q, block_k)), n)
    keep = (tuple(range(math.ceil(n / b_q))) if n <= KEEP_ALL_MAX_N else ()) if keep is None else keep
    device = resolve_device(o.device)
    queries, keys, values = _qkv(case, device)  # (h, n, d_k/h), (h, n, d_k/h), (h, n, d_v/h)
    factor = scale_factor(case) / o.temperature
    visits, skipped, peak = [], [], 0
    head_outputs = values.new_empty(values.shape)  # (h, n, d_v/h): filled a query tile at a time
    synchronize(device)
    start = time.perf_counter()
    for i, q0 in enumerate(range(0, n, b_q)):
        rows = range(q0, min(q0 + b_q, n))
        q = queries[:, q0 : rows.stop]  # (h, b_q, d)
        m = q.new_full(q.shape[:-1], float("-inf"))  # (h, b_q): each query's largest score so far
        ell = q.new_zeros(q.shape[:-1])  # (h, b_q): ℓ, the sum of e^(s − m) so far
        partial = q.new_zeros((*q.shape[:-1], values.shape[-1]))  # (h, b_q, d_v): the sum of e^(s − m) · v so far
        for j, k0 in enumerate(range(0, n, b_k)):
            cols = range(k0, min(k0 + b_k, n))
            allowed = _tile_mask(o.mask, rows, cols, device)  # (b_q, b_k) bool, or None: every key allowed
            if allowed is not None and not allowed.any():  # the whole tile masked: skip it (causal: above the diagonal)
                skipped.append((i, j))
                if i in keep:
                    visits.append(Visit(i, j, rows, cols, True, MappingProxyType({})))
                continue
            s = (q @ keys[:, k0 : cols.stop].mT) * factor  # (h, b_q, b_k): this tile's scores alone
            if allowed is not None:
                s = s.masked_fill(~allowed, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))  # (h, b_q)
            # a query with no key allowed yet keeps m = −∞: shift by 0 there, so that −∞ − (−∞) makes no NaN
            shift = m_new.masked_fill(m_new == float("-inf"), 0.0)
            rescale = torch.exp(m - shift)  # (h, b_q): the sums so far were made under m; now they are under m_new
            terms = torch.exp(s - shift[..., None])  # (h, b_q, b_k): e^(s − m_new), 0 where masked
            l_new = ell * rescale + terms.sum(dim=-1)
            partial_new = partial * rescale[..., None] + terms @ values[:, k0 : cols.stop]  # (h, b_q, d_v)
            held = (s, terms, m, m_new, rescale, ell, l_new, partial, partial_new) + (
                () if allowed is None else (allowed,)
            )
            peak = max(peak, sum(t.numel() * t.element_size() for t in held))
            if i in keep:
                tensors = {"scores": s, "m_before": m, "m": m_new, "rescale": rescale, "l_before": ell, "l": l_new}
                tensors |= {"terms": terms, "partial_before": partial, "partial": partial_new}
                tensors = {name: t.detach().cpu() for name, t in tensors.items()}
                visits.append(Visit(i, j, rows, cols, False, MappingProxyType(tensors)))
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


def _qkv(case: Case, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Steps 1-3 (and RoPE) as the eight steps make them, each with a head axis: (h, n, d/h)."""
    o, dtype = case.options, getattr(torch, case.options.dtype)
    h, g = o.heads, o.kv_heads or o.heads
    x = torch.tensor(case.x, dtype=dtype, device=device)  # (n, d_in)
    w_query, w_key, w_value = (
        torch.tensor(w, dtype=dtype, device=device) for w in (case.w_query, case.w_key, case.w_value)
    )
    queries = (x @ w_query).unflatten(-1, (h, -1)).transpose(0, 1)  # (h, n, d_k/h)
    keys, values = ((x @ w).unflatten(-1, (g, -1)).transpose(0, 1) for w in (w_key, w_value))  # (g, n, d/g)
    keys, values = keys.repeat_interleave(h // g, dim=0), values.repeat_interleave(h // g, dim=0)  # (h, n, d/h)
    if o.rope_base is not None:
        t = positions(case).to(device)
        queries, keys = rope(queries, t, o.rope_base), rope(keys, t, o.rope_base)
    return queries, keys, values


def _tile_mask(mask, rows: range, cols: range, device: torch.device) -> torch.Tensor | None:
    """The tile's part of the mask (True: the query may attend to the key), made for the tile alone."""
    if mask is None:
        return None
    if mask == "causal":  # query i may attend to keys 1..i
        if cols.stop - 1 <= rows.start:  # the tile is on or below the diagonal's first row: every key allowed
            return None
        r = torch.arange(rows.start, rows.stop, device=device)[:, None]
        return r >= torch.arange(cols.start, cols.stop, device=device)[None, :]
    return torch.tensor([row[cols.start : cols.stop] for row in mask[rows.start : rows.stop]], device=device) != 0


@dataclass(frozen=True)
class Agreement:
    """The tiled outputs against step 7's: the largest difference, relative to step 7's largest number."""

    difference: float
    relative: float
    tolerance: float
    agrees: bool


def check(run: Tiled, outputs: torch.Tensor) -> Agreement:
    """Compare the tiled outputs with step 7's outputs of the same case (with the exact softmax)."""
    reference = outputs.detach().cpu()
    difference = (run.outputs - reference).abs().max().item() if reference.numel() else 0.0
    size = reference.abs().max().item() if reference.numel() else 0.0
    relative = difference / size if size > 0 else difference
    tolerance = TOLERANCE[run.case.options.dtype]
    return Agreement(difference, relative, tolerance, relative <= tolerance)


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


def explain(run: Tiled, visit: Visit, head: int, row: int, lang: str = "en") -> tuple[str, ...]:
    """The arithmetic of one query's step in a visit, with its numbers: the new maximum, the rescaling, ℓ, and the
    partial output's first number (row: the query's place in the tile, from 0)."""
    tile = visit.key_tile + 1  # as the page counts key tiles, from 1; m₀, ℓ₀ are before the first
    if visit.skipped:
        return (text(lang, "tiles.explain_skipped", tile=tile),)
    j, i = _sub(tile), _sub(tile - 1)
    t = {name: tensor[head, row] for name, tensor in visit.tensors.items()}
    m_old, m_new, l_old, l_new, rescale = (t[k].item() for k in ("m_before", "m", "l_before", "l", "rescale"))
    s = [v for v in t["scores"].tolist() if v != float("-inf")]  # the keys this query may attend to in the tile
    m, r = approx(m_new), approx(rescale)
    lines = [text(lang, "tiles.explain_m", j=j, i=i, m_old=approx(m_old), s=_some(s), m=m)]
    lines.append(text(lang, "tiles.explain_rescale", j=j, i=i, m_old=approx(m_old), m=m, rescale=r))
    terms = " + ".join(f"e^({approx(v)} − {m})" for v in s[:4]) + (" + …" if len(s) > 4 else "")
    total = sum(math.exp(v - m_new) for v in s) if math.isfinite(m_new) else 0.0
    said = {"l_old": approx(l_old), "rescale": r, "terms": terms or "0", "scaled": approx(l_old * rescale)}
    lines.append(text(lang, "tiles.explain_l", tile=tile, j=j, i=i, **said, total=approx(total), l=approx(l_new)))
    before, after = approx(t["partial_before"][0].item()), t["partial"][0].item()
    lines.append(text(lang, "tiles.explain_partial", j=j, i=i, before=before, rescale=r, after=approx(after)))
    if l_new > 0:
        estimate = approx(after / l_new)
        lines.append(
            text(lang, "tiles.explain_estimate", j=j, partial=approx(after), l=approx(l_new), estimate=estimate)
        )
    return tuple(lines)


def _sub(number: int) -> str:
    """A tile's number as a subscript: ℓ₂."""
    return str(number).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _some(values: list[float]) -> str:
    """The tile's scores of a query, written: all of them up to six, else the first three, …, the largest."""
    if len(values) <= 6:
        return ", ".join(map(approx, values)) or "−∞"
    return f"{', '.join(map(approx, values[:3]))}, …, {approx(max(values))}"


def clamp_tile(tile: tuple[int, int], n: int, blocks: tuple[int, int]) -> tuple[int, int]:
    """A tile (query tile, key tile) moved inside the tiles of new block sizes."""
    return min(tile[0], math.ceil(n / blocks[0]) - 1), min(tile[1], math.ceil(n / blocks[1]) - 1)


def from_link(
    block_q: str | None, block_k: str | None, tile: str | None, n: int
) -> tuple[tuple[int, int] | None, tuple[int, int]]:
    """A link's block sizes and tile ("2.1", from 1) checked: (blocks or None for the defaults, tile from 0)."""
    blocks = None
    if block_q or block_k:
        blocks = check_blocks(block_q or default_block(n), block_k or default_block(n), n)
    b_q, b_k = blocks or (default_block(n), default_block(n))
    if not tile:
        return blocks, (0, 0)
    parts = tile.split(".")
    limits = (math.ceil(n / b_q), math.ceil(n / b_k))
    if len(parts) != 2 or not all(p.isascii() and p.isdecimal() and len(p) < 6 for p in parts):
        raise CaseError(msg("tiles.where_tile"), msg("tiles.error_tile", value=excerpt(tile), **_most(limits)))
    i, j = (int(p) for p in parts)
    if not (1 <= i <= limits[0] and 1 <= j <= limits[1]):
        raise CaseError(msg("tiles.where_tile"), msg("tiles.error_tile", value=excerpt(tile), **_most(limits)))
    return blocks, (i - 1, j - 1)


def _most(limits: tuple[int, int]) -> dict[str, int]:
    return {"query_tiles": limits[0], "key_tiles": limits[1]}


def link(blocks: tuple[int, int] | None, tile: tuple[int, int]) -> dict[str, str | None]:
    """The link's parameters for block sizes and a tile (None: the default, left out)."""
    b_q, b_k = blocks or (None, None)
    return {
        "bq": b_q and str(b_q),
        "bk": b_k and str(b_k),
        "tile": None if tile == (0, 0) else f"{tile[0] + 1}.{tile[1] + 1}",
    }


def tiles_text(case: Case, block_q: object = None, block_k: object = None) -> tuple[str, bool]:
    """The CLI's report: each tile's m and ℓ (of its first query, head 1; every tile up to KEEP_ALL_MAX_N), the
    skipped tiles, and the check against step 7 of the eight steps; and whether they agree."""
    from .core import attend  # the eight steps, for their step 7

    n = case.n
    b_q, b_k = check_blocks(*(default_block(n) if b is None else b for b in (block_q, block_k)), n)
    run = tiled(case, b_q, b_k)
    agreement = check(run, attend(run.case).outputs)
    lines = [
        f"tiles of {b_q} × {b_k}: {run.query_tiles} query tiles × {run.key_tiles} key tiles = {run.tiles}, "
        f"{len(run.skipped)} skipped (wholly masked)"
    ]
    for v in run.visits:
        where = f"query tile {v.query_tile + 1}, key tile {v.key_tile + 1}"
        if v.skipped:
            lines.append(f"{where}: skipped")
            continue
        t = {k: approx(v.tensors[k][0, 0].item()) for k in ("m_before", "m", "rescale", "l_before", "l")}
        lines.append(
            f"{where}: m {t['m_before']} → {t['m']}, rescale e^(m_old − m_new) = {t['rescale']}, "
            f"ℓ {t['l_before']} → {t['l']} (query {v.queries.start + 1}, head 1)"
        )
    verdict = "equal step 7's" if agreement.agrees else "DIFFER from step 7's"
    lines.append(
        f"tiled outputs {verdict}: largest difference {agreement.difference:.3g}, {agreement.relative:.3g} of step 7's "
        f"largest number (tolerance {agreement.tolerance:g})"
    )
    return "\n".join(lines), agreement.agrees


def size_text(nbytes: int) -> str:
    """Bytes as a person reads them: 108 B, 69.3 KiB, 12 MiB."""
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes} B"
