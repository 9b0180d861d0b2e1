"""Streamlit widgets shared by the pages: the session's inputs, the sidebar, the matrix editors, step navigation."""

from __future__ import annotations

import math
import re
import time
from dataclasses import fields

import pandas as pd
import streamlit as st

from . import figures, files, i18n, oracles, presets, reconnect
from .case import (
    DTYPES,
    MAX_ABS,
    MAX_D,
    MAX_HEADS,
    MAX_N,
    MAX_SCALE,
    MAX_TEMPERATURE,
    MAX_TOKEN_CHARS,
    MIN_SCALE,
    MIN_TEMPERATURE,
    Case,
    CaseError,
    Options,
    case_to_dict,
    parse_case,
    with_options,
)
from .core import AXES, PER_HEAD, STEP_NAMES, Tensor, Trace, attend
from .devices import available_devices, gpu_unavailable_reason, resolve_device
from .i18n import LANGUAGES, language_for, msg, render
from .script import to_script

MATRICES = ("x", "w_query", "w_key", "w_value")
SIZES = {"n": MAX_N, "d_in": MAX_D, "d_k": MAX_D, "d_v": MAX_D}  # labels: the catalogue's sidebar.size_<key>
SCALES = ("none", "sqrt_dk", "custom")  # shown as the catalogue's scale.<name>
SESSION = "session"  # widgets keep their values across page switches
TRACE_FILE_MAX_NUMBERS = 1_000_000  # a trace file is written in Python, number by number: ~1 s per million
# Focus made visible where Streamlit's own indicator is not: a radio option or checkbox/toggle hides its real
# <input> (react-aria's VisuallyHidden) and marks focus only with a faint background, and sidebar page links
# show none. No theme option sets these, so a rule in the text colour (readable on both themes) outlines them.
FOCUS_CSS = """<style>
[data-testid=stRadioOption]:has(input:focus-visible), [data-testid=stCheckbox] label:has(input:focus-visible),
[data-testid=stSidebarNavLink]:focus-visible { outline: 2px solid currentColor; outline-offset: 2px; }
</style>"""


def lang() -> str:
    """The session's language: the sidebar's choice, else the browser's (before the first run has set it)."""
    chosen = st.session_state.get("lang")
    return chosen if chosen in LANGUAGES else language_for(st.context.locale)


def t(key: str, /, **params) -> str:
    """The catalogue's text for `key` in the session's language."""
    return i18n.text(lang(), key, **params)


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
        s.preset, s.seed, s.fill, s.device, s.notices = "article", 0, "zeros", "cpu", []
        s.lang = language_for(st.context.locale)  # the browser's language; a link's ?lang= wins below
        _load_preset()
        _open_link()
    if reconnect.follow(upload_lost=t("notice.upload_lost")):  # this page's server was lost: restored from its link
        s.notices.append(msg("notice.server_changed"))
    if s.pop("fall_back_to_cpu", False):
        s.device = "cpu"
    if s.loaded != _preset_choice():
        _load_preset()
    elif (s.n, s.d_in, s.d_k, s.d_v) != _shape():
        _resize()
    _apply_edits()


def _open_link() -> None:
    """A shared link (?case=…&step=…&lang=…) restores its case, step and language; a bad one is refused with a note."""
    s, params = st.session_state, st.query_params
    if token := params.get("case"):
        try:
            _load(files.case_from_link(token))
        except CaseError as e:
            s.notices.append(msg("notice.link_refused", error=e.message))
    if step := params.get("step"):
        if step in {str(i) for i in range(1, 9)}:
            s.step = int(step)
        else:
            s.notices.append(msg("notice.bad_step"))
    if language := params.get("lang"):
        if language in LANGUAGES:
            s.lang = language
        else:
            s.notices.append(msg("notice.bad_lang", languages=", ".join(LANGUAGES)))


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
    s.inputs = {name: d[name] for name in (*MATRICES, "tokens")} | {
        "rounded": d["options"].get("weights_override"),
        "w_out": d["options"].get("w_out"),
        "mask": d["options"]["mask"] if isinstance(o.mask, tuple) else None,  # an explicit 0/1 matrix
    }
    s.version = s.get("version", 0) + 1  # new editor keys: edits made to the old grids do not carry over
    s.n, s.d_in, s.d_k, s.d_v = case.n, case.d_in, case.d_k, case.d_v
    s.scale = o.scale if isinstance(o.scale, str) else "custom"
    s.scale_value = 1.0 if isinstance(o.scale, str) else o.scale
    s.temperature, s.heads, s.dtype = o.temperature, o.heads, o.dtype
    s.mask = "custom" if isinstance(o.mask, tuple) else o.mask or "none"
    s.use_rounded = o.weights_override is not None
    s.device = _device_here(o.device)


