"""The sidebar every page shares: language and preset, the options a learner changes first, then (folded) sizes and
seed, precision and device. Its widgets show the session's controls, and their changes go to Session.choose."""

from __future__ import annotations

import streamlit as st

from ..base import i18n
from ..base.case import (
    DTYPES,
    MAX_D,
    MAX_HEADS,
    MAX_N,
    MAX_SCALE,
    MAX_SINK,
    MAX_SOFTCAP,
    MAX_TEMPERATURE,
    MIN_SCALE,
    MIN_TEMPERATURE,
)
from ..base.device import available_devices, gpu_unavailable_reason
from ..base.i18n import LANGUAGES
from ..models import room as model_room
from . import cross, origins, slider
from .choices import CONTROLS, CROSS_MASKS, FILLS, MASKS, MAX_SEED, ROPE_FRACTIONS, SCALES, SIZES
from .language import t
from .origins import make
from .session import Session

LANGUAGE = "lang"  # the language picker's key; the controls' widgets have the controls' names
CROSS = "cross"  # cross-attention's switch: it sets the control n_kv (on: the rows it had, off: 0)
ROOMS = {"model": (model_room.read, model_room.draw)}  # an origin's sidebar room (Origin.section): read, draw


def read(session: Session) -> None:
    """Hand the widgets' new values to the session, before anything is drawn in this run. Reading values (not
    callbacks) makes every way of setting them work the same: the browser, a test, a forged client. A value is
    new when it differs from what the widget showed when last drawn: a button's operation (reset, back to the
    article) changes the session while the widgets still show the old values, which must not be taken back."""
    make.forget_gone_model(session)  # before anything asks for its spec
    s, shown = st.session_state, session.widgets
    changed = {key: s[key] for key in (LANGUAGE, *CONTROLS) if key in s and s[key] != shown.get(key, s[key])}
    if (dragged := slider.released()) is not None and dragged != shown.get("temperature"):
        changed["temperature"] = dragged  # the slider under the number box, released (make.choose checks it)
    if type(on := s.get(CROSS)) is bool and on != shown.get(CROSS, on):  # the source rows it had, or none
        changed["n_kv"] = cross.rows_to_turn_on(session.controls, session.inputs) if on else 0
    if changed.get(LANGUAGE) in LANGUAGES:
        session.lang = changed.pop(LANGUAGE)
    make.choose(session, **{k: v for k, v in changed.items() if k != LANGUAGE})
    if (room := _room(session)) is not None:
        room[0](session)


def _room(session: Session) -> tuple | None:
    """The room of the preset's origin, drawn under the preset: its read and draw (None: it has none)."""
    section = origins.PRESETS[session.controls.preset].section
    return None if section is None else ROOMS[section]


def draw(session: Session) -> None:
    """The sidebar's widgets, showing the session's controls (which a link, a file or a preset may have changed)."""
    shown = {LANGUAGE: session.lang} | {name: getattr(session.controls, name) for name in CONTROLS}
    shown["use_rounded"] &= not rounded_dropped(session)  # the softmax in use, not the one asked for
    shown[CROSS] = bool(session.controls.n_kv)
    for key, value in shown.items():
        if st.session_state.get(key) != value:  # only what changed: a set value makes Streamlit send the widget again
            st.session_state[key] = value
    session.widgets = shown
    language = session.lang  # a format_func runs later too (AppTest calls it after the run): this run's language
    with st.sidebar:
        st.selectbox(t("sidebar.language"), LANGUAGES, _at(LANGUAGES, session.lang), format_func=LANGUAGES.get,
                     key=LANGUAGE)  # fmt: skip
        st.selectbox(
            t("sidebar.preset"), origins.PRESETS, _at(origins.PRESETS, session.controls.preset),
            format_func=lambda p: i18n.text(language, f"preset.{p}"), key="preset",
        )  # fmt: skip
        if (room := _room(session)) is not None:
            room[1](session)
        st.subheader(t("sidebar.options"))  # what a learner changes first: next, under the pages
        _options(session, language)
        with st.expander(t("sidebar.modern"), expanded=False):
            modern(session)
        with st.expander(t("sidebar.sizes"), expanded=False):
            _sizes(session, language)
        with st.expander(t("sidebar.precision"), expanded=False):
            _precision(session)


