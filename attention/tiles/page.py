"""The Tiles page's body: FlashAttention's online softmax on the case, a query tile against a key tile at a time,
equal to step 7."""

from __future__ import annotations

import streamlit as st

from ..app import charts, frame, pickers, tab, traces
from ..app.language import lang, t
from ..app.session import Session
from ..app.text import plain
from ..base.explain import explain
from ..base.i18n import render
from ..base.numbers import size_text
from ..forward.compute import Trace
from . import figures, room, script
from .compute import Tiled, Visit, estimates, matrix_bytes, step_7_heads
from .state import Tiling


def tiles() -> None:
    """The block sizes, the check against step 7, the score matrix in tiles, one tile's step, and what it saves."""
    trace = frame.trace()
    s = tab.current()
    st.header(t("tiles.header"))
    st.write(t("tiles.intro"))
    if trace.case.cross:  # the matrix is n × n_kv: target tokens' queries down, source tokens' keys across
        st.info(t("tiles.cross", n=trace.case.n, n_kv=trace.case.n_kv), icon=":material/translate:")

    room.block_inputs(s)
    if (error := s.view(Tiling).error) is not None:
        st.error(t("error.last_valid", error=plain(render(lang(), error.message))), icon="⚠️")
    run = room.run(s, trace)
    agreement = room.agreement(s, trace, run)
    said = {"difference": agreement.difference, "relative": agreement.relative, "tolerance": agreement.tolerance}
    said |= {"tiles": run.tiles, "b_q": run.block_q, "b_k": run.block_k}
    if agreement.agrees:
        st.success(t("tiles.agrees", **said), icon=":material/verified:")
    else:
        st.error(t("tiles.differs", **said))
    if trace.case.options.weights_override is not None:
        st.caption(t("tiles.exact_note"))
    _skipped(run)

    query_tile, key_tile = room.tile_picker(s, run)
    room.rescaling(s, run, (query_tile, key_tile))
    run = room.run(s, trace)  # past n = 64 the shown query tile alone is recorded: the picker may have moved it
    head = pickers.head_picker(trace, "tiles_head")
    h = head or 0
    blocks = (run.block_q, run.block_k)
    charts.chart(
        charts.figure(figures.tile_scores, trace, blocks, run.skipped, head, (query_tile, key_tile)), "chart_tiles"
    )

    visit = run.visit(query_tile, key_tile)
    queries, keys = visit.queries, visit.keys
    tokens, labels = trace.case.tokens, trace.case.key_tokens  # cross-attention: the keys are the source's
    st.subheader(t("tiles.step_header", i=query_tile + 1, j=key_tile + 1, first=tokens[queries[0]],
                    last=tokens[queries[-1]], key_first=labels[keys[0]], key_last=labels[keys[-1]]))  # fmt: skip
    if visit.skipped:
        st.info(t("tiles.step_skipped"))
    else:
        st.caption(t("tiles.table_caption"))
        table = room.kept(s, trace, run, ("table", query_tile, key_tile, h),
                                lambda: figures.visit_table(trace, visit, h, lang()))  # fmt: skip
        charts.numbers(table, "tiles_table")
    st.markdown(t("tiles.why_rescale"))
    _query(s, trace, run, visit, h)
    _memory(trace, run)


def _skipped(run: Tiled) -> None:
    """How many tiles were skipped, wholly masked: above the diagonal, and under a sliding window behind it."""
    o = run.case.options
    if o.window is not None:
        behind = sum(run.behind_window(i, j) for i, j in run.skipped)
        said = {"skipped": len(run.skipped), "tiles": run.tiles, "window": o.window}
        st.info(t("tiles.skipped_window", **said, above=len(run.skipped) - behind, behind=behind))
    elif o.mask is not None and run.case.cross:  # the case's own mask: no diagonal across two sentences
        st.info(t("tiles.skipped_cross", skipped=len(run.skipped), tiles=run.tiles))
    elif o.mask is not None:
        st.info(t("tiles.skipped", skipped=len(run.skipped), tiles=run.tiles))


def _query(s: Session, trace: Trace, run: Tiled, visit: Visit, h: int) -> None:
    """One query of the tile: its step's arithmetic, and its output converging to step 7's tile by tile."""
    queries, tokens = visit.queries, trace.case.tokens
    st.subheader(t("tiles.explain_header"))
    row = room.query_picker(tokens, queries)
    if visit.skipped:
        st.code(t("tiles.explain_skipped", tile=visit.key_tile + 1), language=None, wrap_lines=True)
    else:
        st.code("\n".join(explain(run, "l", (h, row), lang(), step=visit.name).lines), language=None, wrap_lines=True)

    st.subheader(t("tiles.converge_header"))
    query = queries[row]
    so_far = estimates(run, query, h)
    exact = traces.exact(s, trace)  # step 7 with the exact softmax, which the tiles compute (not the rounding)
    gap = (so_far[-1] - step_7_heads(exact)[h, query].to(so_far.dtype)).abs().max().item()
    st.caption(t("tiles.converge_caption", token=tokens[query], difference=gap))
    converging = room.kept(s, trace, run, ("converge", query, h),
                                 lambda: figures.convergence(run, exact, query, h, lang()))  # fmt: skip
    charts.chart(converging, "chart_converge")


def _memory(trace: Trace, run: Tiled) -> None:
    """The n × n matrices against a tile's few numbers, and the tiled loop's code."""
    st.subheader(t("tiles.memory_header"))
    matrix, tile = matrix_bytes(trace), run.tile_bytes
    left, right = st.columns(2)
    left.metric(t("tiles.memory_matrix_cross" if trace.case.cross else "tiles.memory_matrix"), size_text(matrix))
    right.metric(t("tiles.memory_tile"), size_text(tile))
    o, case = trace.case.options, trace.case
    said = {"n": case.n, "heads": o.heads, "dtype": o.dtype, "ratio": tile / max(matrix, 1), "b_q": run.block_q,
            "b_k": run.block_k, "n_kv": case.n_kv}  # fmt: skip
    st.caption(t("tiles.memory_caption_cross" if case.cross else "tiles.memory_caption", **said))

    st.subheader(t("tiles.code_header"))
    st.code(script.shown(trace.case, run.block_q, run.block_k), language="python", wrap_lines=True)
    room.script_button(trace.case, run.block_q, run.block_k)
