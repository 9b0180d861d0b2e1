"""The Backward page in a real browser: train the article's head a few steps, read the falling loss and new outputs."""

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
