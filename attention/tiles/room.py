"""The Tiles page's room: its block sizes as typed, the tiled run kept in the session's cache, the tile player."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from ..app import tab, traces
from ..app.language import t
from ..app.pickers import KEEP
from ..app.session import Session
from ..base import i18n
from ..base.record import Check
from ..forward.compute import Trace
from . import script
from .compute import KEEP_ALL_MAX_N, Tiled, check, tiled
from .state import Rescale, Tiling, clamp_tile, default_blocks, first_rescale

T = TypeVar("T")
PACE = 1.5  # seconds per tile while the player plays


def defaults(s: Session) -> tuple[int, int]:
    """The page's block sizes before any is chosen (state.default_blocks: they show the rescaling), kept per case."""
    return s.derived.get(("tile defaults", s.case), lambda: default_blocks(s.case))


def blocks(s: Session) -> tuple[int, int]:
    """The block sizes in effect: the session's, or the defaults (also when a new case is smaller than them)."""
    return s.view(Tiling).blocks_for(s.case.n, lambda: defaults(s), _n_kv(s.case))


def _n_kv(case) -> int | None:
    """Cross-attention's keys, the source's n_kv tokens, which B_k tiles; None: the case's own n."""
    return case.n_kv if case.cross else None


def run(s: Session, trace: Trace) -> Tiled:
    """The tiled run of the trace's case, kept while the case and blocks are: every visit recorded up to
    KEEP_ALL_MAX_N, past it the shown query tile's alone (so nothing n × n is kept either)."""
    b_q, b_k = blocks(s)
    tile = s.view(Tiling).tile or (0, 0)  # past KEEP_ALL_MAX_N the first rescaling is looked for in query tile 1
    keep = None if trace.case.n <= KEEP_ALL_MAX_N else (min(tile[0], -(-trace.case.n // b_q) - 1),)
    key = ("tiled", trace.case, b_q, b_k, keep)
    return s.derived.get(key, lambda: tiled(trace.case, b_q, b_k, keep))


def agreement(s: Session, trace: Trace, tiled: Tiled) -> Check:
    """The tiled outputs against step 7's of the trace with the exact softmax (the tiles compute the exact one)."""
    exact = traces.exact(s, trace)
    key = ("tiled check", exact.case, tiled.block_q, tiled.block_k)
    return s.derived.get(key, lambda: check(tiled, exact))


def kept(s: Session, trace: Trace, tiled: Tiled, what: tuple, make: Callable[[], T]) -> T:
    """make() kept while the case, the blocks, the language and `what` (plain values naming it) are the same."""
    key = ("tiles", what, trace.case, tiled.block_q, tiled.block_k, tiled.recorded, s.lang)
    return s.derived.get(key, make)


def block_inputs(s: Session) -> None:
    """B_q and B_k as text (a number input would clamp 0 or 2000 without a word): a bad one keeps the last valid."""
    b_q, b_k = blocks(s)
    if s.view(Tiling).error is None:  # what is typed shows what is used; a refused text stays as typed, with why
        st.session_state.tiles_bq, st.session_state.tiles_bk = str(b_q), str(b_k)
    left, right = st.columns(2)
    n, default = s.case.n, defaults(s)

    def typed() -> None:
        s.view(Tiling).choose_blocks(st.session_state.tiles_bq, st.session_state.tiles_bk, s.case.n, _n_kv(s.case))

    left.text_input(
        t("tiles.block_q"), key="tiles_bq", on_change=typed, help=t("tiles.block_help", n=n, default=default[0])
    )
    said = {"n": s.case.n_kv, "default": default[1]}  # B_k tiles the keys: cross-attention's, the source's n_kv
    right.text_input(t("tiles.block_k"), key="tiles_bk", on_change=typed,
                     help=t("tiles.block_k_help_cross" if s.case.cross else "tiles.block_k_help", **said))  # fmt: skip


def rescaling(s: Session, tiled: Tiled, tile: tuple[int, int]) -> None:
    """Which tile shows the rescaling (the first that does), in words with its numbers, and a way to it; or that no
    tile of these block sizes rescales."""
    found: Rescale | None = first_rescale(tiled)
    if found is None:
        st.info(t("tiles.no_rescale"), icon=":material/info:")
        return
    token = tiled.case.tokens[found.query]
    head = t("tiles.rescale_head", head=found.head + 1) if tiled.case.options.heads > 1 else ""
    i, j = found.tile
    said = {"i": i + 1, "j": j + 1, "token": token, "head": head, "old": found.m_old, "new": found.m_new}
    st.info(t("tiles.rescale_at", factor=found.factor, **said), icon=":material/zoom_in:")
    row = found.query - i * tiled.block_q  # its row in the tile: the explanation below is of it, once
    if tile == found.tile and s.view(Tiling).tile is None and "tiles_query" not in st.session_state:
        st.session_state.tiles_query = row
    if tile != found.tile:

        def go() -> None:
            s.view(Tiling).tile = found.tile
            st.session_state.tiles_query = row

        st.button(t("tiles.rescale_show", i=i + 1, j=j + 1), key="tiles_show_rescale", on_click=go)


def shown(s: Session, tiled: Tiled) -> tuple[int, int]:
    """The tile shown: the one picked, else the first that rescales (the page's premise on its first screen)."""
    if s.view(Tiling).tile is not None:
        return s.view(Tiling).tile
    found = first_rescale(tiled)
    return (0, 0) if found is None else found.tile


def tile_picker(s: Session, tiled: Tiled) -> tuple[int, int]:
    """The query tile and key tile shown (pickers), previous / next over the visits in order, and a player. Until a
    tile is picked, the first that rescales is shown, and the link names none (a link opens on it again)."""
    here = clamp_tile(shown(s, tiled), tiled.case.n, (tiled.block_q, tiled.block_k), _n_kv(tiled.case))
    if s.view(Tiling).tile is not None or st.session_state.get("tiles_playing"):  # the player moves from here
        s.view(Tiling).tile = here
    tokens, keys = tiled.case.tokens, tiled.case.key_tokens  # cross-attention: the key tiles' are the source's
    query_tiles, key_tiles = range(tiled.query_tiles), range(tiled.key_tiles)
    st.session_state.tiles_query_tile, st.session_state.tiles_key_tile = here

    language = s.lang  # the widget keeps its format_func, called outside a run too: the language as it is now

    def span(b: int, size: int, labels: tuple[str, ...]):
        def option(i: int) -> str:
            last = labels[min(i * b + b, size) - 1]
            return i18n.text(language, "tiles.tile_option", number=i + 1, first=labels[i * b], last=last)

        return option

    def picked() -> None:
        s.view(Tiling).tile = (st.session_state.tiles_query_tile, st.session_state.tiles_key_tile)

    left, right = st.columns(2)
    left.selectbox(t("tiles.query_tile"), query_tiles, format_func=span(tiled.block_q, tiled.case.n, tokens),
                   key="tiles_query_tile", on_change=picked)  # fmt: skip
    right.selectbox(t("tiles.key_tile"), key_tiles, format_func=span(tiled.block_k, tiled.case.n_kv, keys),
                    key="tiles_key_tile", on_change=picked)  # fmt: skip
    row = st.container(horizontal=True, vertical_alignment="center")
    order, key_tiles = tiled.tiles, tiled.key_tiles  # plain numbers: the buttons keep their callbacks till the next run
    at = here[0] * key_tiles + here[1]

    def go(by: int) -> None:
        s.view(Tiling).tile = divmod((at + by) % order, key_tiles)

    row.button("◀", key="tiles_previous", on_click=go, args=(-1,), disabled=at == 0)
    row.button("▶", key="tiles_next", on_click=go, args=(1,), disabled=at == order - 1)
    row.toggle(t("tiles.play"), key="tiles_playing", persist_state=KEEP, help=t("tiles.play_help", seconds=PACE))
    if st.session_state.tiles_playing:
        st.fragment(lambda: _advance(order, key_tiles), run_every=PACE)()
    else:
        s.next_step_at = None
    return here


def _advance(order: int, key_tiles: int) -> None:
    s = tab.current()
    if s.next_step_at is None:
        s.next_step_at = time.monotonic() + PACE
    if time.monotonic() >= s.next_step_at:
        s.next_step_at = time.monotonic() + PACE
        tile = s.view(Tiling).tile or (0, 0)  # the player made the tile shown the session's when it began
        at = tile[0] * key_tiles + tile[1]
        s.view(Tiling).tile = divmod((at + 1) % order, key_tiles)  # after the last tile, the first again
        st.rerun(scope="app")


def query_picker(tokens: tuple[str, ...], queries: range) -> int:
    """One query of the tile, by its label, from 0 within the tile (the widget keeps its format_func: it must keep
    the labels alone, never the page's trace)."""
    row = st.selectbox(t("tiles.explain_query"), range(len(queries)), format_func=lambda r: tokens[queries[r]],
                       key="tiles_query", persist_state=KEEP)  # fmt: skip
    return row if row is not None and row < len(queries) else 0


def script_button(case, block_q: int, block_k: int) -> None:
    """The exported script, made on a click (the button keeps the case and block sizes, never a trace)."""
    made = lambda: script.to_script(case, block_q, block_k)  # noqa: E731
    st.download_button(
        t("tiles.script"), made, "attention_tiles.py", "text/x-python", on_click="ignore", key="get_tiles"
    )
