"""What one action rebuilds (counted, not timed): a step change or an edit remakes only what it changed, so a change
that rebuilds everything on every run fails here, not only in bench/server.md."""

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from attention import attend
from attention.base.presets import article
from attention.forward.figures import tensor_heatmap
from attention.forward.steps import step_names
from tests.apptest import APP, edit, session


@pytest.fixture
def figures_made(monkeypatch) -> list[str]:
    """Every Plotly figure constructed while the test runs (the app's and Streamlit's: the real constructor runs)."""
    made, init = [], go.Figure.__init__

    def counted(self, *args, **kwargs):
        made.append(type(self).__name__)
        init(self, *args, **kwargs)

    monkeypatch.setattr(go.Figure, "__init__", counted)
    return made


def opened(page: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    return app.switch_page(f"pages/{page}.py").run()


def test_a_step_change_makes_the_new_steps_figures_and_nothing_else(figures_made):
    app = opened("walkthrough")
    s = session(app)
    names = step_names(s.case)
    for step in range(2, len(names) + 1):
        s.derived.made.clear()
        figures_made.clear()
        app.button(key="next").click().run()
        tensors = len(app.get("plotly_chart"))
        assert s.step == names[step - 1] and not app.exception
        made = s.derived.made
        assert set(made) <= {"figure", "table", "whys"}, f"step {step} made {dict(made)}"  # no trace, no check
        assert made["whys"] <= 1  # the new step's, once
        assert made["figure"] <= tensors and made["table"] <= tensors and len(figures_made) <= tensors, dict(made)
    s.derived.made.clear()
    figures_made.clear()
    app.button(key="previous").click().run()  # a step shown before: its figures are kept
    assert not s.derived.made and not figures_made


def test_an_edit_makes_one_trace_one_check_and_the_figures_that_show_it(figures_made):
    app = opened("inputs")
    s = session(app)
    for value in (5.0, 6.0):
        s.derived.made.clear()
        figures_made.clear()
        edit(app, "x", 1, "2", value)
        assert s.case.x[1][1] == value and not app.exception
        made = dict(s.derived.made)
        assert made.pop("trace") == 1 and made.pop("check") == 1, dict(s.derived.made)  # one trace, checked once
        assert made.pop("figure") == 1 and len(figures_made) == 1  # the outputs: the one chart /inputs draws
        assert set(made) <= {"link", "is article", "origin check"}, made  # the URL's link; the origin's own (none)


def test_a_rerun_that_changes_nothing_makes_nothing(figures_made):
    app = opened("walkthrough")
    s = session(app)
    app.button(key="next").click().run()
    s.derived.made.clear()
    figures_made.clear()
    app.run()
    assert not s.derived.made and not figures_made


def test_a_figure_carries_its_numbers_and_no_plotly_template():
    """Streamlit copies (to_dict) and writes out (to_json) every chart on every run, and draws it in its own theme:
    a figure without Plotly's default template (7 KB) is what that costs for a 3 × 3 heatmap."""
    fig = tensor_heatmap(attend(article()), "outputs")
    shipped = pio.to_json(fig, validate=False)
    assert len(shipped) < 2_000, len(shipped)
    assert fig.to_dict()["layout"]["template"] == pio.templates["none"].to_plotly_json()
