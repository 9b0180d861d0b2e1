"""The Exercise page's rooms: the ready-made exercises, the maker (the numbers to hide, their prompts, the link and
its QR code), the answers of an open exercise (judged, with a hint after two tries and the arithmetic after three);
and the frame's parts: the sidebar's progress, a page that waits, the share panel's part, the presenter view."""

from __future__ import annotations

import io
from urllib.parse import urlencode

import segno
import streamlit as st

from ..app import charts, origins, traces
from ..app.language import t
from ..app.session import Session
from ..app.text import plain
from ..base import i18n
from ..base.i18n import render
from ..base.numbers import written
from ..forward.compute import Trace
from ..forward.explain_room import part_figure
from ..show.heatmap import axis, labels
from . import state
from .compute import HIDEABLE, MAX_PROMPT, Exercise, answer, exact
from .state import FOUND, PARAM, PRESENT, SHOWN, Classroom


def ready_made(session: Session, trace: Trace) -> None:
    """The ready-made exercises for the case in front of the learner (state.offered), each a link that opens it;
    where none fits, said plainly."""
    offered = state.offered(session, trace)
    for name, cells in offered.items():
        index = cells[0][1] if name in state.CASE_READY else (0, 0)  # a case's own names its cell in words
        query, key = trace.case.tokens[index[-2]], trace.case.key_tokens[index[-1]]  # (a cross case's: its source)
        st.page_link("pages/exercise.py", label=plain(t(f"exercise.ready_title.{name}", query=query, key=key)),
                     icon=":material/school:", query_params={PARAM: name})  # fmt: skip
    if not offered:
        st.caption(t("exercise.none_here", n=trace.case.n, d=trace.case.d_head))


def maker(session: Session, trace: Trace) -> None:
    """A teacher's exercise: numbers clicked on a step's heatmap or picked here, a prompt each, then the link."""
    st.write(t("exercise.make_intro"))
    names = [name for name in HIDEABLE if any(name in step.tensors for step in trace.steps)]
    language = session.lang  # the widget keeps its format_func: the language it was drawn in
    name = st.selectbox(t("exercise.tensor"), names, key="exercise_tensor", format_func=lambda n: i18n.text(
        language, "exercise.tensor_option", what=i18n.text(language, f"exercise.what.{n}"), tensor=n))  # fmt: skip
    index = []
    for number, (kind, size, column) in enumerate(
        zip(trace.axes(name), trace[name].shape, st.columns(len(trace.axes(name))), strict=True)
    ):
        names = [t("picker.head_n", head=i + 1) for i in range(size)] if kind == "head" else labels(trace, kind, size)
        index.append(column.selectbox(axis(session.lang, kind), range(size), format_func=names.__getitem__,
                                      key=f"exercise_axis_{name}_{number}"))  # fmt: skip
    st.text_input(t("exercise.prompt"), max_chars=MAX_PROMPT, key="exercise_prompt")
    st.button(t("exercise.hide"), key="exercise_hide", type="primary", on_click=lambda: _hide(session, trace))
    if not session.view(Classroom).making:
        st.caption(t("exercise.none_yet"))
        return
    st.subheader(t("exercise.hidden_so_far", count=len(session.view(Classroom).making)))
    for number, b in enumerate(session.view(Classroom).making):
        left, middle, right = st.columns([2, 4, 1], vertical_alignment="bottom")
        left.markdown(f"{number + 1}. {plain(state.label(trace, b, session.lang))}")
        key = f"exercise_prompt_{number}_{b.tensor}_{b.index}"
        retyped = lambda n=number, k=key: state.set_prompt(session, n, st.session_state[k])  # noqa: E731
        middle.text_input(t("exercise.prompt"), value=b.prompt, max_chars=MAX_PROMPT, key=key,
                          on_change=retyped)  # fmt: skip
        right.button(t("exercise.remove"), key=f"exercise_remove_{number}",
                     on_click=lambda b=b: state.toggle(session, trace, b.tensor, b.index))  # fmt: skip
    url = link(session)
    st.subheader(t("exercise.link"))
    st.code(url, language=None, wrap_lines=True)
    st.caption(t("exercise.link_help"))
    st.image(qr_png(url), caption=t("exercise.qr"), width=240)


