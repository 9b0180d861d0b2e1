"""A session at the size limits stays within the memory bound docs/hosting.md states, on every page and every step."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attention.app.cache import BUDGET, SESSION_BOUND

ROOT = Path(__file__).resolve().parents[1]
# glibc otherwise raises its mmap threshold with every big block freed and keeps later ones in its heap: up to ~130 MiB
# more per session at the limits, varying run to run (docs/hosting.md, "Memory per visitor")
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "131072"}
# In a fresh process: a visitor at the article's size opens every page (the server's own memory, warmed up); then a
# second visitor goes to the limits with every option that makes the n × n tensors differ (16 heads of n = 1024,
# d = 64, textbook scaling, a causal mask, a temperature; then float64, whose limit is 8 heads) and opens every page,
# every step, the variants' temperature slider and step 6's explanation. Its peak RSS above the first's is the bound.
CHILD = """
import json, resource, sys
sys.path.insert(0, {root!r})
from streamlit.testing.v1 import AppTest
from attention.app.registry import PAGES
from attention.forward.steps import STEP_NAMES

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def every_page(at):
    for page in PAGES:
        at.switch_page(page.file).run()
        assert not at.exception and not at.error, (page.name, at.exception, [e.value for e in at.error])

first = AppTest.from_file({app!r}, default_timeout=600).run()
every_page(first)
base = peak()
at = AppTest.from_file({app!r}, default_timeout=600).run()
at.radio(key="fill").set_value("random").run()
at.toggle(key="use_rounded").set_value(False).run()
for size in ("d_in", "d_k", "d_v"):
    at.number_input(key=size).set_value(64).run()
at.number_input(key="n").set_value(1024).run()
at.number_input(key="heads").set_value(16).run()
at.selectbox(key="scale").set_value("sqrt_dk").run()
at.selectbox(key="mask").set_value("causal").run()
at.number_input(key="temperature").set_value(0.5).run()
for heads, dtype in ((16, "float32"), (8, "float64")):
    at.number_input(key="heads").set_value(heads).run()
    at.radio(key="dtype").set_value(dtype).run()
    case = at.session_state["session"].case
    assert (case.n, case.d_v, case.options.heads, case.options.dtype) == (1024, 64, heads, dtype)
    every_page(at)
    at.switch_page("pages/walkthrough.py").run()
    for step in STEP_NAMES[1:]:
        at.radio(key="step_picker").set_value(step).run()
    at.switch_page("pages/variants.py").run()
    at.select_slider(key="explore_temperature").set_value(0.1).run()
    at.switch_page("pages/explain.py").run()
    at.selectbox(key="explain_tensor").set_value("weighted").run()
    assert not at.exception and not at.error
print(json.dumps({{"peak": peak() - base, "kept": at.session_state["session"].derived.bytes}}))
"""


@pytest.mark.timeout(900)
def test_a_session_at_the_limits_stays_within_the_stated_bound():
    child = CHILD.format(root=str(ROOT), app=str(ROOT / "app.py"))
    env = os.environ | MALLOC  # as the hosting recipe runs the server
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=850, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    measured = json.loads(run.stdout.strip().splitlines()[-1])
    assert measured["kept"] <= BUDGET
    assert measured["peak"] <= SESSION_BOUND, f"{measured['peak'] / 2**20:.0f} MiB over {SESSION_BOUND / 2**20:.0f}"
    hosting = (ROOT / "docs" / "hosting.md").read_text()
    assert f"{SESSION_BOUND // 2**20} MiB" in hosting and f"{BUDGET // 2**20} MiB" in hosting  # the bound it states
    assert "MALLOC_MMAP_THRESHOLD_=131072" in hosting