def _at(options, value) -> int:
    """A choice's index among its options, for a widget's default. Every widget here starts from the session's
    value, not the first option or the minimum: Streamlit's browser draws a widget afresh without its state after
    some runs (a page switch, runs cut short under load), and then sends its default back as the person's choice
    (a CI run saw the sizes fall to 1). The session's value is also set in session_state when it changes, which
    wins; .streamlit/config.toml silences Streamlit's warning about having both."""
    return list(options).index(value) if value in options else 0


def rounded_dropped(session: Session) -> bool:
    """Whether the article's rounded softmax is chosen but the exact one is in use (a mask, heads, other numbers)."""
    asked = session.controls.use_rounded and session.inputs.rounded is not None
    return asked and session.case.options.weights_override is None


def _options(session: Session, language: str) -> None:
    none = session.inputs.rounded is None  # drawn all the same: a widget that goes shifts the rest (and folds them)
    dropped = rounded_dropped(session)  # shown off, and why: the choice comes back with the options it fits
    help_text, c = t("sidebar.rounded_none") if none else t("sidebar.rounded_help"), session.controls
    on = c.use_rounded and not dropped  # the softmax in use
    st.toggle(t("sidebar.rounded"), on, key="use_rounded", help=help_text, disabled=none or dropped)
    if dropped:
        st.caption(t("sidebar.rounded_dropped"))
    st.selectbox(
        t("sidebar.scale"), SCALES, _at(SCALES, c.scale), format_func=lambda v: i18n.text(language, f"scale.{v}"),
        key="scale", help=t("sidebar.scale_help"),
    )  # fmt: skip
    if c.scale == "custom":
        st.number_input(t("sidebar.scale_value"), MIN_SCALE, MAX_SCALE, c.scale_value, key="scale_value", format="%g")
    masks = CROSS_MASKS if c.n_kv else MASKS  # no causal mask across two sentences
    st.selectbox(
        t("sidebar.mask"), masks, _at(masks, c.mask), format_func=lambda m: i18n.text(language, f"mask.{m}"),
        key="mask", help=t("sidebar.mask_help_cross") if c.n_kv else t("sidebar.mask_help"),
    )  # fmt: skip
    st.number_input(
        t("sidebar.temperature"), MIN_TEMPERATURE, MAX_TEMPERATURE, c.temperature, step=0.1, key="temperature",
        format="%g", help=t("sidebar.temperature_help"),
    )  # fmt: skip
    slider.draw(session)
    st.number_input(t("sidebar.heads"), 1, MAX_HEADS, c.heads, step=1, key="heads", help=t("sidebar.heads_help"))
    keys_sentence(session)


def keys_sentence(session: Session) -> None:
    """Cross-attention: a switch for keys and values from another sentence, x_kv, and its rows n_kv (0 turns it
    off too), with what it changes; the options that need one sentence stay out while it is on (cross.py)."""
    c = session.controls
    st.toggle(t("sidebar.cross"), bool(c.n_kv), key=CROSS, help=t("sidebar.cross_help"))
    if c.n_kv:
        st.number_input(t("sidebar.n_kv"), 0, MAX_N, c.n_kv, step=1, key="n_kv", help=t("sidebar.n_kv_help"))
        st.caption(t("sidebar.cross_on", n=c.n, n_kv=c.n_kv))


