"""Streamlit widgets shared by the pages: the session's inputs, the sidebar, the matrix editors, step navigation."""

from __future__ import annotations

import math
import re

import pandas as pd
import streamlit as st

from . import presets
from .case import (
    DTYPES,
    MAX_ABS,
    MAX_D,
    MAX_HEADS,
    MAX_N,
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    Case,
    CaseError,
    case_to_dict,
    parse_case,
)
from .core import STEP_NAMES, Trace, attend
from .devices import available_devices, gpu_unavailable_reason

MATRICES = ("x", "w_query", "w_key", "w_value")
SIZES = {"n": ("n · tokens", MAX_N), "d_in": ("d_in", MAX_D), "d_k": ("d_k", MAX_D), "d_v": ("d_v", MAX_D)}
SCALES = {"none": "none (the article)", "sqrt_dk": "1/√d_k (textbook)", "custom": "custom factor"}
SESSION = "session"  # sidebar widgets keep their values across page switches
HEADED = {"queries", "keys", "values", "scores_raw", "scores", "weights_exact", "weights", "weighted", "head_outputs"}

# Session state (one per browser tab, never shared): "inputs" holds what the user typed, valid or not, as plain
# lists; "trace" is the last valid computation; the sidebar's widget keys hold the sizes and options.


def start() -> None:
    """Bring the session's inputs up to date with its widgets, before any widget is drawn in this run.

    The first run loads the article. Afterwards a new preset or seed loads that preset, new sizes resize the
    grids, and the editors' cell edits are copied in. Doing this from the widgets' values (not from callbacks)
    makes any way of setting them work the same: the browser, a test, a link.
    """
    s = st.session_state
    if "inputs" not in s:
        s.preset, s.seed, s.fill, s.device = "article", 0, "zeros", "cpu"
    if s.get("loaded") != _preset_choice():
        _load_preset()
    elif (s.n, s.d_in, s.d_k, s.d_v) != _shape():
        _resize()
    _apply_edits()


def _preset_choice() -> tuple:
    s = st.session_state
    return (s.preset, s.seed) if s.preset == "random" else (s.preset,)


def _shape() -> tuple[int, int, int, int]:
    i = st.session_state.inputs
    return len(i["x"]), len(i["x"][0]), len(i["w_key"][0]), len(i["w_value"][0])


def _load(case: Case) -> None:
    """Put a whole case into the session: the editors' grids, the sizes and the option widgets."""
    s = st.session_state
    d, o = case_to_dict(case), case.options
    s.inputs = {name: d[name] for name in (*MATRICES, "tokens")} | {"rounded": d["options"].get("weights_override")}
    s.version = s.get("version", 0) + 1  # new editor keys: edits made to the old grids do not carry over
    s.n, s.d_in, s.d_k, s.d_v = case.n, case.d_in, case.d_k, case.d_v
    s.scale = o.scale if isinstance(o.scale, str) else "custom"
    s.scale_value = 1.0 if isinstance(o.scale, str) else o.scale
    s.temperature, s.mask, s.heads, s.dtype = o.temperature, o.mask or "none", o.heads, o.dtype
    s.use_rounded = o.weights_override is not None


def _load_preset() -> None:
    s = st.session_state
    if s.preset == "article":
        _load(presets.article())
    else:
        _load(presets.random_case(s.get("n", 3), s.get("d_in", 4), s.get("d_k", 3), s.get("d_v", 3), seed=s.seed))
    s.loaded = _preset_choice()


def _resize() -> None:
    s = st.session_state
    grids = presets.resize_grids(_candidate(), s.n, s.d_in, s.d_k, s.d_v, fill=s.fill, seed=s.seed)
    if s.n != _shape()[0]:
        s.inputs["rounded"], s.use_rounded = None, False  # n×n no longer fits
    s.inputs |= {name: grids[name] for name in (*MATRICES, "tokens")}
    s.version += 1


