"""Helpers for the AppTest suites: the app's path, its pages, the session model, and reading what a run drew."""

import base64
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from attention.app import editors, traces, typed
from attention.app.registry import PAGES as REGISTRY
from attention.app.session import Session
from attention.app.tab import KEY
from attention.base.files import case_to_link
from attention.forward.compute import Trace

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = [page.name for page in REGISTRY]
ARTICLE_OUTPUTS = [[2.0, 7.0, 1.5], [2.0, 8.0, 0.0], [2.0, 7.8, 0.3]]
# A case file with typed tokens, an explicit mask whose last row attends to nothing, a scale and float64.
MASKED_CASE = {
    "format": "attention-case/1",
    "tokens": ["the", "cat", "sat"],
    "x": [[1, 2], [3, 4], [5, 6]],
    "w_query": [[1, 0], [0, 1]],
    "w_key": [[0.5, 0], [0, 0.5]],
    "w_value": [[1, 1], [0, 1]],
    "options": {"mask": [[1, 0, 0], [1, 1, 0], [0, 0, 0]], "scale": 0.7, "dtype": "float64"},
}


def linked(case, timeout: int = 60) -> AppTest:
    """The app opened from a link to the case (its `case` parameter), after its first run."""
    app = AppTest.from_file(APP, default_timeout=timeout)
    app.query_params["case"] = case_to_link(case)
    return app.run()


def rendered(app: AppTest, page: str) -> AppTest:
    """The app switched to pages/PAGE.py, which must run without an exception or an error shown."""
    app = app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    return app


def charts(app: AppTest) -> dict[str, np.ndarray]:
    """Every heatmap's z by its title, decoded from Plotly's typed-array JSON."""

    out = {}
    for chart in app.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        z = spec["data"][0]["z"]
        if isinstance(z, dict):  # {"dtype", "bdata", "shape"}
            shape = [int(s) for s in str(z["shape"]).split(",")]
            z = np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape)
        title = (spec["layout"].get("title") or {}).get("text", "")
        out[title] = np.asarray(z, dtype=float)
    return out


def session(app: AppTest) -> Session:
    """The session model of the app's one session (the object itself: a test may change it, then run)."""
    return app.session_state[KEY]


def current_trace(app: AppTest) -> Trace:
    """The trace the pages show (kept by the session's cache: made here only if the last run did not)."""
    return traces.current(session(app))


def edit(app: AppTest, matrix: str, row: int, column: str, value) -> AppTest:
    """An edit as the matrix editor sends it: its state gains the cell's text (a number is sent as it is written),
    as typed; `column` is "1", "2", … or "token" (x's label), `row` counts from 0 (AppTest has no browser to type)."""
    key = editors.editor_key(session(app), matrix)
    state = app.session_state[key] if key in app.session_state else {}  # noqa: SIM401 (AppTest has no get)
    edits = state.get("edits") or {"cells": {}, "labels": {}}
    text = value if isinstance(value, str) else typed.shown(value)
    if column == "token":
        edits = {**edits, "labels": {**edits["labels"], str(row): text}}
    else:
        edits = {**edits, "cells": {**edits["cells"], f"{row},{int(column) - 1}": text}}
    app.session_state[key] = {"edits": edits}
    return app.run()


def forge(app: AppTest, matrix: str, edits: object) -> AppTest:
    """An editor state no real editor sends (a forged client's)."""
    app.session_state[editors.editor_key(session(app), matrix)] = {"edits": edits}
    return app.run()


def component_data(element) -> object:
    """The data a components v2 element was drawn with (the matrix editor sends its own as JSON text)."""
    data = json.loads(element.proto.json or "null")
    return json.loads(data) if isinstance(data, str) else data


def open_share_panel(app: AppTest) -> AppTest:
    """Open the sidebar's Share and export panel, as a click does: its content is made when it is open."""
    app.session_state["share_panel"] = True
    return app.run()