def modern(session: Session) -> None:
    """The attention of today's models: a sliding window, a softcap, ALiBi, T5's bias, sinks, RoPE whole, in part or
    off, and multi-head latent attention's latent width (choices.Controls.latent)."""
    c, two = session.controls, bool(session.controls.n_kv)  # two sentences: no option that needs one (cross.py)
    if two:
        st.caption(t("sidebar.cross_off_here"))
    st.number_input(t("sidebar.window"), 0, MAX_N, c.window, step=1, key="window", help=t("sidebar.window_help"),
                    disabled=two)  # fmt: skip
    st.number_input(t("sidebar.softcap"), 0.0, MAX_SOFTCAP, c.softcap, step=1.0, key="softcap", format="%g",
                    help=t("sidebar.softcap_help"))  # fmt: skip
    st.toggle(t("sidebar.alibi"), c.alibi, key="alibi", help=t("sidebar.alibi_help"), disabled=two)
    st.toggle(t("sidebar.relative"), c.relative, key="relative", help=t("sidebar.relative_help"), disabled=two)
    st.toggle(t("sidebar.sinks"), c.sinks, key="sinks", help=t("sidebar.sinks_help"))
    if c.sinks:
        st.number_input(t("sidebar.sink"), -MAX_SINK, MAX_SINK, c.sink, step=0.5, key="sink", format="%g")
    st.toggle(t("sidebar.rope"), c.rope, key="rope", help=t("sidebar.rope_help"), disabled=two)
    if c.rope:
        fractions = (*ROPE_FRACTIONS, c.rope_fraction) if c.rope_fraction not in ROPE_FRACTIONS else ROPE_FRACTIONS
        st.selectbox(t("sidebar.rope_fraction"), fractions, _at(fractions, c.rope_fraction), key="rope_fraction",
                     format_func=lambda f: f"{f:g}", help=t("sidebar.rope_fraction_help"))  # fmt: skip
    st.number_input(t("sidebar.latent"), 0, max(MAX_D, c.latent), c.latent, step=1, key="latent",
                    help=t("sidebar.latent_help"))  # fmt: skip


def _sizes(session: Session, language: str) -> None:
    left, right = st.columns(2, vertical_alignment="bottom")
    c = session.controls
    left.number_input(t("sidebar.seed"), 0, MAX_SEED, c.seed, step=1, key="seed", help=t("sidebar.seed_help"))
    right.button(t("sidebar.reset"), key="reset", on_click=make.reset, args=(session,), help=t("sidebar.reset_help"),
                 width="stretch")  # fmt: skip
    columns = st.columns(2)
    # a real model's head is wider than a widget's limit (576 columns), and grouped key/value heads cannot be resized:
    # its sizes are shown as they are (a widget's limit follows them: Streamlit refuses a value past its max)
    fixed = any(getattr(c, name) > limit for name, limit in SIZES.items()) or session.inputs.kv_heads is not None
    for i, (name, limit) in enumerate(SIZES.items()):
        now = getattr(c, name)
        columns[i % 2].number_input(t(f"sidebar.size_{name}"), 1, max(limit, now), now, step=1, key=name,
                                    disabled=fixed)  # fmt: skip
    if fixed:
        st.caption(t("sidebar.sizes_fixed"))
    st.radio(
        t("sidebar.fill"), FILLS, _at(FILLS, c.fill), format_func=lambda f: i18n.text(language, f"fill.{f}"),
        key="fill", horizontal=True, help=t("sidebar.fill_help"),
    )  # fmt: skip


def _precision(session: Session) -> None:
    c = session.controls
    st.radio(t("sidebar.dtype"), DTYPES, _at(DTYPES, c.dtype), key="dtype", horizontal=True,
             help=t("sidebar.dtype_help"))  # fmt: skip
    devices = {d.name: t("sidebar.device_option", name=d.name, description=d.description) for d in available_devices()}
    st.selectbox(t("sidebar.device"), devices, _at(devices, c.device), format_func=devices.get, key="device",
                 help=t("sidebar.device_help"))  # fmt: skip
    if reason := gpu_unavailable_reason():
        st.caption(t("sidebar.gpu_unavailable", reason=reason))