def _candidate() -> dict:
    """The case file the widgets and editors describe now (perhaps invalid)."""
    s, i = st.session_state, st.session_state.inputs
    options = {
        "scale": s.scale_value if s.scale == "custom" else s.scale,
        "temperature": s.temperature,
        "mask": None if s.mask == "none" else s.mask,
        "heads": s.heads,
        "dtype": s.dtype,
        "device": s.device,
    }
    if s.use_rounded and i["rounded"] is not None:
        options["weights_override"] = i["rounded"]
    return {"format": "attention-case/1", **{name: i[name] for name in (*MATRICES, "tokens")}, "options": options}


def sidebar() -> None:
    """Preset, sizes, options and device: shared by every page, so a deep link shows the same numbers."""
    s = st.session_state
    with st.sidebar:
        st.selectbox("Preset", presets.PRESETS, persist_state=SESSION, key="preset")
        left, right = st.columns(2)
        left.number_input(
            "Seed",
            0,
            2**31 - 1,
            step=1,
            persist_state=SESSION,
            key="seed",
            help="For the random preset and random new cells",
        )
        right.button(
            "Reset", key="reset", on_click=_load_preset, help="Reload the preset, dropping your edits", width="stretch"
        )
        with st.expander("Sizes", expanded=False):
            columns = st.columns(2)
            for i, (key, (label, limit)) in enumerate(SIZES.items()):
                columns[i % 2].number_input(label, 1, limit, step=1, persist_state=SESSION, key=key)
            st.radio(
                "New cells",
                ("zeros", "random"),
                persist_state=SESSION,
                key="fill",
                horizontal=True,
                help="Existing numbers are kept",
            )
        st.subheader("Options")
        if s.inputs["rounded"] is not None:
            st.toggle(
                "Article's rounded softmax", persist_state=SESSION, key="use_rounded", help="Off: the exact softmax"
            )
        st.selectbox("Scale", SCALES, format_func=SCALES.get, persist_state=SESSION, key="scale")
        if s.scale == "custom":
            st.number_input("Scale factor", 0.001, 100.0, persist_state=SESSION, key="scale_value", format="%g")
        st.number_input(
            "Temperature",
            MIN_TEMPERATURE,
            MAX_TEMPERATURE,
            step=0.1,
            persist_state=SESSION,
            key="temperature",
            format="%g",
        )
        st.selectbox("Mask", ("none", "causal"), persist_state=SESSION, key="mask")
        st.number_input(
            "Heads", 1, MAX_HEADS, step=1, persist_state=SESSION, key="heads", help="d_k and d_v must divide by it"
        )
        st.radio("dtype", DTYPES, persist_state=SESSION, key="dtype", horizontal=True)
        devices = {d.name: str(d) for d in available_devices()}
        st.selectbox("Device", devices, format_func=devices.get, persist_state=SESSION, key="device")
        if reason := gpu_unavailable_reason():
            st.caption(f"GPU: unavailable, since {reason}.")


def trace() -> Trace:
    """The trace of the current inputs; while they are invalid, a message naming the place and the last valid trace.

    Each page calls this once, first: every run recomputes from the inputs (only when they changed).
    """
    _ensure_app_py_ran()
    s = st.session_state
    try:
        case = parse_case(_candidate())
        s.trace = _memo("trace", case)
    except CaseError as e:
        st.error(f"{plain(str(e))}. The numbers below are from the last valid input: fix it to go on.", icon="⚠️")
        if "trace" not in s:  # nothing valid yet in this session: the article
            s.trace = _memo("trace", presets.article())
    if s.trace.device != "cpu":  # the device switch: show that the GPU agrees with the CPU
        difference = (s.trace.outputs - trace_on(s.trace, "cpu").outputs).abs().max().item()
        st.caption(f"Computed on {s.trace.device}; largest difference from the CPU: {difference:.3g}")
    return s.trace


def _ensure_app_py_ran() -> None:
    """Rerun through app.py when Streamlit ran this page alone.

    A folder named pages/ makes a fresh server start in the legacy multipage mode, which runs a deep-linked page
    without app.py (no sidebar, no state) until app.py's st.navigation has run once in the process. Leaving that
    mode and rerunning sends this same URL through app.py.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def exact_trace(t: Trace) -> Trace:
    """The same case with the exact softmax, to show what the article's rounding changes."""
    d = case_to_dict(t.case)
    d["options"].pop("weights_override", None)
    return _memo("exact", parse_case(d))


