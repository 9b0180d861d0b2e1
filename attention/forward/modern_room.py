"""The variants page's room for today's models: each variant picked with a widget that sets the session's controls
(the sidebar's "Today's models" shows the same), said in a sentence, and shown beside plain attention on the same
numbers."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from ..app import charts, choices, latent, pickers, tab, traces
from ..app.language import lang, t
from ..app.origins import make
from ..app.session import Session
from ..app.text import plain, prose
from ..base import presets
from ..base.case import MAX_N, MAX_SINK, MAX_SOFTCAP, MIN_SOFTCAP, Case, CaseError, rotary_dims, with_options
from ..base.i18n import render
from . import figures, teach
from .compute import Trace

DEFAULTS = {"window": 3, "softcap": 5.0, "rope_fraction": 0.5}  # a cap of 5: Gemma 2's 50 would not bite here
LONGER_N = 8  # a sentence long enough for a window of 3 to leave tokens out
ROPE_D = 4  # a head's width on which RoPE turns two pairs, and partial rotary one of them
KEPT = ("scale", "scale_value", "temperature", "mask", "window", "softcap", "alibi", "sinks", "sink", "rope")
KEPT += ("rope_fraction", "relative", "latent")  # the controls a new random case keeps (its sizes and numbers are new)
ONE_SENTENCE = ("window", "alibi", "relative", "partial", "nope")  # off while cross-attention is on (case.py)
NOPE = "variants_nope"  # the NoPE switch: RoPE off, read against RoPE on (see nope)


def nope(session: Session) -> bool:
    """Whether NoPE is chosen: RoPE off in a case that has RoPE, by its origin (a model's head, a file) or by this
    page's switch (plain attention then turns RoPE on at the case's own base)."""
    return not session.controls.rope and (session.inputs.rope_base is not None or bool(st.session_state.get(NOPE)))


def fractions(d_head: int) -> tuple[float, ...]:
    """The partial rotary fractions that turn an even number of at least 2 of a head's dims."""
    return tuple(f for f in choices.ROPE_FRACTIONS if f < 1 and (d := rotary_dims(d_head, f)) >= 2 and d % 2 == 0)


def plain_case(session: Session, case: Case) -> Case:
    """Plain attention on the case's numbers: every option of today's models off (a latent's keys and values the
    person's own again, latent.plain_case); after NoPE, RoPE on again."""
    case, off = plain_keys(session, case), dict(teach.PLAIN)
    if nope(session):  # RoPE as the controls make it (the case's own base, positions and frequencies)
        rope = choices.options(replace(session.controls, rope=True, rope_fraction=1.0), session.inputs)
        off |= {name: rope[name] for name in ("rope_base", "positions", "rope_frequencies")}
    elif case.options.rope_fraction is not None:  # a scaled RoPE's frequencies are its turned pairs' (Phi-4-mini's
        off["rope_frequencies"] = None  # LongRoPE): RoPE over the whole head turns at the paper's θ_p
    try:
        return with_options(case, **off)
    except CaseError:  # RoPE cannot turn these heads (an odd width): plain attention without it
        return with_options(case, **teach.PLAIN)


def plain_keys(session: Session, case: Case) -> Case:
    """The case with plain keys and values in place of its latent (kept while the case and its inputs are)."""
    made = lambda: latent.plain_case(session.inputs, case)  # noqa: E731
    return case if case.options.w_latent is None else session.derived.get(("plain", case, session.inputs.plain), made)


def latent_widths(session: Session) -> tuple[int, int, int]:
    """The latent widths the person's numbers allow, and the narrowest that loses nothing (presets.latent_widths)."""
    plain = plain_keys(session, session.case)
    return session.derived.get(("latent widths", plain), lambda: presets.latent_widths(plain))


def remake(session: Session, **sizes: int) -> None:
    """The random preset's numbers at new sizes, the other choices kept (a custom mask cannot be: n changes)."""
    kept = {name: getattr(session.controls, name) for name in KEPT}
    kept["mask"] = "none" if kept["mask"] == "custom" else kept["mask"]
    make.choose(session, preset="random", **sizes)
    make.reset(session)  # the random preset's own numbers at these sizes, had it been the preset already
    make.choose(session, **kept)


def _switch(session: Session, variant: str) -> None:
    """A variant's switch turned on (with its default) or off: the session's controls change."""
    on = bool(st.session_state[f"variants_{variant}"])
    fraction = (*fractions(session.case.d_head), 1.0)[0]  # the first one these heads allow
    changes = {
        "window": {"window": DEFAULTS["window"] if on else 0},
        "softcap": {"softcap": DEFAULTS["softcap"] if on else 0.0},
        "alibi": {"alibi": on},
        "relative": {"relative": on},
        "sinks": {"sinks": on},
        "partial": {"rope": True, "rope_fraction": fraction} if on else {"rope_fraction": 1.0},  # off: RoPE whole
        "nope": {"rope": not on},
        "latent": {"latent": _latent_width(session) if on else 0},
    }
    make.choose(session, **changes[variant])


