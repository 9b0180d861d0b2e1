"""Exercise page: an open exercise's answers, or the exercise being made (numbers to hide, the link, its QR code), or
the ready-made exercises and how to make one."""

import streamlit as st

from attention.app import exercise_room, frame, tab
from attention.app.language import t

trace = frame.trace()
s = tab.current()
if s.classroom.making is not None:
    st.header(t("exercise.make_header"))
    exercise_room.maker(s, trace)
elif s.classroom.exercise is not None:
    st.header(t("exercise.header"))
    exercise_room.answers(s, trace)
else:
    st.header(t("exercise.list_header"))
    st.write(t("exercise.intro"))
    exercise_room.ready_made()
    st.caption(t("exercise.how_to_make"))
