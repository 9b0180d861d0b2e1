"""docs/attention.ipynb run in a real Jupyter kernel (nbclient + ipykernel): no error, and its outputs are right."""

import json
import math
from pathlib import Path

import nbformat
import torch
import torch.nn.functional as F
from nbclient import NotebookClient

from attention.base.presets import article
from tests.apptest import ARTICLE_OUTPUTS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "attention.ipynb"


def test_the_notebook_runs_and_shows_traces_and_the_right_numbers():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), "commit it without outputs"
    # The kernel starts in the repository's root, so `import attention` is this checkout's package.
    NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(ROOT)}}).execute()
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    errors = [o for cell in code for o in cell.outputs if o.output_type == "error"]
    assert not errors, errors

    shown = code[0].outputs[0]["data"]  # the cell's last expression, a Trace: Jupyter asks for its _repr_html_
    assert "text/html" in shown and shown["text/html"].count("<tr><td>") == 8  # the eight steps
    for title in ("Prepare inputs", "Calculate softmax", "Repeat for every input"):
        assert title in shown["text/html"]
    assert "<code>weighted</code> (3 × 3 × 3) float32" in shown["text/html"]
    assert "<th>Input 3</th><td>2</td><td>7.8</td><td>0.3</td>" in shown["text/html"]

    printed = json.loads("".join(o["text"] for o in code[-1].outputs if o.output_type == "stream"))
    torch.testing.assert_close(torch.tensor(printed["article"]), torch.tensor(ARTICLE_OUTPUTS), rtol=0, atol=1e-5)
    case = article()
    x, wq, wk, wv = (torch.tensor(m, dtype=torch.float32) for m in (case.x, case.w_query, case.w_key, case.w_value))
    textbook = F.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv, scale=1 / math.sqrt(3) / 2)  # the oracle
    torch.testing.assert_close(torch.tensor(printed["textbook"]), textbook)