def _device_here(spec: str) -> str:
    """The device a case asks for, when it is here; else the CPU, with a note."""
    try:
        return str(resolve_device(spec))
    except CaseError as e:
        st.session_state.notices.append(msg("notice.device_cpu", error=e.message))
        return "cpu"


def _load_preset() -> None:
    s = st.session_state
    device = s.device  # a preset has numbers, not a device: the chosen one stays
    if s.preset == "article":
        _load(presets.article())
    else:
        _load(presets.random_case(s.get("n", 3), s.get("d_in", 4), s.get("d_k", 3), s.get("d_v", 3), seed=s.seed))
    s.loaded, s.device = _preset_choice(), device


def _resize() -> None:
    s = st.session_state
    grids = presets.resize_grids(_candidate(), s.n, s.d_in, s.d_k, s.d_v, fill=s.fill, seed=s.seed)
    if s.n != _shape()[0]:  # n×n matrices no longer fit
        s.inputs["rounded"], s.inputs["mask"], s.use_rounded = None, None, False
        s.mask = "none" if s.mask == "custom" else s.mask
    s.inputs |= {name: grids[name] for name in (*MATRICES, "tokens")} | {"w_out": grids["options"].get("w_out")}
    s.version += 1


def _candidate() -> dict:
    """The case file the widgets and editors describe now (perhaps invalid)."""
    s, i = st.session_state, st.session_state.inputs
    options = {
        "scale": s.scale_value if s.scale == "custom" else s.scale,
        "temperature": s.temperature,
        "mask": {"none": None, "custom": i["mask"]}.get(s.mask, s.mask),
        "heads": s.heads,
        "dtype": s.dtype,
        "device": s.device,
    }
    if s.use_rounded and i["rounded"] is not None:
        options["weights_override"] = i["rounded"]
    if i["w_out"] is not None:
        options["w_out"] = i["w_out"]
    return {"format": "attention-case/1", **{name: i[name] for name in (*MATRICES, "tokens")}, "options": options}


