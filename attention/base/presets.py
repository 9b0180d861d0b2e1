"""Presets (the article's example, a seeded random case) and resizing a case while keeping its numbers."""

from __future__ import annotations

import torch

from .case import Case, case_to_dict, default_tokens, parse_case

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


def resize(case: Case, n: int, d_in: int, d_k: int, d_v: int, fill: str = "zeros", seed: int = 0) -> Case:
    """The case at new sizes: numbers that still fit are kept, new cells are zeros or seeded random numbers."""
    return parse_case(resize_grids(case_to_dict(case), n, d_in, d_k, d_v, fill, seed))


def resize_grids(case: dict, n: int, d_in: int, d_k: int, d_v: int, fill: str = "zeros", seed: int = 0) -> dict:
    """resize() on a case file's plain values, which may hold not-yet-valid entries (kept as they are).

    An override or an explicit mask that no longer fits is dropped (its shape is n×n); w_out follows d_v.
    """
    generator = torch.Generator().manual_seed(seed)

    def fit(m: list[list], rows: int, cols: int) -> list[list]:
        fresh = torch.randn(rows, cols, generator=generator, dtype=torch.float64)
        grid = _round(fresh if fill == "random" else torch.zeros(rows, cols))
        for i, row in enumerate(m[:rows]):
            grid[i][: len(row[:cols])] = row[:cols]
        return grid

    options = dict(case.get("options", {}))
    if n != len(case["x"]):
        options.pop("weights_override", None)
        if not isinstance(options.get("mask"), str):
            options.pop("mask", None)
    if options.get("w_out") is not None:
        options["w_out"] = fit(options["w_out"], d_v, len(options["w_out"][0]))
    tokens = list(case.get("tokens") or default_tokens(len(case["x"])))[:n]
    for i in range(len(tokens), n):
        label = f"Input {i + 1}"
        while label in tokens:  # a kept label may already say so
            label += "′"
        tokens.append(label)
    return {
        **case,
        "tokens": tokens,
        "x": fit(case["x"], n, d_in),
        "w_query": fit(case["w_query"], d_in, d_k),
        "w_key": fit(case["w_key"], d_in, d_k),
        "w_value": fit(case["w_value"], d_in, d_v),
        "options": options,
    }


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