def _latent_width(session: Session) -> int:
    """The switch's first width: the narrowest that loses nothing, while it caches fewer numbers; else a middle one."""
    low, high, exact = latent_widths(session)
    return exact if exact < len(session.case.w_key[0]) + session.case.d_v else low + (high - low + 1) // 2 - 1


def _set(session: Session, control: str, key: str) -> None:
    make.choose(session, **{control: st.session_state[key]})


def _shown(key: str, value: object) -> None:
    """A page widget shows the session's value (the sidebar or a link may have changed it)."""
    if st.session_state.get(key) != value:
        st.session_state[key] = value


def pick(session: Session) -> None:
    """One switch per variant of today's models, side by side, each with its number under it once on."""
    c, d = session.controls, session.case.d_head
    on = {
        "window": c.window > 0, "softcap": c.softcap > 0, "alibi": c.alibi, "relative": c.relative, "sinks": c.sinks,
        "partial": c.rope and c.rope_fraction != 1, "nope": nope(session), "latent": c.latent > 0,
    }  # fmt: skip
    rope = {"partial": not fractions(d), "nope": d % 2 == 1}  # RoPE turns a head's dims in pairs
    blocked = rope | (dict.fromkeys(ONE_SENTENCE, True) if session.case.cross else {})
    if session.case.cross:  # these place a key by its distance within one sentence: cross-attention has two
        st.caption(t("sidebar.cross_off_here"))
    columns = [*st.columns(4), *st.columns(4)]  # two rows: each switch's label whole
    at = dict(zip(teach.MODERN_VARIANTS, columns, strict=True))
    for v, column in at.items():
        _shown(f"variants_{v}", on[v])
        column.toggle(t(f"variants.pick_{v}"), on[v], key=f"variants_{v}", on_change=_switch, args=(session, v),
                      help=t(f"variants.why_{v}"), disabled=blocked.get(v, False) and not on[v])  # fmt: skip
    numbers = {
        "window": (at["window"], "window", "window_size", 1, MAX_N, 1),
        "softcap": (at["softcap"], "softcap", "cap", MIN_SOFTCAP, MAX_SOFTCAP, 1.0),
        "sinks": (at["sinks"], "sink", "sink", -MAX_SINK, MAX_SINK, 0.5),
    }
    if on["latent"] and (w := latent_widths(session)):  # its widths: the person's numbers' (and the one chosen)
        numbers["latent"] = (at["latent"], "latent", "latent_width", min(w[0], c.latent), max(w[1], c.latent), 1)
    for v, (column, control, label, low, high, step) in numbers.items():
        if on[v]:
            key = f"variants_{control}_value"
            _shown(key, getattr(c, control))
            shown = "%g" if isinstance(step, float) else "%d"
            column.number_input(t(f"variants.{label}"), low, high, getattr(c, control), step=step, key=key,
                                format=shown, on_change=_set, args=(session, control, key))  # fmt: skip
    if on["partial"]:
        shares = tuple(dict.fromkeys((*fractions(d), c.rope_fraction)))
        _shown("variants_rope_fraction_value", c.rope_fraction)
        at["partial"].selectbox(t("variants.fraction"), shares, shares.index(c.rope_fraction),
                                format_func="{:g}".format, key="variants_rope_fraction_value", on_change=_set,
                                args=(session, "rope_fraction", "variants_rope_fraction_value"))  # fmt: skip
    if any(rope.values()) and not c.rope and not session.case.cross:  # under the RoPE switches: numbers they fit
        n = max(LONGER_N, session.case.n)
        why = t("variants.rope_needs", n=n, d=ROPE_D, width=d)
        at["partial"].button(t("variants.rope_case"), key="variants_rope_case", help=why,
                          on_click=lambda: remake(session, n=n, d_k=ROPE_D))  # fmt: skip