def sidebar() -> None:
    """Preset, sizes, options and device: shared by every page, so a deep link shows the same numbers."""
    s = st.session_state
    language = lang()  # format_func runs later too (AppTest calls it after the run): it keeps this run's language
    with st.sidebar:
        st.selectbox(t("sidebar.language"), LANGUAGES, format_func=LANGUAGES.get, persist_state=SESSION, key="lang")
        st.selectbox(
            t("sidebar.preset"),
            presets.PRESETS,
            format_func=lambda p: i18n.text(language, f"preset.{p}"),
            persist_state=SESSION,
            key="preset",
        )
        left, right = st.columns(2)
        left.number_input(
            t("sidebar.seed"),
            0,
            2**31 - 1,
            step=1,
            persist_state=SESSION,
            key="seed",
            help=t("sidebar.seed_help"),
        )
        right.button(
            t("sidebar.reset"), key="reset", on_click=_load_preset, help=t("sidebar.reset_help"), width="stretch"
        )
        with st.expander(t("sidebar.sizes"), expanded=False):
            columns = st.columns(2)
            for i, (key, limit) in enumerate(SIZES.items()):
                columns[i % 2].number_input(t(f"sidebar.size_{key}"), 1, limit, step=1, persist_state=SESSION, key=key)
            st.radio(
                t("sidebar.fill"),
                ("zeros", "random"),
                format_func=lambda f: i18n.text(language, f"fill.{f}"),
                persist_state=SESSION,
                key="fill",
                horizontal=True,
                help=t("sidebar.fill_help"),
            )
        st.subheader(t("sidebar.options"))
        if s.inputs["rounded"] is not None:
            st.toggle(t("sidebar.rounded"), persist_state=SESSION, key="use_rounded", help=t("sidebar.rounded_help"))
        st.selectbox(
            t("sidebar.scale"),
            SCALES,
            format_func=lambda v: i18n.text(language, f"scale.{v}"),
            persist_state=SESSION,
            key="scale",
        )
        if s.scale == "custom":
            st.number_input(
                t("sidebar.scale_value"), MIN_SCALE, MAX_SCALE, persist_state=SESSION, key="scale_value", format="%g"
            )
        st.number_input(
            t("sidebar.temperature"),
            MIN_TEMPERATURE,
            MAX_TEMPERATURE,
            step=0.1,
            persist_state=SESSION,
            key="temperature",
            format="%g",
        )
        masks = ("none", "causal", "custom") if s.inputs["mask"] is not None else ("none", "causal")
        st.selectbox(
            t("sidebar.mask"),
            masks,
            format_func=lambda m: i18n.text(language, f"mask.{m}"),
            persist_state=SESSION,
            key="mask",
            help=t("sidebar.mask_help"),
        )
        st.number_input(
            t("sidebar.heads"), 1, MAX_HEADS, step=1, persist_state=SESSION, key="heads", help=t("sidebar.heads_help")
        )
        st.radio(t("sidebar.dtype"), DTYPES, persist_state=SESSION, key="dtype", horizontal=True)
        devices = {
            d.name: t("sidebar.device_option", name=d.name, description=d.description) for d in available_devices()
        }
        st.selectbox(t("sidebar.device"), devices, format_func=devices.get, persist_state=SESSION, key="device")
        if reason := gpu_unavailable_reason():
            st.caption(t("sidebar.gpu_unavailable", reason=reason))


def trace() -> Trace:
    """The trace of the current inputs; while they are invalid, a message naming the place and the last valid trace.

    Each page calls this once, first: every run recomputes from the inputs (only when they changed), checks the
    result against PyTorch's attention, keeps the URL a link to this view, and adds the share panel.
    """
    _ensure_app_py_ran()
    s = st.session_state
    for notice in s.notices:
        st.warning(plain(render(lang(), notice)), icon=":material/link:")
    s.notices = []
    try:
        s.trace = _memo("trace", _parsed(_candidate()))
    except CaseError as e:
        st.error(t("error.last_valid", error=plain(render(lang(), e.message))), icon="⚠️")
        if "trace" not in s:  # nothing valid yet in this session: the article
            s.trace = _memo("trace", presets.article())
    for note in s.trace.step("softmax").notes:
        if getattr(note, "key", None) == "note.stale_override":
            st.info(t("notice.stale_override", note=plain(render(lang(), note))))
    _verified(s.trace)
    _share(s.trace)
    return s.trace


def _parsed(candidate: dict) -> Case:
    """parse_case, skipped while the inputs are the same as last run's (at n = 1024 it checks 150,000 numbers);
    when only the options changed (a temperature, a mask), only they are checked again."""
    s = st.session_state
    last = s.get("_parsed")
    if last is None or last[0] != candidate:  # NaN != NaN: an invalid grid is parsed again, and refused again
        numbers = {k: v for k, v in candidate.items() if k != "options"}
        if last is not None and {k: v for k, v in last[0].items() if k != "options"} == numbers:
            options = {f.name: candidate["options"].get(f.name) for f in fields(Options)}  # absent: the default
            case = with_options(last[1], **options)
        else:
            case = parse_case(candidate)
        s._parsed = (_snapshot(candidate), case)
    return s._parsed[1]


