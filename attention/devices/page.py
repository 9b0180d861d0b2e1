"""The Devices page's body: what PyTorch has here, where the trace ran, per-step times, CPU versus GPU results, and
what a GPU would change, with the project's measured figures (shown on a CPU-only machine too)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..app import charts, frame, tab
from ..app.language import lang, t
from ..base.device import available_devices, gpu_unavailable_reason
from ..base.i18n import render
from ..show.tables import table
from . import figures, state
from .measured import measured


def devices() -> None:
    trace = frame.trace()
    st.header(t("devices.header"))
    devices = available_devices()
    st.dataframe(
        pd.DataFrame(
            {
                t("devices.device"): [d.name for d in devices],
                t("devices.description"): [render(lang(), d.description) for d in devices],
            }
        ),
        hide_index=True,
        key="table_devices",
    )
    if reason := gpu_unavailable_reason():
        st.info(t("devices.gpu_unavailable", reason=reason))
    st.write(t("devices.ran_on", device=trace.device, dtype=trace.case.options.dtype))

    traces = {d.name: state.on_device(tab.current(), trace, d.name) for d in devices}
    st.subheader(t("devices.times"))
    seconds = {name: state.step_seconds(tab.current(), other) for name, other in traces.items()}
    st.dataframe(figures.step_times(trace.steps, seconds, lang()), key="table_times")
    st.caption(t("devices.times_why"))

    if len(traces) > 1:
        st.subheader(t("devices.outputs"))
        cpu = traces["cpu"].outputs
        outputs = {name: table(other, "outputs", lang=lang()) for name, other in traces.items()}
        # side by side while every table fits a column whole; else each device's under the last, its caption,
        # table and difference together (a wide table under the row of columns lay under every device's caption)
        beside = all(charts.fits_beside(numbers) for numbers in outputs.values())
        places = st.columns(len(traces)) if beside else [st.container() for _ in traces]
        for column, (name, other) in zip(places, traces.items(), strict=True):
            column.caption(name)
            if (numbers := outputs[name]) is not None:
                charts.numbers(numbers, f"table_outputs_{name}", where=column)
            if name != "cpu":
                column.write(t("devices.difference", difference=(other.outputs - cpu).abs().max().item()))

    st.subheader(t("devices.on_a_gpu"))
    for part in ("same", "speed", "tf32"):
        st.markdown(t(f"devices.gpu_{part}"))
    st.subheader(t("devices.measured"))
    found = measured()
    for kind, figures_of in found.items():
        st.caption(t(f"devices.measured_{kind}", machine=figures_of.machine))
        st.dataframe(figures.measured_times(figures_of, lang()), key=f"table_measured_{kind}")
    if "cuda" not in found:
        st.caption(t("devices.no_gpu_figures"))