def modern(session: Session, trace: Trace) -> None:
    """Today's models' variants: picked (one or several), each said in a sentence, and the scores, weights and
    outputs of the chosen combination beside plain attention's on the same numbers."""
    st.subheader(t("variants.modern_header"))
    st.caption(t("variants.modern_intro"))
    pick(session)
    chosen = teach.modern_chosen(trace.case, nope=nope(session))
    if not chosen:
        st.info(t("variants.none_chosen"), icon=":material/info:")
        return
    for v in chosen:
        st.markdown(prose(t(f"variants.why_{v}")))
    if "latent" in chosen:
        _latent(session, trace.case)
    base = traces.trace_of(session, plain_case(session, trace.case))  # plain attention: attend, kept by its case
    if "window" in chosen:
        _window(session, trace, base)
    head = pickers.head_picker(trace, "variants_head")
    if "softcap" in chosen:
        _softcap(trace, head)
    _beside(base, trace, head)


def _latent(session: Session, case: Case) -> None:
    """What the latent saves (each token's cache), and, made from the person's numbers, which widths lose nothing."""
    keys, values, d_rot = len(case.w_key[0]), case.d_v, presets.latent_layout(case)[1]
    said = [t("variants.latent_cache", d_c=case.d_c, plain=keys + values, keys=keys, values=values)]
    if session.inputs.plain is not None:  # made from the person's keys and values (latent.turned)
        numbers = {"exact": (exact := latent_widths(session)[2]), "rank": exact - d_rot, "d_rot": d_rot}
        rotary = [t("variants.latent_rotary", d_rot=d_rot), t("variants.latent_rank_rotary", **numbers)]
        said += rotary if d_rot else [t("variants.latent_rank", **numbers)]
    st.caption(" ".join(said))


def _window(session: Session, trace: Trace, base: Trace) -> None:
    """Which tokens each query sees through the window, and how far its output moved; on a sentence too short for
    the window to leave a token out, the way to a longer one."""
    n, window = trace.case.n, trace.case.options.window
    if n < window + 2:
        st.info(t("variants.too_short", n=n, window=window), icon=":material/info:")
        st.button(t("variants.longer", n=LONGER_N), key="variants_longer", on_click=lambda: remake(session, n=LONGER_N))
    st.markdown(prose(t("variants.sees_intro", window=window)))
    readings = teach.window_readings(trace.case, base.outputs, trace.outputs)
    box = st.container(height=260 if n > LONGER_N else "content", key="variants_readings")
    box.markdown("\n".join(f"- {plain(render(lang(), m))}" for m in readings))


def _softcap(trace: Trace, head: int | None) -> None:
    """The cap's curve with the head's own scores on it, and its text version (made when opened)."""
    cap, scores = trace.case.options.softcap, figures.tensor(trace, "scores_uncapped", head)
    curve = tab.current().derived.get(
        ("softcap curve", trace.case, head, lang()), lambda: figures.softcap_curve(cap, scores, lang())
    )
    finite = scores[scores.isfinite()].double()
    said = {"cap": cap, "low": finite.min().item(), "high": finite.max().item()}
    st.plotly_chart(curve, key="chart_softcap", width="stretch", config={"displaylogo": False},
                    alt=t("variants.curve_text", **said))  # fmt: skip
    version = st.expander(t("a11y.text_version", title=curve.layout.title.text), key="chart_softcap_text",
                          on_change="rerun")  # fmt: skip
    if version.open:
        version.text(t("variants.curve_text", **said))
        top = finite[finite.abs().argsort(descending=True)][:8]  # the largest scores: where the cap bites
        table = pd.DataFrame(
            {
                t("variants.curve_before"): [f"{v:.4g}" for v in top.tolist()],
                t("variants.curve_after"): [f"{v:.4g}" for v in (cap * (top / cap).tanh()).tolist()],
            }
        )
        version.table(table)


def _beside(base: Trace, trace: Trace, head: int | None) -> None:
    """The scores, weights and outputs of plain attention (left) and of the chosen variants (right), each pair on
    one colour scale; under the outputs, where they moved most."""
    st.caption(t("variants.beside"))
    if trace.case.options.weights_override is not None:  # the sidebar's rounded softmax: the same weights on both sides
        st.caption(t("variants.rounded_note"))
    for name in ("scores", "weights", "outputs"):
        titles = (t("variants.plain_of", name=name), t("variants.yours_of", name=name))
        key = ("variant pair", base.case, trace.case, name, head, lang())
        make = lambda n=name, ts=titles: figures.variant_pair(base, trace, n, head, ts, lang())  # noqa: E731
        pair = tab.current().derived.get(key, make)
        left, right = st.columns(2)
        charts.chart(pair[0], f"chart_plain_{name}", where=left)
        charts.chart(pair[1], f"chart_modern_{name}", where=right)
    off = (trace.outputs.double() - base.outputs.double()).abs()
    i = int(off.amax(dim=-1).argmax())
    st.caption(plain(t("variants.moved", difference=off.max().item(), token=trace.case.tokens[i])))