def _snapshot(candidate: dict) -> dict:
    """A copy of a candidate to compare later ones with: the editors change the grids' rows (and the tokens) in
    place, so those are copied; the mask and the rounded weights are only ever replaced whole. Far quicker than
    copy.deepcopy, which at n = 1024 spends ~0.1 s on 150,000 numbers."""

    def rows(matrix: list) -> list:
        return [list(row) for row in matrix]

    options = candidate["options"]
    return (
        candidate
        | {name: rows(candidate[name]) for name in MATRICES}
        | {
            "tokens": list(candidate["tokens"]),
            "options": options | ({"w_out": rows(options["w_out"])} if "w_out" in options else {}),
        }
    )


FIGURES_KEPT = 24  # figures a session keeps for its live traces: a page's worth or two


def figure(make, trace: Trace, *args, **kwargs):
    """make(trace, *args, **kwargs, lang=…), a figure builder's figure, kept while the trace is kept: a rerun that
    changes no number (a step, a head, a text version opened) draws it without building it again, which at
    n = 1024 is an image's encoding. The caller must not change the figure (highlight a copy instead)."""
    s = st.session_state
    live = [t for _, t in s.get("_memo", {}).values()]
    kept = [entry for entry in s.get("_figures", []) if any(entry[0] is t for t in live)]  # none of a dropped trace
    key = (make.__qualname__, args, tuple(sorted(kwargs.items())), lang())
    found = next((fig for t, k, fig in kept if t is trace and k == key), None)
    if found is None:
        found = make(trace, *args, **kwargs, lang=lang())
        kept.append((trace, key, found))
    s._figures = kept[-FIGURES_KEPT:]
    return found


def _once_per_trace(slot: str, t: Trace, make):
    """make(t), kept until the trace changes: work every rerun would otherwise repeat (the check, the link)."""
    kept = st.session_state.setdefault("_per_trace", {})
    if slot not in kept or kept[slot][0] is not t:
        kept[slot] = (t, make(t))
    return kept[slot][1]


def _verified(trace: Trace) -> None:
    """Whether this trace agrees with PyTorch's attention (fused, or nn.MultiheadAttention), shown on every page."""
    exact = exact_trace(trace)
    c = _once_per_trace("check", exact, lambda e: oracles.check(e.case, e.outputs))
    where = "" if trace.device == "cpu" else msg("verify.computed_on", device=trace.device)
    note = "" if exact is trace else msg("verify.exact_note")
    said = {"oracle": c.oracle, "difference": c.difference, "note": note, "where": where}
    if c.agrees:
        st.caption(f":material/verified: {t('verify.agrees', **said)}")
    else:
        st.error(t("verify.differs", **said))


def _share(trace: Trace) -> None:
    """Keep the URL a link to this view (case, step, language), and offer the link, the files and an import."""
    s, params = st.session_state, st.query_params
    token = _once_per_trace("link", trace, lambda kept: files.case_to_link(kept.case, files.MAX_LINK_CHARS))
    too_long = token is None
    if too_long or _once_per_trace("is_article", trace, lambda kept: kept.case == presets.article()):
        params.pop("case", None)
    else:
        params["case"] = token
    if s.get("step", 1) != 1:
        params["step"] = str(s.step)
    else:
        params.pop("step", None)
    if (lang(), language_for(st.context.locale)) != (i18n.DEFAULT,) * 2:  # all but English in an English browser
        params["lang"] = lang()
    else:
        params.pop("lang", None)
    panel = st.sidebar.expander(t("share.expander"), icon=":material/share:", key="share_panel", on_change="rerun")
    if not panel.open:  # its link, downloads and upload are made when it opens: closed, it costs a rerun nothing
        return
    with panel:
        if too_long:
            st.caption(t("share.too_long", limit=files.MAX_LINK_CHARS))
        else:
            # base64url, digits and a language code: nothing to escape
            query = "&".join(f"{k}={params[k]}" for k in ("case", "step", "lang") if k in params)
            st.code(f"{st.context.url or ''}{'?' if query else ''}{query}", language=None, wrap_lines=True)
            st.caption(t("share.copy"))
        case_file = lambda: files.dump_case(trace.case)  # noqa: E731 (made on click)
        st.download_button(
            t("share.case_file"), case_file, "case.json", "application/json", on_click="ignore", key="get_case"
        )
        too_big = trace.numbers > TRACE_FILE_MAX_NUMBERS
        trace_file = lambda: files.dump_trace(trace)  # noqa: E731 (made on click: it can be large)
        get = st.download_button
        get(
            t("share.trace_file"),
            trace_file,
            "trace.json",
            "application/json",
            on_click="ignore",
            key="get_trace",
            disabled=too_big,
        )
        if too_big:
            st.caption(t("share.trace_too_big", numbers=trace.numbers))
        st.download_button(
            t("share.script"), lambda: to_script(trace.case), "attention_case.py", "text/x-python", on_click="ignore",
            key="get_script",
        )  # fmt: skip
        st.file_uploader(t("share.upload"), type=["json"], key="upload", on_change=_import_case)
        st.radio(t("share.image_format"), ("png", "svg"), key="image_format", horizontal=True, persist_state=SESSION)


