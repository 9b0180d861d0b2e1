"""The page registry: every page's file, title, icon and URL path, in the order the navigation lists them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Page:
    file: str  # the page's script, relative to the folder of app.py (as st.Page takes it)
    title: str  # the catalogue key of its title
    icon: str
    url_path: str  # its address after the app's: "" is the landing page
    live: bool = False  # its editors rerun it alone, banners and all (live.py): the frame leaves the banners to it
    hides: bool = False  # it draws an open exercise's hidden numbers as "?" (exercises.py); the rest wait till done

    @property
    def name(self) -> str:
        """The file's name without .py: "one_query"."""
        return Path(self.file).stem


PAGES = (
    Page("pages/overview.py", "page.overview", ":material/home:", "", hides=True),
    Page("pages/walkthrough.py", "page.walkthrough", ":material/stairs:", "walkthrough", live=True, hides=True),
    Page("pages/inputs.py", "page.inputs", ":material/edit:", "inputs", live=True, hides=True),
    Page("pages/broadcasting.py", "page.broadcasting", ":material/view_in_ar:", "broadcasting", hides=True),
    Page("pages/one_query.py", "page.one_query", ":material/my_location:", "one-query"),
    Page("pages/variants.py", "page.variants", ":material/compare:", "variants"),
    Page("pages/multi_head.py", "page.multi_head", ":material/view_week:", "multi-head", live=True),
    Page("pages/explain.py", "page.explain", ":material/calculate:", "explain", hides=True),
    Page("pages/backward.py", "backward.page", ":material/undo:", "backward"),  # how attention learns
    Page("pages/decoding.py", "page.decoding", ":material/fast_forward:", "decoding"),  # how it is run: a KV cache
    Page("pages/tiles.py", "page.tiles", ":material/grid_view:", "tiles"),  # and in tiles (FlashAttention)
    Page("pages/exercise.py", "page.exercise", ":material/school:", "exercise", hides=True),
    Page("pages/devices.py", "page.devices", ":material/memory:", "devices"),
)
BY_NAME = {page.name: page for page in PAGES}
BY_URL = {page.url_path: page for page in PAGES}
