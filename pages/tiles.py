"""Tiles: FlashAttention's online softmax on the case, a query tile against a key tile at a time, equal to step 7."""

import streamlit as st

from attention import tile_figures, tiles, tiles_script
from attention.app import charts, compute, frame, pickers, tab, tiles_room
from attention.app.language import lang, t
from attention.app.text import plain
from attention.i18n import render

trace = frame.trace()
s = tab.current()
st.header(t("tiles.header"))
st.write(t("tiles.intro"))

tiles_room.block_inputs(s)
if s.tiling.error is not None:
    st.error(t("error.last_valid", error=plain(render(lang(), s.tiling.error.message))), icon="⚠️")
run = tiles_room.run(s, trace)
agreement = tiles_room.agreement(s, trace, run)
said = {"difference": agreement.difference, "relative": agreement.relative, "tolerance": agreement.tolerance}
said |= {"tiles": run.tiles, "b_q": run.block_q, "b_k": run.block_k}
if agreement.agrees:
    st.success(t("tiles.agrees", **said), icon=":material/verified:")
else:
    st.error(t("tiles.differs", **said))
if trace.case.options.weights_override is not None:
    st.caption(t("tiles.exact_note"))
if trace.case.options.mask is not None:
    st.info(t("tiles.skipped", skipped=len(run.skipped), tiles=run.tiles))

query_tile, key_tile = tiles_room.tile_picker(s, run)
run = tiles_room.run(s, trace)  # past n = 64 the shown query tile alone is recorded: the picker may have moved it
head = pickers.head_picker(trace, "tiles_head")
h = head or 0
blocks = (run.block_q, run.block_k)
charts.chart(
    charts.figure(tile_figures.tile_scores, trace, blocks, run.skipped, head, (query_tile, key_tile)), "chart_tiles"
)

visit = run.visit(query_tile, key_tile)
queries, keys = visit.queries, visit.keys
tokens = trace.case.tokens
st.subheader(t("tiles.step_header", i=query_tile + 1, j=key_tile + 1, first=tokens[queries[0]],
                last=tokens[queries[-1]], key_first=tokens[keys[0]], key_last=tokens[keys[-1]]))  # fmt: skip
if visit.skipped:
    st.info(t("tiles.step_skipped"))
else:
    st.caption(t("tiles.table_caption"))
    table = tiles_room.kept(s, trace, run, ("table", query_tile, key_tile, h),
                            lambda: tile_figures.visit_table(trace, visit, h, lang()))  # fmt: skip
    charts.numbers(table, "tiles_table")
st.markdown(t("tiles.why_rescale"))

st.subheader(t("tiles.explain_header"))
row = tiles_room.query_picker(tokens, queries)
st.code("\n".join(tiles.explain(run, visit, h, row, lang())), language=None, wrap_lines=True)

st.subheader(t("tiles.converge_header"))
query = queries[row]
so_far = tiles.estimates(run, query, h)
exact = compute.exact(s, trace)  # step 7 with the exact softmax, which the tiles compute (not the article's rounding)
gap = (so_far[-1] - tiles.step_7_heads(exact)[h, query].to(so_far.dtype)).abs().max().item()
st.caption(t("tiles.converge_caption", token=tokens[query], difference=gap))
converging = tiles_room.kept(s, trace, run, ("converge", query, h),
                             lambda: tile_figures.convergence(run, exact, query, h, lang()))  # fmt: skip
charts.chart(converging, "chart_converge")

st.subheader(t("tiles.memory_header"))
matrix, tile = tiles.matrix_bytes(trace), run.tile_bytes
left, right = st.columns(2)
left.metric(t("tiles.memory_matrix"), tiles.size_text(matrix))
right.metric(t("tiles.memory_tile"), tiles.size_text(tile))
o = trace.case.options
st.caption(t("tiles.memory_caption", n=trace.case.n, heads=o.heads, dtype=o.dtype, ratio=tile / max(matrix, 1),
             b_q=run.block_q, b_k=run.block_k))  # fmt: skip

st.subheader(t("tiles.code_header"))
st.code(tiles_script.shown(trace.case, run.block_q, run.block_k), language="python", wrap_lines=True)
tiles_room.script_button(trace.case, run.block_q, run.block_k)
