"""Presets (the article's example, a seeded random case), resizing a case while keeping its numbers, and a case's
keys and values made multi-head latent attention (DeepSeek's MLA) and back."""

from __future__ import annotations

import torch

from .case import Case, CaseError, case_to_dict, default_tokens, parse_case, rotary_dims
from .i18n import msg

# The article's numbers, as printed in the seed.
ARTICLE_X = ((1, 0, 1, 0), (0, 2, 0, 2), (1, 1, 1, 1))
ARTICLE_W_KEY = ((0, 0, 1), (1, 1, 0), (0, 1, 0), (1, 1, 0))
ARTICLE_W_QUERY = ((1, 0, 1), (1, 0, 0), (0, 0, 1), (0, 1, 1))
ARTICLE_W_VALUE = ((0, 2, 0), (0, 3, 0), (1, 0, 3), (1, 1, 0))
ARTICLE_ROUNDED_WEIGHTS = ((0.0, 0.5, 0.5), (0.0, 1.0, 0.0), (0.0, 0.9, 0.1))  # "for readability"

PRESETS = ("article", "random")  # what preset() builds (the app's presets are its origins: attention/app/origins)


def article() -> Case:
    """The article's inputs and weights, with its rounded softmax as the weights override."""
    return parse_case(
        {
            "format": "attention-case/1",
            "x": ARTICLE_X,
            "w_query": ARTICLE_W_QUERY,
            "w_key": ARTICLE_W_KEY,
            "w_value": ARTICLE_W_VALUE,
            "options": {"weights_override": ARTICLE_ROUNDED_WEIGHTS},
        }
    )