def chart(fig, key: str, where=st, **kwargs):
    """A Plotly chart (in `where`, a column say), full width, whose toolbar saves it as PNG or SVG as chosen, named
    for screen readers by its summary; under it, its text version."""
    fmt = st.session_state.get("image_format", "png")  # the share panel's choice, kept while the panel is closed
    fmt = fmt if fmt in ("png", "svg") else "png"
    config = {"toImageButtonOptions": {"format": fmt, "filename": key.removeprefix("chart_")}, "displaylogo": False}
    title, summary, table = figures.describe(fig, lang(), label=_table_label)
    shown = where.plotly_chart(fig, key=key, width="stretch", config=config, alt=summary, **kwargs)
    # In the current container, not in `where`: under a chart in a column it lands under the row of columns, since a
    # column is too narrow for the table, which would scroll sideways where the keyboard cannot reach it. Its content
    # is made only while it is open (a rerun when it opens): closed, it costs one element a chart.
    version = st.expander(t("a11y.text_version", title=title), key=f"{key}_text", on_change="rerun")
    if version.open:
        version.text(summary)  # plain text: labels are typed by the user
        if table is not None:
            version.table(table, alt=t("a11y.table_alt", title=title, row_kind=table.index.name or ""))
    return shown


def _table_label(label: str) -> str:
    """A row or column label for st.table, which renders Markdown: one with more than letters, digits and spaces
    (a typed token) as a code span, so that it shows as typed."""
    return label if re.fullmatch(r"[\w ]*", label) else plain(label)


def focus_styles() -> None:
    """A visible focus ring on the widgets whose own is too faint or missing (see FOCUS_CSS)."""
    st.html(FOCUS_CSS)


def _import_case() -> None:
    """Load an uploaded case file; a bad one changes nothing and says why."""
    s = st.session_state
    upload = s.get("upload")
    if upload is None:
        return
    try:
        _load(files.load_case(upload.getvalue()))
        s.notices.append(msg("notice.opened", name=upload.name))
    except CaseError as e:
        s.notices.append(msg("notice.not_opened", name=upload.name, error=e.message))


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
    return t if t.case.options.weights_override is None else _variant(t, "exact", weights_override=None)


def trace_on(t: Trace, device: str) -> Trace:
    return t if t.device == device else _variant(t, f"on:{device}", device=device)


def variant_trace(name: str, case: Case) -> Trace:
    return _memo(f"variant:{name}", case)


def variant_outputs(name: str, case: Case) -> Tensor:
    """A variant's outputs alone (n × d_out numbers, not a whole trace), kept until its case changes."""
    kept = st.session_state.setdefault("_outputs", {})
    if name not in kept or kept[name][0] != case:
        kept[name] = (case, _attend_or_cpu(case).outputs)
    return kept[name][1]


