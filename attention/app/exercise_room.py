"""The Exercise page's rooms: the ready-made exercises, the maker (the numbers to hide, their prompts, the link and
its QR code), and the answers of an open exercise (judged, with a hint after two tries and the arithmetic after
three)."""

from __future__ import annotations

import streamlit as st

from .. import exercise, figures
from ..core import Trace
from ..i18n import render
from ..numbers import written
from . import charts, compute, exercises, picked
from .exercises import PARAM, READY
from .language import t
from .session import Session
from .text import plain


def ready_made() -> None:
    """The ready-made exercises on the article, one a step, each a link that opens it."""
    for name in READY:
        st.page_link("pages/exercise.py", label=t(f"exercise.ready_title.{name}"), icon=":material/school:",
                     query_params={PARAM: name})  # fmt: skip


def maker(session: Session, trace: Trace) -> None:
    """A teacher's exercise: numbers clicked on a step's heatmap or picked here, a prompt each, then the link."""
    st.write(t("exercise.make_intro"))
    names = [name for name in exercise.HIDEABLE if any(name in step.tensors for step in trace.steps)]
    name = st.selectbox(t("exercise.tensor"), names, key="exercise_tensor")
    index = []
    for axis, (kind, size, column) in enumerate(
        zip(trace.axes(name), trace[name].shape, st.columns(len(trace.axes(name))), strict=True)
    ):
        labels = [t("picker.head_n", head=i + 1) for i in range(size)] if kind == "head" else figures.labels(
            trace, kind, size)  # fmt: skip
        index.append(column.selectbox(figures.axis(session.lang, kind), range(size), format_func=labels.__getitem__,
                                      key=f"exercise_axis_{name}_{axis}"))  # fmt: skip
    st.text_input(t("exercise.prompt"), max_chars=exercise.MAX_PROMPT, key="exercise_prompt")
    st.button(t("exercise.hide"), key="exercise_hide", type="primary", on_click=lambda: _hide(session, trace))
    if not session.classroom.making:
        st.caption(t("exercise.none_yet"))
        return
    st.subheader(t("exercise.hidden_so_far", count=len(session.classroom.making)))
    for number, b in enumerate(session.classroom.making):
        left, middle, right = st.columns([2, 4, 1], vertical_alignment="bottom")
        left.markdown(f"{number + 1}. {plain(exercises.label(trace, b))}")
        key = f"exercise_prompt_{number}_{b.tensor}_{b.index}"
        retyped = lambda n=number, k=key: exercises.set_prompt(session, n, st.session_state[k])  # noqa: E731
        middle.text_input(t("exercise.prompt"), value=b.prompt, max_chars=exercise.MAX_PROMPT, key=key,
                          on_change=retyped)  # fmt: skip
        right.button(t("exercise.remove"), key=f"exercise_remove_{number}",
                     on_click=lambda b=b: exercises.toggle(session, trace, b.tensor, b.index))  # fmt: skip
    url = exercises.link(session)
    st.subheader(t("exercise.link"))
    st.code(url, language=None, wrap_lines=True)
    st.caption(t("exercise.link_help"))
    st.image(exercises.qr_png(url), caption=t("exercise.qr"), width=240)


def _hide(session: Session, trace: Trace) -> None:
    """The picked number hidden, as the widgets hold it when the button is pressed (a callback runs before them)."""
    state, name = st.session_state, st.session_state["exercise_tensor"]
    index = tuple(state.get(f"exercise_axis_{name}_{axis}", 0) for axis in range(len(trace.axes(name))))
    exercises.toggle(session, trace, name, index, state.get("exercise_prompt") or "")


def answers(session: Session, trace: Trace) -> None:
    """Every blank of the open exercise: its prompt, where it is, the answer box and what the answer was told."""
    attempt, real = session.classroom.exercise, compute.current(session)
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
    st.button(t("exercise.leave"), key="exercise_leave", on_click=lambda: exercises.leave(session))


def _blank(session: Session, trace: Trace, real: Trace, number: int, b) -> None:
    """One hidden number: where it is, the answer box (its tolerance, its verdict), then the hint or the arithmetic."""
    attempt = session.classroom.exercise
    st.markdown(f"**{number + 1}. {plain(exercises.label(trace, b))}**")
    if b.prompt:
        st.text(b.prompt)  # a teacher's prompt, shown as the text it is (no Markdown, no HTML)
    step = exercises.step_of(trace, b)
    st.page_link("pages/walkthrough.py", label=t("exercise.on_step", step=t(f"step.{step}.title")),
                 icon=":material/stairs:", query_params={"step": step})  # fmt: skip
    expected = exercise.answer(real, b)
    exact = exercise.exact(real, expected)
    if number in attempt.found:  # "Right (try 2). Found: 12" (a reload keeps the finding, not the verdict)
        verdict = render(session.lang, attempt.said[number]) + " " if number in attempt.said else ""
        st.success(verdict + t("exercise.found", value=written(round(expected) if exact else expected)))
    elif number not in attempt.shown:
        st.caption(t("exercise.exact" if exact else "exercise.within"))
        with st.form(key=f"exercise_form_{number}", border=False):
            st.text_input(t("exercise.answer"), key=f"exercise_answer_{number}", max_chars=40)
            left, right = st.columns(2)
            left.form_submit_button(t("exercise.check"), on_click=lambda: attempt.try_answer(
                real, number, st.session_state.get(f"exercise_answer_{number}") or ""))  # fmt: skip
            right.form_submit_button(t("exercise.show_me"), on_click=lambda: attempt.show(number))
    if (said := attempt.said.get(number)) and number not in attempt.found:
        st.info(render(session.lang, said))
    made = exercises.explanation(session, trace, number)
    if number in attempt.open:  # found or shown: its arithmetic, unless it writes numbers still hidden
        if others := exercises.uses_hidden(session, real, made):
            st.info(t("exercise.uses_others", numbers=", ".join(others)))
        else:
            st.code("\n".join(made.lines), language=None, wrap_lines=True)
    elif attempt.hint(number):
        st.caption(t("exercise.hint", parts=", ".join(part for part in made.parts if part != b.tensor)))
        parts = [(part, cells) for part, cells in made.parts.items() if part != b.tensor]  # its own is "?" anyway
        for column, (part, cells) in zip(st.columns(len(parts) or 1), parts, strict=False):
            figure = picked.part_figure(trace, part, made.head, cells)
            charts.chart(figure, f"exercise_hint_{number}_{part}", where=column)
