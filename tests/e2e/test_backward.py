"""The Backward page in a real browser: train the article's head a few steps, read the falling loss and new outputs;
one pair of pickers for the loss and the sensitivity map; each gradient on its own scale, a masked zero said so."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest

from attention import attend
from attention.backward import state as learning
from attention.backward.loss import default_loss
from attention.backward.training import train_step
from attention.base.case import with_options
from attention.base.files import case_to_link
from attention.base.presets import article
from tests.e2e.test_browser import HEATMAPS, _decode, wait_ready

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / os.environ.get("SCREENSHOTS_DIR", "tests/artifacts/screenshots")
STEPS = 3
LOSSES = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(gd => (gd.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === 'the loss over the steps taken')
    .map(gd => Array.from(gd.data[0].y))[0]"""


def trained_outputs(steps: int) -> np.ndarray:
    """The oracle: the core's own training steps from the article, as the app's link replays them."""
    trace = attend(article())
    loss = default_loss(trace)
    for _ in range(steps):
        trace = attend(train_step(trace, loss, learning.DEFAULT_LR))
    return trace.outputs.numpy()


def test_training_the_articles_head_lowers_the_loss_and_moves_the_outputs(page):
    page.goto("/backward")
    wait_ready(page)
    status = page.get_by_text(re.compile(r"every gradient agrees with torch\.autograd"))
    first = float(re.search(r"Loss ([\d.e+-]+)", status.inner_text()).group(1))
    for _ in range(STEPS):
        page.get_by_role("button", name="Take one training step").click()
        wait_ready(page)
    losses = page.evaluate(LOSSES)  # the line chart's points: the loss before the first step and after each
    assert len(losses) == STEPS + 1 and losses[0] == pytest.approx(first, rel=1e-5)
    assert all(after < before for before, after in itertools.pairwise(losses))  # falling, step by step
    page.get_by_text("Text version: the loss over the steps taken").click()
    went = re.search(
        r"from ([\d.e+-]+) to ([\d.e+-]+) in (\d+) steps", page.get_by_text("the loss went from").inner_text()
    )
    assert int(went.group(3)) == STEPS and float(went.group(2)) == pytest.approx(losses[-1], rel=1e-5)
    assert f"train={STEPS}" in page.url and "lr=0.01" in page.url  # the link: the steps, not the weights
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "backward.png", full_page=True)
    page.get_by_role("tab", name="Steps in reverse").click()  # a tab starts no run: its charts were drawn with it
    page.wait_for_function(f"(title) => ({HEATMAPS})(title).length > 0", arg="outputs")
    shown = page.evaluate(HEATMAPS, "outputs")  # d outputs' forward twin: the outputs with the trained weights
    assert shown, "no outputs heatmap"
    np.testing.assert_allclose(_decode(shown[0]), trained_outputs(STEPS), rtol=1e-4, atol=1e-4)
    assert not np.allclose(_decode(shown[0]), attend(article()).outputs.numpy())


# A heatmap by its title: its colour range and the text written in its cells (SVG text, read as the page shows it)
DRAWN = """(title) => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(gd => (gd.layout?.title?.text ?? '').replace(/<[^>]*>/g, '') === title)
    .map(gd => ({zmin: gd._fullData[0].zmin, zmax: gd._fullData[0].zmax,
                 texts: [...gd.querySelectorAll('text')].map(t => t.textContent)}))[0]"""


def test_one_output_number_drives_the_loss_and_the_sensitivity_map(page):
    page.goto("/backward")
    wait_ready(page)
    main = page.locator("[data-testid=stMain]")
    assert main.locator("[data-testid=stSelectbox]", has_text="Number").count() == 1  # one pair of pickers
    page.get_by_role("tab", name="Sensitivity map").click()
    expect_text = main.get_by_text(re.compile(r"^Output Input 3's number 2 moves most with"))
    expect_text.wait_for()  # the loss's own number (output 3's second), not another default
    main.locator("[data-testid=stSelectbox]", has_text="Number").click()
    page.get_by_role("option", name="1", exact=True).click()
    wait_ready(page)
    page.get_by_role("tab", name="Sensitivity map").click()
    main.get_by_text(re.compile(r"^Output Input 3's number 1 moves most with")).wait_for()


def test_a_gradient_has_its_own_scale_and_a_masked_zero_says_so(page):
    causal = case_to_link(with_options(article(), mask="causal", weights_override=None))
    page.goto(f"/backward?case={causal}")
    wait_ready(page)
    page.get_by_role("tab", name="Steps in reverse").click()
    page.locator("[data-testid=stRadio] label", has_text="softmax").first.click()
    wait_ready(page)
    page.wait_for_function(f"(title) => ({HEATMAPS})(title).length > 0", arg="∂L/∂scores")
    grad = _decode(page.evaluate(HEATMAPS, "∂L/∂scores")[0])
    drawn = page.evaluate(DRAWN, "∂L/∂scores")
    top = np.nanmax(np.abs(grad))
    assert drawn["zmax"] == pytest.approx(top, rel=1e-6) and drawn["zmin"] == pytest.approx(-top, rel=1e-6)
    assert page.evaluate(DRAWN, "scores")["zmax"] > 10 * top  # the forward scores' range is not the gradient's
    assert drawn["texts"].count("0 (masked)") == 3  # the causal mask's three zeros, not like any other 0
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "backward_masked.png", full_page=True)