def random_case(n: int = 3, d_in: int = 4, d_k: int = 3, d_v: int = 3, seed: int = 0, **options) -> Case:
    """Numbers from a seeded local generator (the global RNG is never touched), one decimal for readability. With
    kv_heads (grouped-query attention), w_key has kv_heads key heads as wide as a query head; w_value is d_v wide."""
    generator = torch.Generator().manual_seed(seed)

    def draw(rows: int, cols: int) -> list[list[float]]:
        return _round(torch.randn(rows, cols, generator=generator, dtype=torch.float64))

    return parse_case(
        {
            "format": "attention-case/1",
            "x": draw(n, d_in),
            "w_query": draw(d_in, d_k),
            "w_key": draw(d_in, d_k // options.get("heads", 1) * options.get("kv_heads", options.get("heads", 1))),
            "w_value": draw(d_in, d_v),
            "options": options,
        }
    )


def preset(name: str, **sizes) -> Case:
    """One of PRESETS: the article's case, or a random one at these sizes."""
    if name not in PRESETS:
        raise ValueError(f"{name!r} is not one of {', '.join(PRESETS)}")
    return article() if name == "article" else random_case(**sizes)


def resize(
    case: Case, n: int, d_in: int, d_k: int, d_v: int, fill: str = "zeros", seed: int = 0, n_kv: int | None = None
) -> Case:
    """The case at new sizes: numbers that still fit are kept, new cells are zeros or seeded random numbers."""
    return parse_case(resize_grids(case_to_dict(case), n, d_in, d_k, d_v, fill, seed, n_kv))


def resize_grids(
    case: dict, n: int, d_in: int, d_k: int, d_v: int, fill: str = "zeros", seed: int = 0, n_kv: int | None = None
) -> dict:
    """resize() on a case file's plain values, which may hold not-yet-valid entries (kept as they are).

    An override or an explicit mask that no longer fits is dropped (its shape is n × n_kv); w_out follows d_v. With a
    latent (multi-head latent attention), W_DKV follows d_in, and w_key and w_value (W_UK, W_UV) keep its d_c rows.
    Cross-attention's x_kv follows d_in, and n_kv rows (None: as many as it has); n resizes x alone.
    """
    generator = torch.Generator().manual_seed(seed)

    def fit(m: list[list], rows: int, cols: int) -> list[list]:
        return _fit(m, rows, cols, fill, generator)

    options = dict(case.get("options", {}))
    cross = case.get("x_kv") is not None
    keys = len(case["x_kv"]) if cross else len(case["x"])  # the keys' count before: x_kv's rows, or x's
    if n != len(case["x"]) or (cross and n_kv is not None and n_kv != keys):
        options.pop("weights_override", None)
        if not isinstance(options.get("mask"), str):
            options.pop("mask", None)
    if options.get("w_out") is not None:
        options["w_out"] = fit(options["w_out"], d_v, len(options["w_out"][0]))
    latent = options.get("w_latent") is not None
    d_c = len(case["w_key"]) if latent else d_in  # what keys and values read: the latent's d_c numbers, or x
    resized = {
        **case,
        "tokens": labels(case.get("tokens"), n),
        "x": fit(case["x"], n, d_in),
        "w_query": fit(case["w_query"], d_in, d_k),
        "w_key": fit(case["w_key"], d_c, d_k),
        "w_value": fit(case["w_value"], d_c, d_v),
        "options": options,
    }
    if latent:  # after the others: a case without a latent gets the same random cells as before there was one
        options["w_latent"] = fit(options["w_latent"], d_in, len(options["w_latent"][0]))
    if cross:  # last too: the source sentence's rows, its labels kept and new ones "Source …"
        rows = keys if n_kv is None else n_kv
        resized |= {"x_kv": fit(case["x_kv"], rows, d_in), "tokens_kv": labels(case.get("tokens_kv"), rows, "Source")}
    return resized


def labels(tokens: list | tuple | None, n: int, word: str = "Input") -> list:
    """n row labels: the first of these kept, new ones "Input 4" (or the word given) unless a kept one says so."""
    kept = list(tokens or default_tokens(n, word))[:n]
    for i in range(len(kept), n):
        label = f"{word} {i + 1}"
        while label in kept:  # a kept label may already say so
            label += "′"
        kept.append(label)
    return kept


def source_rows(x_kv: list | tuple | None, n_kv: int, d_in: int, fill: str = "zeros", seed: int = 0) -> list[list]:
    """Cross-attention's x_kv at n_kv rows of d_in: the rows given kept (as far as they fit), new cells zeros or
    seeded random numbers from a stream of their own (2^31 + seed, past every seed the sidebar takes: a random case's
    x is drawn from `seed`, and x_kv repeating its rows would hide what cross-attention changes)."""
    generator = torch.Generator().manual_seed(SOURCE_SEED + seed)
    return _fit(list(x_kv or ()), n_kv, d_in, fill, generator)


SOURCE_SEED = 2**31  # the source sentence's random rows: seeds past the sidebar's (MAX_SEED = 2^31 − 1)


def _fit(m: list | tuple, rows: int, cols: int, fill: str, generator: torch.Generator) -> list[list]:
    """m at rows × cols: its cells that fit kept, the others zeros or random numbers (one decimal)."""
    fresh = torch.randn(rows, cols, generator=generator, dtype=torch.float64)
    grid = _round(fresh if fill == "random" else torch.zeros(rows, cols))
    for i, row in enumerate(m[:rows]):
        grid[i][: len(row[:cols])] = row[:cols]
    return grid


def _round(matrix: torch.Tensor) -> list[list[float]]:
    return [[round(v, 1) + 0.0 for v in row] for row in matrix.tolist()]  # + 0.0 turns -0.0 into 0.0


# The sidebar's T5 table: T5's are 32 buckets and a max distance of 128; at a few tokens these show every kind
RELATIVE_BUCKETS, RELATIVE_MAX_DISTANCE = 16, 32


def relative_table(heads: int) -> tuple[tuple[float, ...], ...]:
    """A table of T5's encoder's shape to start from (T5 learns its own; both ways): each bucket a little lower than
    the one before it within its direction's half (the nearer key the higher), head k + 1 falling k + 1 times as
    fast."""
    half = RELATIVE_BUCKETS // 2
    return tuple(tuple(-(h + 1) * (b % half) / half for b in range(RELATIVE_BUCKETS)) for h in range(heads))


# Multi-head latent attention (DeepSeek V2/V3's MLA) made from a case's own keys and values

LATENT_DECIMALS = 3  # W_DKV, W_UK and W_UV as a person reads them; the case is then these rounded numbers


def latent_layout(case: Case) -> tuple[int, int]:
    """(key heads' width, d_rot): d_rot is the dims partial rotary turns in each key head, which DeepSeek's decoupled
    rotary key takes (0: no partial rotary, and every dim of the keys comes from the latent's compressed part)."""
    o = case.options
    d_head = len(case.w_key[0]) // (o.kv_heads or o.heads)
    partial = o.rope_base is not None and o.rope_fraction is not None
    return d_head, rotary_dims(d_head, o.rope_fraction) if partial else 0


def latent_widths(case: Case) -> tuple[int, int, int]:
    """The latent widths d_c with_latent can make of a case (low, high) and the narrowest that loses nothing: d_rot
    columns for the rotary key, then at least one and at most min(d_in, the columns of [W_K | W_V] it factors),
    exactly at their rank."""
    plain = without_latent(case)
    (d_head, d_rot), factored = latent_layout(plain), _factored(plain)
    unturned = factored.shape[1] - len(plain.w_key[0]) // d_head * d_rot  # the columns it factors: none turned
    most = min(plain.d_in, unturned)
    return d_rot + 1, d_rot + most, d_rot + max(1, int(torch.linalg.matrix_rank(factored)))


def with_latent(case: Case, d_c: int, decimals: int | None = LATENT_DECIMALS) -> Case:
    """The case as multi-head latent attention with a latent of d_c numbers a token: W_DKV (d_in, d_c), W_UK and W_UV
    (d_c rows) factor [W_K | W_V] by its SVD (rank d_c, each factor given √σ), so keys and values are exactly the
    case's when d_c reaches its rank (but for `decimals`), else the nearest a rank-d_c latent can make. With partial
    rotary, DeepSeek's decoupled rotary key is the latent's last d_rot columns: the first key head's turned columns
    of W_K, which W_UK copies into every head's first d_rot dims. A latent case is first made plain (without_latent).
    """
    plain = without_latent(case)
    low, high, _ = latent_widths(plain)
    if isinstance(d_c, bool) or not isinstance(d_c, int) or not low <= d_c <= high:
        said = {"low": low, "high": high, "d_rot": low - 1}  # d_rot: the rotary key's columns, the last ones
        why = msg("error.latent_width_rotary", **said) if low > 1 else msg("error.latent_width", **said)
        raise CaseError(msg("where.latent_width"), why)
    (d_head, d_rot), d_key = latent_layout(plain), len(plain.w_key[0])
    u, s, vh = torch.linalg.svd(_factored(plain), full_matrices=False)
    r = d_c - d_rot
    signs = torch.where(vh[:r].gather(1, vh[:r].abs().argmax(1, keepdim=True)) < 0, -1.0, 1.0)  # a fixed sign each
    down, up = u[:, :r] * s[:r].sqrt() * signs.T, s[:r].sqrt()[:, None] * vh[:r] * signs  # (d_in, r), (r, d_k + d_v)
    w_key, w_value = up[:, :d_key].clone(), up[:, d_key:]
    rotary = torch.tensor([c % d_head < d_rot for c in range(d_key)])  # each key head's first d_rot dims
    w_key[:, rotary] = 0.0  # the compressed part reaches the unturned dims alone
    if d_rot:  # the rotary key: the first head's turned columns of W_K, copied into every head (W_UK's identity)
        copy = torch.stack([(torch.arange(d_key) % d_head == i) & rotary for i in range(d_rot)]).double()
        w_key, w_value = torch.cat([w_key, copy]), torch.cat([w_value, torch.zeros(d_rot, w_value.shape[1])])
        down = torch.cat([down, torch.tensor(plain.w_key, dtype=torch.float64)[:, :d_rot]], dim=1)
    numbers = case_to_dict(plain)
    numbers["options"] |= {"w_latent": _rounded(down, decimals)}
    return parse_case(numbers | {"w_key": _rounded(w_key, decimals), "w_value": _rounded(w_value, decimals)})


def without_latent(case: Case) -> Case:
    """The case with plain keys and values: W_K = W_DKV W_UK and W_V = W_DKV W_UV, the same keys and values while
    the latent has no norm (its norm, which no matrix can stand for, is left out)."""
    if case.options.w_latent is None:
        return case
    down = torch.tensor(case.options.w_latent, dtype=torch.float64)
    numbers = case_to_dict(case)
    for name in ("w_latent", "latent_norm"):
        numbers["options"].pop(name, None)
    for name in ("w_key", "w_value"):  # 12 decimals: float64's noise off, every digit a weight has kept
        numbers[name] = _rounded(down @ torch.tensor(getattr(case, name), dtype=torch.float64), 12)
    return parse_case(numbers)


def _factored(case: Case) -> torch.Tensor:
    """[W_K | W_V] as the latent's compressed part makes them, (d_in, d_key + d_v): each key head's turned dims
    zero (the decoupled rotary key makes those)."""
    d_head, d_rot = latent_layout(case)
    w_key = torch.tensor(case.w_key, dtype=torch.float64)
    w_key[:, torch.tensor([c % d_head < d_rot for c in range(w_key.shape[1])])] = 0.0
    return torch.cat([w_key, torch.tensor(case.w_value, dtype=torch.float64)], dim=1)


def _rounded(matrix: torch.Tensor, decimals: int | None) -> list[list[float]]:
    rows = matrix.tolist()
    return rows if decimals is None else [[round(v, decimals) + 0.0 for v in row] for row in rows]
