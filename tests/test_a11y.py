"""Accessibility without a browser: colour scales safe for colour-blind readers, and every chart's text version."""

import numpy as np
import plotly.graph_objects as go
import pytest

from attention import attend
from attention.app.charts import table_label
from attention.base.case import with_options
from attention.base.presets import article, random_case
from attention.forward.figures import broadcast_panels, query_sum, tensor_heatmap, weighted_heatmap
from attention.forward.steps import AXES, PER_HEAD
from attention.show.describe import describe
from attention.show.heatmap import TEXT_PX, heatmap, highlight
from tests.apptest import PAGES

# The scales a heatmap may use, as Plotly stores them, and whether each is the diverging one (see figures.py).
ALLOWED = {
    "Viridis": (go.Heatmap(colorscale="Viridis").colorscale, False),
    "RdBu": (go.Heatmap(colorscale="RdBu").colorscale, True),
}


def scale_problems(fig: go.Figure) -> list[str]:
    """What is wrong with a figure's heatmaps: a scale not allowed, or signed data whose scale is not centred on 0."""
    problems = []
    for heat in (t for t in fig.data if t.type == "heatmap"):
        name = next((n for n, (scale, _) in ALLOWED.items() if heat.colorscale == scale), None)
        z = np.asarray(heat.z, dtype=np.float64)
        finite = z[np.isfinite(z)]
        signed = finite.size and finite.min() < 0 < finite.max()
        if name is None:
            problems.append(f"colour scale not allowed: {heat.colorscale[:2]}…")
        elif signed and not (ALLOWED[name][1] and heat.zmid == 0):
            problems.append(f"signed data on {name} with zmid={heat.zmid}: not a diverging scale centred on 0")
        elif not signed and ALLOWED[name][1]:
            problems.append("one-signed data on a diverging scale: half of it unused, its colours misleading")
    return problems


def every_figure(trace) -> dict[str, go.Figure]:
    """Every heatmap builder in figures.py, on one trace."""
    head = 0 if trace.case.options.heads > 1 else None
    matrices = [n for step in trace.steps for n in step.tensors if len(AXES.get(n, ())) == 2]  # 2-D (per head)
    out = {f"tensor {n}": tensor_heatmap(trace, n, head if n in PER_HEAD else None) for n in matrices}
    out["weighted"] = weighted_heatmap(trace, head)
    out |= {f"broadcast {k}": f for k, f in broadcast_panels(trace, 1, head).items()}
    out["query sum"] = query_sum(trace, 1, head)
    scores = tensor_heatmap(trace, "scores", head)
    out["highlight"] = highlight(scores, (1,), None)
    signed = np.arange(9.0).reshape(3, 3) - 4
    out["signed difference"] = heatmap(signed, list("abc"), list("abc"), "query", "key")
    big = np.arange(200 * 200.0).reshape(200, 200) - 20_000  # drawn as an image: its colour bar is checked
    names = [str(i) for i in range(200)]
    out["signed image"] = heatmap(big, names, names, "query", "key")
    out["one-signed image"] = heatmap(big + 20_000, names, names, "query", "key")
    return out


@pytest.mark.parametrize(
    "case",
    [
        article(),
        random_case(5, 4, 4, 4, seed=3),
        with_options(random_case(4, 3, 2, 2, seed=1), mask="causal"),
        with_options(random_case(4, 4, 4, 4, seed=2), heads=2),
    ],
    ids=["article", "random", "causal", "two heads"],
)
def test_every_heatmap_uses_a_colour_blind_safe_scale_centred_on_zero_when_signed(case):
    trace = attend(case)
    figs = every_figure(trace)
    assert any(scale_problems(f) == [] and f.data[0].zmid == 0 for f in figs.values()), "no signed figure was checked"
    for name, fig in figs.items():
        assert scale_problems(fig) == [], name


@pytest.mark.parametrize(
    "bad",
    [
        go.Figure(go.Heatmap(z=[[-1, 2], [3, 4]], colorscale="Jet")),  # rainbow: red and green read alike
        go.Figure(go.Heatmap(z=[[-1, 2], [3, 4]], colorscale="RdBu")),  # diverging, but centred on the mean
        go.Figure(go.Heatmap(z=[[-1, 2], [3, 4]], colorscale="Viridis")),  # sequential on signed data
        go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], colorscale="RdBu", zmid=0)),  # diverging on one-signed data
    ],
)
def test_the_scale_check_can_fail(bad):
    assert scale_problems(bad)