def _variant(t: Trace, slot: str, **options) -> Trace:
    """The trace of this case with some options changed."""
    return _memo(slot, presets.with_options(t.case, **options))


MEMO_SLOTS = 4  # traces a session keeps: the main one and the latest others (a variant, the CPU twin, …)
BIG = 1 << 22  # numbers a trace holds past which only the main trace is kept (16 MiB in float32)


def _memo(slot: str, case: Case) -> Trace:
    """attend(case), kept in this session until the case changes: an edit recomputes, other reruns do not.

    Memory per session stays bounded: at most MEMO_SLOTS traces, and only the main one when they are big.
    """
    memo = st.session_state.setdefault("_memo", {})
    if slot in memo and memo[slot][0] == case:
        memo[slot] = memo.pop(slot)  # the most recently used last
        return memo[slot][1]
    t = _attend_or_cpu(case)
    if t.numbers > BIG:
        for k in [k for k in memo if k != "trace"]:
            del memo[k]
        if slot != "trace":
            return t
    memo[slot] = (case, t)
    while len(memo) > MEMO_SLOTS:  # drop the least recently used, never the main trace
        del memo[next(k for k in memo if k != "trace")]
    return t


def _attend_or_cpu(case: Case) -> Trace:
    """attend(case); if the GPU fails (out of memory, a CUDA error), the CPU for the rest of the session, said so."""
    try:
        return attend(case)
    except (RuntimeError, AssertionError) as e:  # CUDA out of memory and CUDA errors are RuntimeErrors
        if case.options.device == "cpu":
            raise
        st.session_state.fall_back_to_cpu = True  # the device widget follows on the next run
        st.warning(
            t("warning.device_failed", device=case.options.device, kind=type(e).__name__, detail=plain(str(e)[:120])),
            icon=":material/memory:",
        )
        return attend(presets.with_options(case, device="cpu"))


def matrix_editor(name: str) -> None:
    """An editable matrix, cell by cell (x with its token labels); every edit recomputes all steps."""
    s = st.session_state
    frame = _frame(name)
    columns = [c for c in frame.columns if c != "token"]
    config = {c: st.column_config.NumberColumn(c, min_value=-MAX_ABS, max_value=MAX_ABS) for c in columns}
    if name == "x":
        config["token"] = st.column_config.TextColumn(t("editor.token"), required=True, max_chars=MAX_TOKEN_CHARS)
    try:
        st.data_editor(frame, key=editor_key(name), num_rows="fixed", column_config=config)
    except (KeyError, IndexError, TypeError, ValueError):  # an edit Streamlit itself cannot apply (a forged client)
        s.version += 1  # a fresh editor; the edits that named real cells are already in the inputs
        st.warning(t("warning.bad_edit", name=name))
        st.data_editor(frame, key=editor_key(name), num_rows="fixed", column_config=config)


def _frame(name: str) -> pd.DataFrame:
    """The editor's table of a grid, made again only when the grid changed (x has 65,536 cells at the limits);
    data_editor copies it, so one frame serves every rerun."""
    s = st.session_state
    kept, now = s.setdefault("_frames", {}), (editor_key(name), s.get("edits", 0))
    if name not in kept or kept[name][0] != now:
        grid = s.inputs[name]
        columns = [str(j + 1) for j in range(len(grid[0]))]
        frame = pd.DataFrame([[_shown(v) for v in row] for row in grid], columns=columns, dtype="float64")
        frame.index = [str(i + 1) for i in range(len(grid))]
        if name == "x":
            frame.insert(0, "token", s.inputs["tokens"])
        kept[name] = (now, frame)
    return kept[name][1]


def w_out_switch() -> None:
    """Add or remove the output projection w_out (d_v × d_v, the identity to start with), and edit it."""
    s = st.session_state
    key = f"use_w_out_{s.version}"
    s[key] = s.inputs["w_out"] is not None  # the inputs decide: a link or a file may bring one
    st.toggle(t("multi_head.w_out"), key=key, on_change=_toggle_w_out, args=(key,))
    if s.inputs["w_out"] is not None:
        matrix_editor("w_out")


