"""Helpers for the AppTest suites: the app's path, its pages, and reading what a run drew."""

import base64
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = [
    "overview",
    "walkthrough",
    "inputs",
    "broadcasting",
    "one_query",
    "variants",
    "multi_head",
    "explain",
    "devices",
]
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


def edit(app: AppTest, matrix: str, row: int, column: str, value) -> AppTest:
    """A data-editor edit as the browser sends it (AppTest cannot type into the grid)."""
    key = f"editor_{matrix}_{app.session_state['version']}"
    app.session_state[key] = {"edited_rows": {row: {column: value}}, "added_rows": [], "deleted_rows": []}
    return app.run()


def open_share_panel(app: AppTest) -> AppTest:
    """Open the sidebar's Share and export panel, as a click does: its content is made when it is open."""
    app.session_state["share_panel"] = True
    return app.run()