def test_text_version_of_a_small_heatmap_lists_every_value():
    trace = attend(article())
    title, summary, table = describe(tensor_heatmap(trace, "scores"))
    assert title == "scores"
    assert summary.startswith("scores: a heatmap of 3 × 3 numbers, rows are query, columns are key.")
    assert "largest 16 (at query Input 2, key Input 2)" in summary
    assert table.index.name == "query" and list(table.index) == ["Input 1", "Input 2", "Input 3"]
    assert table.values.tolist() == [["2", "4", "4"], ["4", "16", "12"], ["4", "12", "10"]]  # the article's scores


def test_text_version_names_masked_cells_and_keeps_labels_as_typed():
    trace = attend(with_options(article(), mask="causal"))
    fig = heatmap(trace["scores"], ["<b>a</b>", "a", "a"], ["1", "2", "3"], "query", "key", "masked")
    _, summary, table = describe(fig)
    assert "3 cells are masked" in summary
    assert list(table.index) == ["<b>a</b>", "a", "a (2)"]  # unescaped (HTML-escaped for Plotly), made unique
    _, _, table = describe(fig, label=table_label)  # st.table renders Markdown: typed labels escaped
    assert list(table.index) == ["\\<b>a\\</b>", "a", "a (2)"]
    assert table.iloc[0, 1] == "−∞" and table.iloc[0, 0] != "−∞"


def test_text_version_of_a_big_heatmap_is_a_summary_per_row():
    z = np.arange(20 * 30, dtype=np.float64).reshape(20, 30)
    z[4] = np.nan  # a fully masked row
    fig = heatmap(z, [str(i) for i in range(20)], [str(j) for j in range(30)], "query", "key", "big")
    _, summary, table = describe(fig)
    assert "600 cells are too many" in summary and "Explain page" in summary
    assert "largest 599 (at query 19, key 29)" in summary
    assert table.shape == (20, 3)
    assert table.loc["0"].tolist() == ["0", "29", "29"] and table.loc["4"].tolist() == ["−∞"] * 3
    tall = heatmap(np.zeros((300, 2)), [str(i) for i in range(300)], ["a", "b"], "query", "key")
    _, summary, table = describe(tall)
    assert table is None and "even row by row" in summary  # 300 rows: the summary sentences only


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_has_a_text_version_with_a_readable_table(at, page):
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    keys = [c.proto.id for c in at.get("plotly_chart")]
    versions = [e for e in at.expander if e.label.startswith("Text version: ")]
    assert len(versions) == len(keys), (page, [e.label for e in at.expander])
    assert not any(e.text or e.get("table") for e in versions)  # closed, a text version is made only when opened
    for e in versions:
        at.session_state[e.key] = True  # opened, as a click on its label does
    at.run()
    versions = [e for e in at.expander if e.label.startswith("Text version: ")]
    for e in versions:
        assert e.text, e.label  # the sentence: title, shape, axes
        assert e.get("table"), e.label  # a real HTML table, not st.dataframe's canvas


def test_cell_numbers_are_asked_for_at_one_size_and_long_labels_are_cut_with_the_whole_in_the_hover() -> None:
    """The browser fits each number to its cell (web/fit.js), so the figure asks for one size, never Plotly's "auto"
    (which follows the cells' height alone: 5 px text in a 10 × 10 chart in a third of a page); a tick label longer
    than LABEL_MAX is cut with "…", its cell's category (the hover's %{y}) staying whole."""
    long = "␣Transformers&quot;attention"
    fig = heatmap(np.ones((2, 2)), [long, "b"], ["1", "2"], "query", "key", "t")
    assert fig.data[0].textfont.size == TEXT_PX
    assert list(fig.data[0].y) == ["␣Transformers&amp;quot;attention", "b"]
    assert fig.layout.yaxis.labelalias == {"␣Transformers&amp;quot;attention": "␣Transformers…"}
    assert fig.layout.xaxis.labelalias is None  # short labels: Plotly's own


def test_the_top_margin_keeps_the_title_clear_of_upright_column_labels() -> None:
    """Thirteen token columns may turn their labels upright in a narrow column: the top margin holds the title, the
    axis title and the upright labels (Plotly's automargin counts the axis alone, from the top edge)."""
    tokens = [f"Input {i}" for i in range(1, 14)]
    narrow = heatmap(np.ones((1, 13)), ["Input 13"], tokens, "query", "key", "scores_t")
    assert narrow.layout.margin.t >= 24 + 26 + 7 * len("Input 13")
    assert heatmap(np.ones((3, 3)), ["1", "2", "3"], ["1", "2", "3"], "query", "key", "t").layout.margin.t == 90
