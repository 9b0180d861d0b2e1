"""Devices page: what PyTorch has here, where the trace ran, per-step times, and CPU versus GPU results."""

import pandas as pd
import streamlit as st

from attention import available_devices, figures, gpu_unavailable_reason, ui

trace = ui.trace()
st.header("Devices")
devices = available_devices()
st.dataframe(
    pd.DataFrame({"device": [d.name for d in devices], "description": [d.description for d in devices]}),
    hide_index=True,
    key="table_devices",
)
if reason := gpu_unavailable_reason():
    st.info(f"GPU: unavailable, since {reason}. Everything runs on the CPU.")
st.write(f"This trace ran on **{trace.device}** in **{trace.case.options.dtype}**. Choose the device in the sidebar.")

traces = {d.name: ui.trace_on(trace, d.name) for d in devices}
st.subheader("Time per step (ms, synchronised)")
st.dataframe(figures.step_times(traces), key="table_times")

if len(traces) > 1:
    st.subheader("Outputs on each device")
    cpu = traces["cpu"].outputs
    for column, (name, t) in zip(st.columns(len(traces)), traces.items(), strict=True):
        column.caption(name)
        if (frame := figures.table(t, "outputs")) is not None:
            column.dataframe(frame, key=f"table_outputs_{name}")
        if name != "cpu":
            column.write(f"largest difference from the CPU: {(t.outputs - cpu).abs().max().item():.3g}")