def _toggle_w_out(key: str) -> None:
    d_v = _shape()[3]
    identity = [[float(i == j) for j in range(d_v)] for i in range(d_v)]
    st.session_state.inputs["w_out"] = identity if st.session_state[key] else None
    st.session_state.edits = st.session_state.get("edits", 0) + 1  # a new grid for the same editor key


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
    for name in (*MATRICES, "w_out"):
        if editor_key(name) in s and s.inputs[name] is not None:
            _apply(name, s[editor_key(name)])


def _apply(name: str, delta: dict) -> None:
    """One editor's cell edits; keys a real grid never sends (a forged client might) are left out, with a note."""
    s = st.session_state
    grid, tokens = s.inputs[name], s.inputs["tokens"]
    columns = {str(j + 1): j for j in range(len(grid[0]))}
    for row, changes in delta.get("edited_rows", {}).items():
        i = int(row) if str(row).isdecimal() and int(row) < len(grid) else None
        for column, value in changes.items() if i is not None else ():
            if column == "token" and name == "x":
                cells, j = tokens, i
            elif str(column) in columns:
                cells, j = grid[i], columns[str(column)]
            else:
                continue
            if cells[j] is not value and cells[j] != value:  # a change: the editors' tables are made again
                cells[j] = value
                s.edits = s.get("edits", 0) + 1
    if delta.get("added_rows") or delta.get("deleted_rows"):
        s.notices.append(msg("notice.rows_fixed", name=name))


def step_picker() -> int:
    """Previous / next buttons and a picker over steps 1-8; the choice survives a visit to another page."""
    s, language = st.session_state, lang()
    s.setdefault("step", 1)
    s.step_picker = s.step
    previous, picker, following = st.columns([1, 8, 1], vertical_alignment="center")
    previous.button("◀", key="previous", on_click=_move, args=(-1,), disabled=s.step == 1, shortcut="Left")
    following.button("▶", key="next", on_click=_move, args=(1,), disabled=s.step == 8, shortcut="Right")
    picker.radio(
        t("walkthrough.step"),
        range(1, 9),
        format_func=lambda i: f"{i} {i18n.text(language, f'step.{STEP_NAMES[i - 1]}.short')}",
        key="step_picker",
        horizontal=True,
        label_visibility="collapsed",
        on_change=lambda: s.update(step=s.step_picker),
    )
    return s.step


def _move(by: int) -> None:
    st.session_state.step = min(8, max(1, st.session_state.step + by))


PACES = (0.5, 1.0, 2.0, 3.0, 5.0)  # seconds per step


def player() -> None:
    """Play / pause through steps 1-8 at a chosen pace (a timed fragment moves to the next step and reruns)."""
    s, language = st.session_state, lang()
    play, pace = st.columns([1, 3], vertical_alignment="center")
    play.toggle(t("walkthrough.play"), key="playing", persist_state=SESSION, help=t("walkthrough.play_help"))
    seconds = pace.select_slider(
        t("walkthrough.pace"),
        PACES,
        value=2.0,
        format_func=lambda v: i18n.text(language, "walkthrough.pace_option", seconds=v),
        key="pace",
        label_visibility="collapsed",
        persist_state=SESSION,
    )
    if s.playing:
        st.fragment(lambda: _advance(seconds), run_every=seconds)()
    else:
        s.pop("play_due", None)


def _advance(seconds: float) -> None:
    s = st.session_state
    due = s.setdefault("play_due", time.monotonic() + seconds)
    if time.monotonic() >= due:
        s.play_due = time.monotonic() + seconds
        s.step = s.step % 8 + 1  # after step 8, step 1 again
        st.rerun(scope="app")


def head_picker(trace: Trace, key: str) -> int | None:
    """Which head to show, when there are several."""
    h, language = trace.case.options.heads, lang()
    if h == 1:
        return None
    head = st.radio(
        t("picker.head"),
        range(h),
        format_func=lambda i: i18n.text(language, "picker.head_n", head=i + 1),
        key=key,
        horizontal=True,
        persist_state=SESSION,
    )
    return head if head is not None and head < h else 0


