"""The Devices page's parts: per-thread warm-up, the step times shown (median of runs), and the project's measured
figures read back from bench/*.md for a reader without a GPU."""

from __future__ import annotations

import threading

import pytest
import torch

from attention import attend
from attention.base import device
from attention.base.presets import article
from attention.devices.figures import measured_times
from attention.devices.measured import BENCH, _parse, measured


def test_a_new_thread_warms_up_before_its_first_step():
    """Streamlit runs every rerun in a new thread, and PyTorch starts a team of CPU threads for each new thread's
    first parallel operation: that start-up must be the warm-up's, not step 5's."""
    seen = {}

    def run():
        seen["before"] = set(device._warmed.__dict__.get("devices", ()))
        attend(article())
        seen["after"] = set(device._warmed.__dict__["devices"])

    attend(article())  # this thread warmed: a new one is not
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == {"before": set(), "after": {"cpu"}}


def test_the_projects_cpu_figures_are_read_from_bench_core_md():
    found = measured()["cpu"]
    assert "CPUs" in found.machine
    assert sorted(found.step_ms) == sorted(found.trace_ms) == sorted(found.fused_ms) and 1024 in found.step_ms
    assert all(len(steps) == 8 for steps in found.step_ms.values())
    text = (BENCH / "core.md").read_text(encoding="utf-8")
    assert f"| 1024 | {found.step_ms[1024][0]:.3f} |" in text  # the steps' table's first cell, as written
    table = measured_times(found)
    assert list(table.columns) == [f"n = {n}" for n in found.step_ms] and table.shape == (10, len(found.step_ms))
    assert (
        table.loc["whole trace", "n = 1024"] == found.trace_ms[1024]
    )  # sizes across: five fit a page, ten steps did not


def test_a_gpu_file_is_read_the_same_way():
    """bench/core.py --device cuda writes one more column (the GPU's peak) and names the GPU on the machine line."""
    text = "\n".join(
        [
            "# Traced core vs fused attention (cuda)",
            "",
            "- machine: Linux, x86_64, 16 CPUs, NVIDIA H200",
            "",
            "| n | d_in/d_k/d_v | trace ms | fused ms | ratio | target | met? | max abs diff | peak MiB | floor MiB "
            "| peak / floor | target | met? | GPU peak MiB |",
            "|---:|:---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|:---:|---:|",
            "| 3 | 4/3/3 | 1.5 | 0.05 | 30× | ≤ 2× | no | 0.32 | 900 | 890 | 1.01× |  |  | 8 |",
            "",
            "Time per step on the device (ms, synchronised; median of 20 traces):",
            "",
            "| n | 1 inputs | 2 weights | 3 qkv | 4 scores | 5 softmax | 6 weighted | 7 outputs | 8 repeat |",
            "|---:|" + "---:|" * 8,
            "| 3 | 0.1 | 0.2 | 0.3 | 0.4 | 0.5 | 0.6 | 0.7 | 0.8 |",
        ]
    )
    found = _parse(text)
    assert found.machine.endswith("NVIDIA H200")
    assert found.trace_ms == {3: 1.5} and found.fused_ms == {3: 0.05}
    assert found.step_ms == {3: (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)}


def test_the_devices_page_says_what_a_gpu_would_change_and_shows_the_measured_figures(at):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the page shows it instead")
    at.switch_page("pages/devices.py").run()
    assert not at.exception
    headings = [h.value for h in at.main.subheader]
    assert headings[-2:] == ["What a GPU would change", "Measured by the project (ms)"]
    text = " ".join(m.value for m in at.markdown)
    assert "(a + b) + c" in text and "TF32" in text and "kernel launch" in text
    captions = " ".join(c.value for c in at.caption)
    assert "bench/core.md" in captions and "No GPU figures yet" in captions and "median of five" in captions
    tables = [frame.value for frame in at.dataframe]  # the devices, the times here, the measured figures
    assert "n = 1024" in tables[-1].columns and "whole trace" in tables[-1].index
    times = tables[1]
    assert len(times) == 8 and (times["cpu"] > 0).all()


def test_step_5_shows_the_exact_softmax_once(at):
    """weights_exact is one of step 5's tensors: the rounding's comparison shows its difference, not it again."""
    at.switch_page("pages/walkthrough.py").run()
    at.radio(key="step_picker").set_value("softmax").run()
    titles = [chart.proto.spec for chart in at.get("plotly_chart")]
    assert sum('"weights_exact' in spec for spec in titles) == 1
    assert not any("exact softmax" in spec and "rounded −" not in spec for spec in titles)
