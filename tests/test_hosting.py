"""Ready for a hosted demo: hostile edits and URLs, session isolation, device faults, and the server config."""

import copy
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

import attention
from attention.app import traces
from attention.app.text import plain
from attention.base import device as base_device
from attention.base.case import with_options
from attention.base.device import Device
from attention.base.files import case_to_link
from attention.base.presets import article, random_case
from tests.apptest import APP, ARTICLE_OUTPUTS, charts, current_trace, edit, forge

ROOT = Path(__file__).resolve().parents[1]


# Hostile editor states the editor itself never sends, but a forged client can.
@pytest.mark.parametrize(
    "edits",
    [
        {"cells": {"0,zzz": "1"}},  # a column that does not exist
        {"cells": {"99,0": "1"}},  # a row that does not exist
        {"cells": {"-1,0": "1"}},
        {"cells": {"²,²": "1"}},  # isdigit() is true for "²", int() is not
        {"cells": {"0,1": [1, 2]}},
        {"cells": {"0,1": {"a": 1}}},
        {"cells": {f"{i},0": "1" for i in range(3, 5000)}},  # thousands of cells x does not have
        {"labels": {"0": ["a"], "1": None}},
        [["1", "2"]],
        "1,1",
    ],
)
def test_a_forged_edit_never_raises_and_keeps_the_last_valid_result(at, edits):
    at.switch_page("pages/inputs.py").run()
    forge(at, "x", edits)
    assert not at.exception
    assert current_trace(at).case.n == 3
    np.testing.assert_allclose(charts(at)["outputs"], ARTICLE_OUTPUTS)


@pytest.mark.parametrize(("key", "value"), [("n", 5000), ("n", 0), ("d_k", -3), ("d_v", 65), ("heads", 10**9)])
def test_sizes_outside_the_limits_never_reach_the_core(at, key, value):
    at.session_state[key] = value  # as a forged client would send: Streamlit brings it back within the widget's range
    at.run()
    assert not at.exception
    case = current_trace(at).case
    assert 1 <= case.n <= 1024 and max(case.d_in, case.d_k, case.d_v) <= 64 and case.options.heads <= 64


@pytest.mark.parametrize(
    "query",
    [
        {"case": ["garbage", case_to_link(with_options(article(), temperature=2.0))]},  # repeated: the last wins
        {"case": "%00%ff" * 50},
        {"case": ""},
        {"step": ["1", "2", "x"]},
        {"unknown": "1", "__proto__": "x"},
    ],
)
def test_hostile_urls_are_ignored_or_refused_without_a_traceback(query):
    app = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        app.query_params[k] = v
    app.run()
    assert not app.exception
    assert current_trace(app).case.n == 3


def test_html_script_links_and_icons_in_token_labels_are_text_everywhere():
    hostile = ['<img src=x onerror="alert(1)">', "<script>alert(2)</script>", "[link](javascript:alert(3))"]
    hostile += ["http://localhost:1/x", ":rocket: :material/home:", "**bold** $x^2$"]
    case = with_options(random_case(6, 2, 2, 2, seed=1), weights_override=None)
    case = attention.parse_case({**attention.case_to_dict(case), "tokens": hostile})
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params["case"] = case_to_link(case)
    app.run()
    for page in ("walkthrough", "broadcasting", "explain", "one_query"):
        app.switch_page(f"pages/{page}.py").run()
        assert not app.exception
        for chart in app.get("plotly_chart"):
            text = chart.proto.spec
            assert "<img" not in text and "<script" not in text, page  # Plotly renders some HTML: escaped
    app.switch_page("pages/inputs.py").run()
    for row, token in enumerate(hostile):
        edit(app, "x", row, "1", float("nan"))
        assert app.error[0].value.startswith(plain(f"x, row {row + 1} ({token})"))  # escaped: shown as typed
        edit(app, "x", row, "1", 1.0)


def test_two_sessions_editing_at_once_never_see_each_others_numbers():
    a, b = (AppTest.from_file(APP, default_timeout=60).run() for _ in range(2))
    for app in (a, b):
        app.switch_page("pages/inputs.py").run()
    edit(a, "x", 1, "2", 5.0)
    edit(b, "w_value", 1, "2", 9.0)
    edit(a, "x", 2, "1", 4.0)
    b.run()
    assert current_trace(a).case.x[1][1] == 5.0 and current_trace(a).case.w_value[1][1] == 3.0
    assert current_trace(b).case.x[1][1] == 2.0 and current_trace(b).case.w_value[1][1] == 9.0
    fresh = AppTest.from_file(APP, default_timeout=60).run()
    np.testing.assert_allclose(current_trace(fresh).outputs, ARTICLE_OUTPUTS)


