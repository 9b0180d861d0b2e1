"""The Decoding page in the frame: its page, and its link's step or generation, opened and kept."""

from __future__ import annotations

from ..app.capability import Capability, Page
from . import state

CAPABILITY = Capability(
    "decoding", (Page("pages/decoding.py", "page.decoding", ":material/fast_forward:", "decoding"),), state.PARAMS,
    state.open_link, state.link,
)  # fmt: skip
