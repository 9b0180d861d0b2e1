"""Exercises in Chromium: a teacher makes one and a learner in a fresh session answers it wrong, then right, and sees
the arithmetic; and a hidden number appears nowhere on any page (text, tables, chart data) of that session."""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pytest
from playwright.sync_api import Browser, Page, expect

from attention import attend
from attention.app.registry import PAGES
from attention.base.files import case_to_link
from attention.base.numbers import short_float32, written
from attention.base.presets import random_case
from attention.exercise.compute import Blank, Exercise

from .conftest import new_context
from .test_browser import _decode, assert_no_exception, open_page, wait_ready
from .test_editor import click_cell

pytestmark = pytest.mark.e2e

# Every heatmap's z (Plotly's typed arrays decoded in Python) and every chart's JSON, as the browser holds them
CHART_DATA = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
    z: (gd.data || []).map(trace => trace.z).filter(z => z),
    json: JSON.stringify(gd.data || []) + JSON.stringify(gd.layout?.annotations || []),
}))"""


def choose(page: Page, label: str, option: str) -> None:
    """Pick an option of the main area's selectbox labelled `label`, as a person does."""
    page.locator("[data-testid=stMain] [data-testid=stSelectbox]", has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_ready(page)


def test_a_teacher_makes_an_exercise_and_a_learner_answers_it_in_a_fresh_session(browser: Browser, server) -> None:
    teacher = new_context(browser, base_url=server)
    try:
        page = teacher.new_page()
        open_page(page, "/exercise")
        page.get_by_role("button", name="Make one").click()  # on the Exercises page itself
        wait_ready(page)
        expect(page.locator("[data-testid=stMain] h2", has_text="Make an exercise")).to_be_visible()
        choose(page, "Number to hide", "a score, q · k (scores_raw)")
        choose(page, "query", "Input 2")
        choose(page, "key", "Input 3")
        page.get_by_role("button", name="Hide this number").click()
        wait_ready(page)
        expect(page.get_by_text("Hidden: 1")).to_be_visible()
        expect(page.get_by_text("the score of query Input 2 on key Input 3", exact=True)).to_be_visible()
        page.locator("[data-testid=stSidebarNav] a", has_text="Walkthrough").click()  # the same session
        wait_ready(page)
        page.get_by_text("7 outputs", exact=True).click()
        wait_ready(page)
        click_cell(page, 0, 2, 1, 3, 3)  # a click on a heatmap hides its number: output 3's second, 7.8
        expect(page.get_by_text("Hidden in the exercise: number 2 of output Input 3 (2 hidden)")).to_be_visible()
        page.locator("[data-testid=stSidebarNav] a", has_text="Exercises").click()
        wait_ready(page)
        expect(page.get_by_text("Hidden: 2")).to_be_visible()
        link = page.locator("[data-testid=stMain] [data-testid=stCode]").last.inner_text().strip()
        assert "exercise=" in link
    finally:
        teacher.close()

    learner = new_context(browser)
    try:
        page = learner.new_page()
        page.goto(link)
        wait_ready(page)
        expect(page.locator("[data-testid=stMain] h2", has_text="Exercise")).to_be_visible()
        answer = page.get_by_label("Your answer").first  # the first of the two hidden numbers: score (2, 3)
        answer.fill("11")
        page.get_by_role("button", name="Check", exact=True).first.click()
        wait_ready(page)
        expect(page.get_by_text("Not yet (try 1).")).to_be_visible()
        answer.fill("12")
        page.get_by_role("button", name="Check", exact=True).first.click()
        wait_ready(page)
        expect(page.get_by_text("Right (try 2). Found: 12")).to_be_visible()
        arithmetic = page.locator("[data-testid=stMain] [data-testid=stCode]").last.inner_text()
        assert "q₂ · k₃" in arithmetic and "= 12" in arithmetic
        assert "found=1" in page.url  # a reload keeps it
        expect(page.get_by_text("Exercise: 1 of 2 done").first).to_be_visible()
        assert_no_exception(page)
    finally:
        learner.close()


BLANKS = (*(Blank("outputs", (2, c)) for c in range(3)), Blank("scores_raw", (1, 2)))  # output 3, score (2, 3)


def _as_written(v: float) -> set[str]:
    """How the views write a number: a heatmap's cell (4 significant digits), a table's shortest float32."""
    return {f"{v:.4g}", written(short_float32(v)).replace("−", "-")}


def _unique_case():
    """A seeded random case whose hidden numbers, as the views write them, are no part of any other number written:
    then finding one of those strings on a page is finding the hidden number."""
    hidden = {(b.tensor, b.index) for b in BLANKS} | {("outputs_by_query", (2, c)) for c in range(3)}
    hidden |= {("scores", (1, 2))}  # scores_raw's twin (exercise.shown_with)
    for seed in range(100):
        case = random_case(4, 4, 3, 3, seed=seed)
        trace = attend(case)
        values = [float(trace[b.tensor][b.index]) for b in BLANKS]
        others = {
            s
            for step in trace.steps
            for name, tensor in step.tensors.items()
            for index in np.ndindex(*tensor.shape)
            if (name, index) not in hidden
            for s in _as_written(float(tensor[index]))
        }
        strings = set().union(*map(_as_written, values))
        if not any(s in other for s in strings for other in others):
            return case, values, strings
    raise AssertionError("no seed among 100 writes its hidden numbers uniquely")


def test_a_hidden_number_appears_nowhere_on_any_page(browser: Browser, server) -> None:
    case, hidden, strings = _unique_case()
    query = urlencode({"case": case_to_link(case), "exercise": Exercise(BLANKS).to_link()})
    context = new_context(browser, base_url=server)
    seen = []
    try:
        page = context.new_page()
        paths = [f"/{p.url_path}" for p in PAGES] + [f"/walkthrough?step={s}" for s in ("scores", "repeat")]
        for path in paths:
            open_page(page, f"{path}{'&' if '?' in path else '?'}{query}")
            text = page.locator("body").inner_text()
            charts = page.evaluate(CHART_DATA)
            zs = [_decode(z) for chart in charts for z in chart["z"]]
            for v in hidden:
                if any(np.isclose(z, v, rtol=1e-6, atol=0).any() for z in zs):
                    seen.append((path, "chart z", v))
            for s in strings:
                if s in text or s.replace("-", "−") in text:
                    seen.append((path, "text", s))
                if any(s in chart["json"] for chart in charts):
                    seen.append((path, "chart json", s))
        assert_no_exception(page)
    finally:
        context.close()
    assert not seen, seen
