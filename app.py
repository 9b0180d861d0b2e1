"""Attention, step by step: the frame (page config, shared sidebar, session state, navigation)."""

import streamlit as st

from attention import ui

st.set_page_config(page_title="Attention, step by step", page_icon=":material/visibility:", layout="wide")
ui.start()
ui.focus_styles()  # before any page: a visible keyboard focus on every widget
page = st.navigation(
    [
        st.Page("pages/overview.py", title="Overview", icon=":material/home:", default=True),
        st.Page("pages/walkthrough.py", title="Walkthrough", icon=":material/stairs:", url_path="walkthrough"),
        st.Page("pages/inputs.py", title="Inputs", icon=":material/edit:", url_path="inputs"),
        st.Page("pages/broadcasting.py", title="Broadcasting", icon=":material/view_in_ar:", url_path="broadcasting"),
        st.Page("pages/one_query.py", title="One query at a time", icon=":material/my_location:", url_path="one-query"),
        st.Page("pages/variants.py", title="Article vs textbook", icon=":material/compare:", url_path="variants"),
        st.Page("pages/multi_head.py", title="Multi-head", icon=":material/view_week:", url_path="multi-head"),
        st.Page("pages/explain.py", title="Explain a number", icon=":material/calculate:", url_path="explain"),
        st.Page("pages/devices.py", title="Devices", icon=":material/memory:", url_path="devices"),
    ]
)
ui.sidebar()

page.run()
