"""Pure builders for the Backward page: a gradient beside its forward twin, each on its own colour scale (a
gradient's centred on 0), step 6's gradient, the sensitivity maps, the loss over the training steps, and what a step
did to W_Q (no st.* here)."""

from __future__ import annotations

import plotly.graph_objects as go
import torch

from ..base.i18n import text
from ..forward.compute import Trace
from ..forward.figures import MASKED_ZEROS, masked_cells
from ..show.heatmap import heatmap
from ..show.heatmap import labels as axis_labels
from .compute import Backward

WEIGHTED_MAX_ROWS = 64  # d weighted's (key, query) rows drawn: its first keys
# a masked score's gradient is exactly 0: the mask's (or the window's) doing, said so
MASKED_GRADIENTS = ("d_scores", "d_scores_uncapped", "d_scores_raw")
KEY_KINDS = ("key", "key token")  # axes of the keys' tokens: cross-attention's x_kv's, not the queries'


def labels(trace: Trace, kind: str, size: int, lang: str = "en") -> list[str]:
    """Axis labels: the keys' tokens on a key axis (x_kv's in cross-attention: its scores are n × n_kv, and x_kv's
    gradient has a row per key token), else as every heatmap labels them."""
    if kind in KEY_KINDS:
        return list(trace.case.key_tokens[:size])
    return axis_labels(trace, kind, size, lang)


def span(*matrices: torch.Tensor | None) -> tuple[float, float]:
    """One colour scale centred on 0 for a gradient (or several): ± the largest magnitude (masked −∞ scores left
    out), so that a gradient all of one sign, or thousands of times smaller than its forward twin, still shows."""
    top = 0.0
    for m in matrices:
        if m is None:
            continue
        values = m[torch.isfinite(m)]
        top = max(top, values.abs().max().item() if values.numel() else 0.0)
    return (-top or -1.0, top or 1.0)


def gradient_pair(result: Backward, grad: str, head: int | None, lang: str = "en") -> tuple[go.Figure, ...]:
    """A gradient (one head of it) on its own scale centred on 0 and, when the trace has it, its forward twin on the
    forward values' scale: a gradient is often far smaller than the number it belongs to (d_scores ~1e-3 beside
    scores of 16), and on one shared scale it is all white."""
    trace, tensor, twin = result.forward, result[grad], result.twin(grad)
    g = tensor[head] if head is not None and result.has_head(grad) else tensor
    f = None if twin is None else trace.view(twin, head)
    kinds = result.axes(grad)[-2:]
    rows, cols = labels(trace, kinds[0], g.shape[0], lang), labels(trace, kinds[1], g.shape[1], lang)
    title = text(lang, "backward.grad", of=grad.removeprefix("d_"))
    cut = masked_cells(trace)
    grads = heatmap(g, rows, cols, *kinds, title, lang, span(g), cut if grad in MASKED_GRADIENTS else None)
    if f is None:
        return (grads,)
    return grads, heatmap(f, rows, cols, *kinds, twin, lang, mask=cut if twin in MASKED_ZEROS else None)


def weighted_gradient(result: Backward, head: int | None, lang: str = "en") -> go.Figure:
    """d weighted: every key's block is the same d outputs (its first keys, as rows key · query)."""
    trace, d = result.forward, result.view("d_weighted", head)
    n_k, n_q, d_v = d.shape
    keys = max(1, min(n_k, WEIGHTED_MAX_ROWS // max(1, n_q)))
    queries, tokens = labels(trace, "query", n_q), labels(trace, "key", n_k)  # the keys': x_kv's in cross-attention
    rows = [f"k {tokens[j]} · q {queries[i]}" for j in range(keys) for i in range(n_q)]
    z = d[:keys].reshape(keys * n_q, d_v)
    title = text(lang, "backward.grad", of="weighted")
    return heatmap(z, rows, labels(trace, "value dim", d_v), "key · query", "value dim", title, lang, span(z))


def sensitivity(result: Backward, lang: str = "en") -> dict[str, go.Figure]:
    """How much each number of x and of each weight matrix moves the picked output: each leaf's gradient."""
    figures = {}
    for name, g in result.gradients.items():
        kinds = result.axes(name)[-2:]
        rows, cols = (
            labels(result.forward, kinds[0], g.shape[0], lang),
            labels(result.forward, kinds[1], g.shape[1], lang),
        )
        title = text(lang, "backward.sensitivity_of", of=name.removeprefix("d_"))
        figures[name] = heatmap(g, rows, cols, *kinds, title, lang, span(g))
    return figures


def loss_line(losses: list[float], lang: str = "en") -> go.Figure:
    """The loss before the first step and after each: a Plotly line, as cheap to build as the heatmaps (an Altair
    chart costs ~50 ms a run)."""
    steps = {"title": {"text": text(lang, "backward.steps_axis")}, "dtick": 1 if len(losses) < 20 else None}
    return go.Figure(
        go.Scatter(x=list(range(len(losses))), y=losses, mode="lines+markers"),
        layout={"title": {"text": text(lang, "backward.loss_title")}, "height": 260, "margin": {"t": 40, "b": 40},
                "xaxis": steps, "yaxis": {"title": {"text": text(lang, "backward.loss_axis")}}},
    )  # fmt: skip


def change(trace: Trace, name: str, before: torch.Tensor, title: str, lang: str = "en") -> go.Figure:
    """What a training step did to a weight: its numbers now less those before, centred on 0."""
    moved = trace[name].double() - before
    kinds = trace.axes(name)
    rows, cols = labels(trace, kinds[0], moved.shape[0], lang), labels(trace, kinds[1], moved.shape[1], lang)
    return heatmap(moved, rows, cols, *kinds, title, lang, span(moved))
