"""Attention, step by step: the frame (page config, shared sidebar, session state, navigation)."""

import streamlit as st

from attention import ui
from attention.ui import t

ui.start()  # first: it settles the session's language, which the page titles below are written in
st.set_page_config(page_title=t("app.title"), page_icon=":material/visibility:", layout="wide")
ui.focus_styles()  # before any page: a visible keyboard focus on every widget
page = st.navigation(
    [
        st.Page("pages/overview.py", title=t("page.overview"), icon=":material/home:", default=True),
        st.Page("pages/walkthrough.py", title=t("page.walkthrough"), icon=":material/stairs:", url_path="walkthrough"),
        st.Page("pages/inputs.py", title=t("page.inputs"), icon=":material/edit:", url_path="inputs"),
        st.Page(
            "pages/broadcasting.py", title=t("page.broadcasting"), icon=":material/view_in_ar:", url_path="broadcasting"
        ),
        st.Page("pages/one_query.py", title=t("page.one_query"), icon=":material/my_location:", url_path="one-query"),
        st.Page("pages/variants.py", title=t("page.variants"), icon=":material/compare:", url_path="variants"),
        st.Page("pages/multi_head.py", title=t("page.multi_head"), icon=":material/view_week:", url_path="multi-head"),
        st.Page("pages/explain.py", title=t("page.explain"), icon=":material/calculate:", url_path="explain"),
        st.Page("pages/devices.py", title=t("page.devices"), icon=":material/memory:", url_path="devices"),
    ]
)
ui.sidebar()

page.run()