SHARED = {"attention.models.offered._loaded"}  # the loaded models' parameters: shared by every session by design


def _module_state() -> dict:
    """Every module-level value of the package and the pages that could hold user data."""
    state = {}
    for name, module in list(sys.modules.items()):
        if name == "attention" or name.startswith("attention."):
            for k, v in vars(module).items():
                shared = f"{name}.{k}" in SHARED
                if not k.startswith("__") and not shared and isinstance(v, dict | list | set | bytearray):
                    state[f"{name}.{k}"] = copy.deepcopy(v)
    return state


def test_no_user_data_in_module_globals_or_shared_caches(at):
    before = _module_state()
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 1, "2", 123.0)
    at.switch_page("pages/explain.py").run()
    assert _module_state() == before  # nothing a session did is held at module level
    paths = [*ROOT.glob("attention/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"]
    sources = {p.relative_to(ROOT).as_posix(): p.read_text() for p in paths}
    assert not any("\nglobal " in s or "    global " in s for s in sources.values())
    # no st.cache_resource: the one shared cache is the real models' parameters, in the process's one cache of loaded
    # models (offered.open_offer, keyed by a model's id alone)
    assert not [name for name, s in sources.items() if "cache_resource" in s]
    assert sources["attention/models/offered.py"].count("_loaded: OrderedDict[str, Model] = OrderedDict()") == 1


def test_a_gpu_that_fails_mid_run_falls_back_to_the_cpu_and_keeps_the_numbers(monkeypatch, at):
    """Simulated: a listed GPU whose every use fails as CUDA out of memory (a CPU-only torch cannot fail for real)."""
    listed = (Device("cpu", "test CPU"), Device("cuda:0", "Simulated GPU"))
    monkeypatch.setattr(base_device, "available_devices", lambda: listed)
    monkeypatch.setattr("attention.app.sidebar.available_devices", lambda: listed)
    real_attend = traces.attend

    def failing(case):
        if case.options.device != "cpu":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_attend(case)

    monkeypatch.setattr(traces, "attend", failing)
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 1, "2", 5.0)
    at.selectbox(key="device").set_value("cuda:0").run()
    assert not at.exception
    assert any("cuda:0 device failed (OutOfMemoryError" in w.value for w in at.warning)
    assert current_trace(at).device == "cpu"
    assert current_trace(at).case.x[1][1] == 5.0  # nothing lost
    at.run()
    assert at.selectbox(key="device").value == "cpu"  # the session stays on the CPU


def test_a_listed_gpu_that_torch_cannot_use_falls_back_too(monkeypatch, at):
    """A CPU-only torch asked for CUDA fails with an AssertionError on first use: the real error, here."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    listed = (Device("cpu", "test CPU"), Device("cuda:0", "Simulated GPU"))
    monkeypatch.setattr(base_device, "available_devices", lambda: listed)
    monkeypatch.setattr("attention.app.sidebar.available_devices", lambda: listed)
    at.run()  # the sidebar lists the simulated GPU
    at.selectbox(key="device").set_value("cuda:0").run()
    assert not at.exception
    assert any("AssertionError" in w.value for w in at.warning)
    np.testing.assert_allclose(current_trace(at).outputs, ARTICLE_OUTPUTS)


def test_hosting_config():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "type"  # the exception type, never a traceback
    assert config["server"]["enableXsrfProtection"] is True and config["server"]["enableCORS"] is True
    assert config["server"]["maxMessageSize"] <= 200 and config["server"]["maxUploadSize"] <= 8
    assert config["browser"]["gatherUsageStats"] is False


def test_a_message_at_the_size_limits_fits_the_configured_cap():
    """The largest rerun's message (the walkthrough's biggest step at the limits) fits server.maxMessageSize."""
    from attention.forward import figures

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    trace = attention.attend(random_case(1024, 64, 64, 64))
    figures_bytes = sum(
        len(f.to_json())
        for f in (
            figures.tensor_heatmap(trace, "scores_raw"),
            figures.tensor_heatmap(trace, "scores"),
            figures.weighted_heatmap(trace),
        )
    )
    assert figures_bytes < config["server"]["maxMessageSize"] * 2**20 / 2, figures_bytes
