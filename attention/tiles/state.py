"""The Tiles page's view (its block sizes and the tile shown) and its link: plain values, no Streamlit."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..base.case import CaseError
from ..base.i18n import Message, excerpt, msg
from .compute import check_blocks, default_block


@dataclass
class Tiling:
    """The Tiles page's view: its block sizes, the tile shown, and why block sizes were refused."""

    blocks: tuple[int, int] | None = None  # (B_q, B_k) as chosen; None: default_block of n
    tile: tuple[int, int] = (0, 0)  # (query tile, key tile), from 0
    error: CaseError | None = None  # why block sizes typed were refused (the last valid ones stay); None: they were

    def choose_blocks(self, block_q: object, block_k: object, n: int) -> None:
        """Block sizes as typed: valid ones are kept (the tile shown moved inside the tiles), else the last valid
        ones stay, with why."""
        try:
            self.blocks, self.error = check_blocks(block_q, block_k, n), None
            self.tile = clamp_tile(self.tile, n, self.blocks)
        except CaseError as e:
            self.error = e

    def blocks_for(self, n: int) -> tuple[int, int]:
        """The block sizes in effect: the chosen ones, or the defaults for n (also when a case is smaller)."""
        if self.blocks is not None and all(b <= n for b in self.blocks):
            return self.blocks
        return default_block(n), default_block(n)


PARAMS = ("bq", "bk", "tile")  # the link's block sizes and tile ("2.1": query tile 2, key tile 1, from 1)


def clamp_tile(tile: tuple[int, int], n: int, blocks: tuple[int, int]) -> tuple[int, int]:
    """A tile (query tile, key tile) moved inside the tiles of new block sizes."""
    return min(tile[0], math.ceil(n / blocks[0]) - 1), min(tile[1], math.ceil(n / blocks[1]) - 1)


def _from_link(
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


def link(view: Tiling) -> dict[str, str | None]:
    """The link's parameters of the view: its block sizes and tile (None: the default, left out)."""
    b_q, b_k = view.blocks or (None, None)
    tile = view.tile
    return {
        "bq": b_q and str(b_q),
        "bk": b_k and str(b_k),
        "tile": None if tile == (0, 0) else f"{tile[0] + 1}.{tile[1] + 1}",
    }


def open_link(params: Mapping[str, str | None], n: int) -> tuple[Tiling | None, Message | None]:
    """A link's block sizes (bq, bk) and tile ("2.1": query tile 2, key tile 1): the view it names (None: it names
    none), or the notice of a bad one (the Tiles page then shows its defaults)."""
    if not any(params.get(name) for name in PARAMS):
        return None, None
    try:
        return Tiling(*_from_link(params.get("bq"), params.get("bk"), params.get("tile"), n)), None
    except CaseError as e:
        return None, msg("tiles.notice_refused", error=e.message)