def token_picker(t: Trace, label: str, key: str) -> int:
    """Pick a token by its label; Input 2 first when there is one (the article's Input 1 has weight 0 everywhere)."""
    index = min(1, t.case.n - 1)
    picked = st.selectbox(
        label, range(t.case.n), index=index, format_func=lambda i: t.case.tokens[i], key=key, persist_state=SESSION
    )
    return picked if picked is not None and picked < t.case.n else index


# Explain a number: a picker per axis of the chosen tensor, and clicks on its heatmap that set those pickers.


def _axes(t: Trace, name: str) -> list[tuple[str, int]]:
    """(kind, size) for each axis of a recorded tensor: the head first when it has one."""
    kinds = AXES[name]
    shape = t[name].shape
    return list(zip(("head", *kinds) if len(shape) > len(kinds) else kinds, shape, strict=True))


def cell_picker(trace: Trace, name: str) -> tuple[int, ...]:
    index = []
    axes = _axes(trace, name)
    for a, ((kind, size), column) in enumerate(zip(axes, st.columns(len(axes)), strict=True)):
        if kind == "head":
            names = [t("picker.head_n", head=i + 1) for i in range(size)]
        else:
            names = figures.labels(trace, kind, size)
        default = min(1, size - 1) if kind in figures.TOKEN_KINDS else 0  # Input 2: the article's Input 1 is all 0
        key = f"explain_{name}_{a}"
        picked = column.selectbox(
            figures.axis(lang(), kind),
            range(size),
            index=default,
            format_func=names.__getitem__,
            key=key,
            persist_state=SESSION,
        )
        index.append(picked if picked is not None and picked < size else default)
    return tuple(index)


def explain_figure(t: Trace, name: str, index: tuple[int, ...]):
    """The tensor's 2-D view, clickable, with the picked cell outlined."""
    head, cell = _split_head(name, index)
    if name == "weighted":  # rows are (key j, query i) pairs
        cell = (cell[0] * t["weighted"].shape[-2] + cell[1], cell[2])
        fig, (row, col) = figures.weighted_heatmap(t, head, lang()), cell
    else:
        fig, (row, col) = figures.tensor_heatmap(t, name, head, lang=lang()), cell
    return figures.highlight(figures.clickable(fig), (row,), (col,))


def apply_click(t: Trace, name: str) -> None:
    """A click on the heatmap picks its cell: set the pickers before they are drawn (each click once)."""
    s = st.session_state
    chart = s.get("explain_chart") or {}
    points = [p for p in chart.get("selection", {}).get("points", []) if p.get("curve_number") == 1]
    if not points or points[0] == s.get("explain_click"):
        return
    s.explain_click = points[0]
    shape = t[name].shape
    r, c = divmod(points[0]["point_index"], shape[-1])
    cell = (*divmod(r, shape[-2]), c) if name == "weighted" else (r, c)
    head = (s.get(f"explain_{name}_0", 0),) if len(shape) > len(AXES[name]) else ()
    for a, value in enumerate((*head, *cell)):
        s[f"explain_{name}_{a}"] = value


def _split_head(name: str, index: tuple[int, ...]) -> tuple[int | None, tuple[int, ...]]:
    extra = len(index) - len(AXES[name])
    return (index[0] if extra else None), index[extra:]


def part_figure(t: Trace, part: str, head: int | None):
    """A tensor that took part in the explained number, as the same 2-D view (the same head)."""
    head = head if part in PER_HEAD else None
    if part == "weighted":
        return figures.weighted_heatmap(t, head, lang())
    return figures.tensor_heatmap(t, part, head, lang=lang())


def plain(text: str) -> str:
    """Text that may hold user input (a token label, a file name), for Markdown: a code span, in which Streamlit
    makes no links, emphasis, HTML, LaTeX, emoji or icons (escaping characters leaves autolinks and icons)."""
    fence = "`" * (max(map(len, re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}"