def make_one(session: Session) -> None:
    """Under the ready-made list: the way to make an exercise on this case, on the page itself."""
    st.caption(t("exercise.how_to_make"))
    st.button(t("exercise.make_one"), key="exercise_make_one", icon=":material/edit_note:",
              on_click=_making, args=(session, True))  # fmt: skip


def stop_making(session: Session) -> None:
    """Back to the list: the exercise being made is dropped (its link, if shared, still opens it)."""
    st.button(t("exercise.stop_making"), key="exercise_stop_making", on_click=_making, args=(session, False))


def _making(session: Session, on: bool) -> None:
    """A button's start or stop of making, and the Share panel's switch with it (a widget keeps its own value: left
    as it was, the switch would undo the button in the same run)."""
    state.start_making(session, on)
    st.session_state.exercise_making = on


def _hide(session: Session, trace: Trace) -> None:
    """The picked number hidden, as the widgets hold it when the button is pressed (a callback runs before them)."""
    kept, name = st.session_state, st.session_state["exercise_tensor"]
    index = tuple(kept.get(f"exercise_axis_{name}_{axis}", 0) for axis in range(len(trace.axes(name))))
    state.toggle(session, trace, name, index, kept.get("exercise_prompt") or "")


def answers(session: Session, trace: Trace) -> None:
    """Every blank of the open exercise: its prompt, where it is, the answer box and what the answer was told."""
    attempt, real = session.view(Classroom).exercise, traces.current(session)
    blanks = attempt.exercise.blanks
    done = len(attempt.found)
    st.progress(done / len(blanks), text=t("exercise.progress", done=done, total=len(blanks)))
    if attempt.case != real.case:
        st.warning(t("exercise.other_case"))
        return
    if attempt.ready:  # a ready-made exercise asks one question of its numbers
        st.write(t(f"exercise.ready.{attempt.ready}"))
    for number, b in enumerate(blanks):
        with st.container(border=True):
            _blank(session, trace, real, number, b)
    st.button(t("exercise.leave"), key="exercise_leave", on_click=lambda: leave(session))


def _blank(session: Session, trace: Trace, real: Trace, number: int, b) -> None:
    """One hidden number: where it is, the answer box (its tolerance, its verdict), then the hint or the arithmetic."""
    attempt = session.view(Classroom).exercise
    st.markdown(f"**{number + 1}. {plain(state.label(trace, b, session.lang))}**")
    if b.prompt:
        st.text(b.prompt)  # a teacher's prompt, shown as the text it is (no Markdown, no HTML)
    step = trace.made_by(b.tensor).name
    st.page_link("pages/walkthrough.py", label=t("exercise.on_step", step=t(f"step.{step}.title")),
                 icon=":material/stairs:", query_params={"step": step})  # fmt: skip
    expected = answer(real, b)
    exact_ = exact(real, expected)
    if number in attempt.found:  # "Right (try 2). Found: 12" (a reload keeps the finding, not the verdict)
        verdict = render(session.lang, attempt.said[number]) + " " if number in attempt.said else ""
        st.success(verdict + t("exercise.found", value=written(round(expected) if exact_ else expected)))
    elif number not in attempt.shown:
        st.caption(t("exercise.exact" if exact_ else "exercise.within"))
        with st.form(key=f"exercise_form_{number}", border=False):
            st.text_input(t("exercise.answer"), key=f"exercise_answer_{number}", max_chars=40)
            left, right = st.columns(2)
            left.form_submit_button(t("exercise.check"), on_click=lambda: attempt.try_answer(
                real, number, st.session_state.get(f"exercise_answer_{number}") or ""))  # fmt: skip
            right.form_submit_button(t("exercise.show_me"), on_click=lambda: attempt.show(number))
    if (said := attempt.said.get(number)) and number not in attempt.found:
        st.info(render(session.lang, said))
    made = state.explanation(session, trace, number)
    if number in attempt.open:  # found or shown: its arithmetic, unless it writes numbers still hidden
        if others := state.uses_hidden(session, real, made):
            st.info(t("exercise.uses_others", numbers=", ".join(others)))
        else:
            st.code("\n".join(made.lines), language=None, wrap_lines=True)
    elif attempt.hint(number):
        st.caption(t("exercise.hint", parts=", ".join(part for part in made.parts if part != b.tensor)))
        parts = [(part, cells) for part, cells in made.parts.items() if part != b.tensor]  # its own is "?" anyway
        for column, (part, cells) in zip(st.columns(len(parts) or 1), parts, strict=False):
            figure = part_figure(trace, part, made.head, cells)
            charts.chart(figure, f"exercise_hint_{number}_{part}", where=column)