def trace_on(t: Trace, device: str) -> Trace:
    d = case_to_dict(t.case)
    d["options"]["device"] = device
    return _memo(f"on:{device}", parse_case(d))


def _memo(slot: str, case: Case) -> Trace:
    """attend(case), kept in this session until the case changes: an edit recomputes, other reruns do not."""
    memo = st.session_state.setdefault("_memo", {})
    if slot not in memo or memo[slot][0] != case:
        memo[slot] = (case, attend(case))
    return memo[slot][1]


def matrix_editor(name: str) -> None:
    """An editable matrix, cell by cell (x with its token labels); every edit recomputes all steps."""
    s = st.session_state
    grid = s.inputs[name]
    columns = [str(j + 1) for j in range(len(grid[0]))]
    frame = pd.DataFrame([[_shown(v) for v in row] for row in grid], columns=columns, dtype="float64")
    frame.index = [str(i + 1) for i in range(len(grid))]
    config = {c: st.column_config.NumberColumn(c, min_value=-MAX_ABS, max_value=MAX_ABS) for c in columns}
    if name == "x":
        frame.insert(0, "token", s.inputs["tokens"])
        config["token"] = st.column_config.TextColumn("token", required=True, max_chars=40)
    st.data_editor(frame, key=editor_key(name), num_rows="fixed", column_config=config)


def editor_key(name: str) -> str:
    """The editor's widget key: new after a preset, reset or resize, so that old edits do not apply to new grids."""
    return f"editor_{name}_{st.session_state.version}"


def _shown(value: object) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _apply_edits() -> None:
    """Copy the editors' cell edits into the session's inputs, as typed (validation follows).

    An editor's state holds all its edits relative to the grid it was given, which already has the earlier ones:
    applying them again changes nothing, so this can run at the start of every run, on any page.
    """
    s = st.session_state
    for name in MATRICES:
        if editor_key(name) in s:
            _apply(name, s[editor_key(name)])


def _apply(name: str, delta: dict) -> None:
    grid, tokens = st.session_state.inputs[name], st.session_state.inputs["tokens"]
    for row, changes in delta.get("edited_rows", {}).items():
        if not str(row).isdigit() or int(row) >= len(grid):
            continue  # rows cannot be added here: the size is set in the sidebar
        i = int(row)
        for column, value in changes.items():
            if column == "token" and name == "x":
                tokens[i] = value
            elif str(column).isdigit() and 1 <= int(column) <= len(grid[i]):
                grid[i][int(column) - 1] = value


def step_picker() -> int:
    """Previous / next buttons and a picker over steps 1-8; the choice survives a visit to another page."""
    s = st.session_state
    s.setdefault("step", 1)
    s.step_picker = s.step
    previous, picker, following = st.columns([1, 8, 1], vertical_alignment="center")
    previous.button("◀", key="previous", on_click=_move, args=(-1,), disabled=s.step == 1, help="Previous step")
    following.button("▶", key="next", on_click=_move, args=(1,), disabled=s.step == 8, help="Next step")
    picker.radio(
        "Step",
        range(1, 9),
        format_func=lambda i: f"{i} {STEP_NAMES[i - 1]}",
        key="step_picker",
        horizontal=True,
        label_visibility="collapsed",
        on_change=lambda: s.update(step=s.step_picker),
    )
    return s.step


def _move(by: int) -> None:
    st.session_state.step = min(8, max(1, st.session_state.step + by))


def head_picker(t: Trace, key: str) -> int | None:
    """Which head to show, when there are several."""
    h = t.case.options.heads
    if h == 1:
        return None
    return st.radio("Head", range(h), format_func=lambda i: f"head {i + 1}", key=key, horizontal=True)


def token_picker(t: Trace, label: str, key: str) -> int:
    """Pick a token by its label; Input 2 first when there is one (the article's Input 1 has weight 0 everywhere)."""
    index = min(1, t.case.n - 1)
    return st.selectbox(label, range(t.case.n), index=index, format_func=lambda i: t.case.tokens[i], key=key)


def plain(text: str) -> str:
    """User text (a token label inside a message) shown as typed: Markdown and HTML characters escaped."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$])", r"\\\1", text)
