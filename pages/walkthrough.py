"""Walkthrough page: the eight steps one at a time, each with its formula, its code and its tensors."""

import streamlit as st

from attention import figures, ui

trace = ui.trace()
step = trace.steps[ui.step_picker() - 1]
ui.player()

st.header(f"Step {step.number} · {step.title}")
st.write(step.explanation)
st.latex(step.formula)
st.code(step.code, language="python")
for note in step.notes:
    st.info(ui.plain(note))

head = ui.head_picker(trace, "walkthrough_head") if set(step.tensors) & ui.PER_HEAD else None
for name, tensor in step.tensors.items():
    h = head if name in ui.PER_HEAD else None
    shape = " × ".join(map(str, tensor.shape))
    st.subheader(f"`{name}` · ({shape}) · {str(tensor.dtype).removeprefix('torch.')} · computed on {step.device}")
    if name == "weighted":
        st.caption("Rows are (key j, query i) pairs: element [j, i] is query i's weight on key j times value j.")
        ui.chart(figures.weighted_heatmap(trace, h), f"chart_{name}")
        continue
    chart, table = st.columns([3, 2])
    ui.chart(figures.tensor_heatmap(trace, name, h), f"chart_{name}", where=chart)
    if (frame := figures.table(trace, name, h)) is not None:
        table.dataframe(frame, key=f"table_{name}")

if step.name in ("softmax", "outputs") and trace.case.options.weights_override is not None:
    exact = ui.exact_trace(trace)
    name = "weights" if step.name == "softmax" else "outputs"
    st.subheader("The article's rounding versus the exact softmax")
    left, right = st.columns(2)
    ui.chart(figures.tensor_heatmap(exact, name, title=f"{name}, exact softmax"), "chart_exact", where=left)
    difference = figures.heatmap(
        trace[name] - exact[name],
        figures.labels(trace, "query", trace.case.n),
        figures.labels(trace, figures.AXES[name][1], trace[name].shape[1]),
        *figures.AXES[name],
        title=f"{name}: rounded − exact",
    )
    ui.chart(difference, "chart_difference", where=right)