def leave(session: Session) -> None:
    """Close the exercise (a button's callback: the URL forgets it before the next run reads it)."""
    session.view(Classroom).exercise = None
    for param in (PARAM, FOUND, SHOWN):
        st.query_params.pop(param, None)


def leave_presenting(session: Session) -> None:
    session.view(Classroom).present = False
    st.query_params.pop(PRESENT, None)


def link(session: Session) -> str | None:
    """The exercise being made as a link: the case as the URL names it now, the blanks, the language; None without
    blanks."""
    if not session.view(Classroom).making:
        return None
    params = st.query_params
    query = {k: params[k] for k in (*origins.PARAMS, "lang") if k in params}
    query[PARAM] = Exercise(session.view(Classroom).making).to_link()
    return f"{st.context.url or ''}?{urlencode(query)}"


def qr_png(url: str) -> bytes:
    """The link as a QR code, black on white, big enough to read from the back of a classroom."""
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="png", scale=6, border=2)
    return out.getvalue()


PRESENTER_CSS = """<style>
[data-testid=stSidebar], [data-testid=stSidebarCollapsedControl], [data-testid=stExpandSidebarButton] { display: none; }
[data-testid=stMain] { font-size: 1.3rem; }
[data-testid=stMain] h1 { font-size: 3rem; } [data-testid=stMain] h2 { font-size: 2.4rem; }
[data-testid=stMain] code { font-size: 1.1rem; }
</style>"""


def frame_part(session: Session, trace: Trace) -> None:
    """Around every page: the presenter view (larger type, no sidebar), and the sidebar's line on an open exercise,
    how far the learner is and the way to its answers."""
    if session.view(Classroom).present:
        st.html(PRESENTER_CSS)
        st.button(t("exercise.leave_present"), key="leave_present", on_click=lambda: leave_presenting(session))
    attempt = session.view(Classroom).exercise
    if attempt is None:
        return
    done, total = len(attempt.found), len(attempt.exercise.blanks)
    with st.sidebar:
        st.info(t("exercise.progress", done=done, total=total), icon=":material/school:")
        st.page_link("pages/exercise.py", label=t("exercise.to_answers"), icon=":material/school:")
        if attempt.case != trace.case:  # the learner changed the numbers: the exercise is on its own case
            st.caption(t("exercise.other_case"))
            st.button(t("exercise.back"), key="exercise_back", on_click=lambda: _back(session))


def _back(session: Session) -> None:
    session.load(session.view(Classroom).exercise.case)


def waiting_page() -> None:
    """A page that would show an open exercise's numbers its own way, in its place until the exercise is done."""
    st.info(t("exercise.page_waits"), icon=":material/school:")
    st.page_link("pages/exercise.py", label=t("exercise.to_answers"), icon=":material/school:")


def share_part(session: Session, trace: Trace) -> None:
    """In the share panel: make an exercise of this case (on the Exercise page), and the presenter view."""
    on = st.toggle(t("exercise.make"), value=state.making(session), key="exercise_making", help=t("exercise.make_help"))
    if on != state.making(session):
        state.start_making(session, on)
        st.switch_page("pages/exercise.py")
    st.page_link("pages/walkthrough.py", label=t("exercise.present"), icon=":material/slideshow:",
                 query_params={PRESENT: "1"})  # fmt: skip
