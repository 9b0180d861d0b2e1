"""The Exercise page's body: an open exercise's answers, or the exercise being made (numbers to hide, the link, its
QR code), or the ready-made exercises and the button that makes one."""

from __future__ import annotations

import streamlit as st

from ..app import frame, tab
from ..app.language import t
from . import room
from .state import Classroom


def exercise() -> None:
    trace = frame.trace()
    s = tab.current()
    classroom = s.view(Classroom)
    if classroom.making is not None:
        st.header(t("exercise.make_header"))
        room.maker(s, trace)
        room.stop_making(s)
    elif classroom.exercise is not None:
        st.header(t("exercise.header"))
        room.answers(s, trace)
    else:
        st.header(t("exercise.list_header"))
        st.write(t("exercise.intro"))
        room.ready_made(s, trace)
        room.make_one(s)
