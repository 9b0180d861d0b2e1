"""The Tiles page's view (its block sizes and the tile shown), the defaults that show the rescaling on the first
screen, and its link: plain values, no Streamlit."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..base.case import Case, CaseError
from ..base.i18n import Message, excerpt, msg
from .compute import KEEP_ALL_MAX_N, Tiled, check_blocks, default_block, tiled


@dataclass
class Tiling:
    """The Tiles page's view: its block sizes, the tile shown, and why block sizes were refused."""

    blocks: tuple[int, int] | None = None  # (B_q, B_k) as chosen; None: default_blocks of the case
    tile: tuple[int, int] | None = None  # (query tile, key tile), from 0; None: the first that rescales (or 1.1)
    error: CaseError | None = None  # why block sizes typed were refused (the last valid ones stay); None: they were

    def choose_blocks(self, block_q: object, block_k: object, n: int, n_kv: int | None = None) -> None:
        """Block sizes as typed (B_k against cross-attention's n_kv source tokens; None: n): valid ones are kept
        (the tile shown moved inside the tiles), else the last valid ones stay, with why."""
        try:
            self.blocks, self.error = check_blocks(block_q, block_k, n, n_kv), None
            self.tile = None if self.tile is None else clamp_tile(self.tile, n, self.blocks, n_kv)
        except CaseError as e:
            self.error = e

    def blocks_for(self, n: int, default: Callable[[], tuple[int, int]] | None = None,
                   n_kv: int | None = None) -> tuple[int, int]:  # fmt: skip
        """The block sizes in effect: the chosen ones, or the defaults (`default()`, made only then: it may cost
        tiled runs; else default_block of n and of n_kv; also when a case is smaller than the chosen ones)."""
        keys = n if n_kv is None else n_kv
        if self.blocks is not None and self.blocks[0] <= n and self.blocks[1] <= keys:
            return self.blocks
        return default() if default else (default_block(n), default_block(keys))


@dataclass(frozen=True)
class Rescale:
    """Where the online softmax first rescales: a visit where a query's running maximum grows after an earlier key
    tile, so what was summed under m_old is multiplied by e^(m_old − m_new) < 1 (the page's premise, shown)."""

    tile: tuple[int, int]  # (query tile, key tile), from 0
    head: int
    query: int  # the query's row in the score matrix, from 0
    m_old: float
    m_new: float
    factor: float  # e^(m_old − m_new)


def first_rescale(run: Tiled) -> Rescale | None:
    """The first recorded visit, in the order the loop makes them, that rescales a query's sums; None if none does
    (every query's largest score is in the first key tile it reads)."""
    for v in run.visits:
        if v.skipped:
            continue
        m_old, m_new = v.tensors["m_before"], v.tensors["m"]  # (h, b_q)
        grows = (m_old > float("-inf")) & (m_new > m_old)  # the first key tile read starts m at −∞: no rescaling
        if grows.any():
            head, row = (int(i) for i in grows.nonzero()[0])
            said = float(m_old[head, row]), float(m_new[head, row]), float(v.tensors["rescale"][head, row])
            return Rescale((v.query_tile, v.key_tile), head, v.queries[row], *said)
    return None


def default_blocks(case: Case) -> tuple[int, int]:
    """The page's block sizes before any is chosen: default_block of n, with B_k halved until some query's maximum
    grows at a later key tile, so that the first screen shows the rescaling (the article's two key tiles never
    rescale: e^(4 − 4) = 1; tiles of one key do). Past KEEP_ALL_MAX_N, and where no size rescales, default_block.
    With cross-attention B_k starts from default_block of the n_kv source tokens."""
    b, keys = default_block(case.n), default_block(case.n_kv)
    if case.n <= KEEP_ALL_MAX_N:
        b_k = keys
        while b_k >= 1:
            if first_rescale(tiled(case, b, b_k)) is not None:
                return b, b_k
            b_k //= 2
    return b, keys


PARAMS = ("bq", "bk", "tile")  # the link's block sizes and tile ("2.1": query tile 2, key tile 1, from 1)


def clamp_tile(tile: tuple[int, int], n: int, blocks: tuple[int, int], n_kv: int | None = None) -> tuple[int, int]:
    """A tile (query tile, key tile) moved inside the tiles of new block sizes (key tiles over n_kv; None: n)."""
    keys = n if n_kv is None else n_kv
    return min(tile[0], math.ceil(n / blocks[0]) - 1), min(tile[1], math.ceil(keys / blocks[1]) - 1)


def _from_link(block_q: str | None, block_k: str | None, tile: str | None, n: int, n_kv: int | None = None):
    """A link's block sizes and tile ("2.1", from 1) checked: (blocks or None for the defaults, tile from 0). A size
    left out is default_block(n) (of n_kv: cross-attention's keys), what it meant when such links were made: a tile
    is read on the blocks it was on (the page's defaults became default_blocks later; links have written both sizes
    with a tile since)."""
    keys = n if n_kv is None else n_kv
    default = (default_block(n), default_block(keys))
    if block_q or block_k or tile:
        blocks = check_blocks(block_q or default[0], block_k or default[1], n, n_kv)
    else:
        blocks = None
    if not tile:
        return blocks, None
    parts = tile.split(".")
    limits = (math.ceil(n / blocks[0]), math.ceil(keys / blocks[1]))
    if len(parts) != 2 or not all(p.isascii() and p.isdecimal() and len(p) < 6 for p in parts):
        raise CaseError(msg("tiles.where_tile"), msg("tiles.error_tile", value=excerpt(tile), **_most(limits)))
    i, j = (int(p) for p in parts)
    if not (1 <= i <= limits[0] and 1 <= j <= limits[1]):
        raise CaseError(msg("tiles.where_tile"), msg("tiles.error_tile", value=excerpt(tile), **_most(limits)))
    return blocks, (i - 1, j - 1)


def _most(limits: tuple[int, int]) -> dict[str, int]:
    return {"query_tiles": limits[0], "key_tiles": limits[1]}


def link(view: Tiling, in_effect: tuple[int, int] | None = None) -> dict[str, str | None]:
    """The link's parameters of the view: its block sizes and tile (None: the default, left out). `in_effect`: the
    block sizes the page shows (the defaults depend on the case; chosen ones too big for a new case give way), so
    that a tile is written with the blocks it is on."""
    b_q, b_k = in_effect or view.blocks or (None, None)
    tile = view.tile
    return {
        "bq": b_q and str(b_q),
        "bk": b_k and str(b_k),
        "tile": None if tile is None else f"{tile[0] + 1}.{tile[1] + 1}",
    }


def open_link(
    params: Mapping[str, str | None], n: int, n_kv: int | None = None
) -> tuple[Tiling | None, Message | None]:
    """A link's block sizes (bq, bk) and tile ("2.1": query tile 2, key tile 1): the view it names (None: it names
    none), or the notice of a bad one (the Tiles page then shows its defaults). n_kv: cross-attention's keys."""
    if not any(params.get(name) for name in PARAMS):
        return None, None
    try:
        return Tiling(*_from_link(params.get("bq"), params.get("bk"), params.get("tile"), n, n_kv)), None
    except CaseError as e:
        return None, msg("tiles.notice_refused", error=e.message)
