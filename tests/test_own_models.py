"""Models on disk through the app (AppTest): ATTENTION_MODELS pointing at tiny random models made here with
transformers (Llama, GPT-2, BERT, Qwen3) and broken folders; the picker lists them with their sizes, each opens a head
checked against the model, a causal one generates, a broken one or one past the budget says why and the case stays,
a link names a model by its id, the exported script runs at home."""

import json
import os
import shutil
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import attend, models
from attention.app import loaded
from attention.app.origins import Article, ModelHead
from attention.base.numbers import size_text
from attention.decoding.state import DecodingView
from attention.forward.steps import step_names
from attention.models import offered
from attention.models.script import real_script
from tests.apptest import APP, current_trace, session
from tests.test_families import FAMILIES, NEEDS_TOKENIZERS, gguf_pair, make, tokenizers, vocabulary  # noqa: F401 (fixtures)

pytestmark = NEEDS_TOKENIZERS
ROOT = Path(__file__).resolve().parents[1]
TINY = ("llama", "gpt2", "bert", "qwen3")


@pytest.fixture(scope="module")
def shelf(tokenizers, gguf_pair, tmp_path_factory) -> Path:  # noqa: F811
    """An operator's folder: a tiny model of each family, an 8-bit llama GGUF file, a folder without weights, one of
    an architecture not here."""
    root = tmp_path_factory.mktemp("shelf")
    shutil.copy(gguf_pair[2], root / "tiny-llama.Q8_0.gguf")
    for family in TINY:
        make(family, root / f"tiny-{family}", tokenizers[FAMILIES[family][3]])
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (root / "alien").mkdir()
    (root / "alien" / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    return root


@pytest.fixture(autouse=True)
def offered_here(shelf, tmp_path, monkeypatch):
    yield from offering(shelf, tmp_path, monkeypatch)
    models._offers.cache_clear()


def offering(folder, tmp_path, monkeypatch):
    """The app offers the folder's models alone (and an empty Hugging Face cache: not this machine's), nothing
    loaded yet; a fixture's body (it yields once)."""
    monkeypatch.setenv("ATTENTION_MODELS", str(folder))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("ATTENTION_MODEL_BUDGET", raising=False)
    monkeypatch.setattr(offered, "_loaded", OrderedDict())
    models._offers.cache_clear()
    yield


def opened(model: str, **params: str) -> AppTest:
    """The app opened by a link to a model's head."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"model": model, **params})
    at.run()
    assert not at.exception, at.exception
    return at


def said(at: AppTest) -> str:
    return " ".join(e.value for kind in ("caption", "info", "error", "warning") for e in getattr(at, kind))


def assert_checked(at: AppTest, model: str) -> None:
    s = session(at)
    assert isinstance(s.origin, ModelHead) and s.origin.choice.model == model
    assert s.origin.check(current_trace(at)).agrees
    assert "Agrees with the model's own output of" in said(at)


def test_the_registry_knows_every_offered_model_by_its_id_without_loading_it(shelf):
    ids = models.ids()
    assert {f"local:tiny-{family}" for family in TINY} | {"local:broken", "local:alien"} <= set(ids)
    spec = models.spec("local:tiny-llama")
    assert (spec.name, spec.title, spec.layers, spec.heads, spec.kv_heads, spec.causal) == (
        "local:tiny-llama", "tiny-llama", 2, 4, 2, True
    )  # fmt: skip
    assert not offered._loaded  # described from its config and its files' headers alone
    assert models.problem("local:tiny-gpt2") is None
    assert "has no model.safetensors" in models.problem("local:broken")
    assert "mamba" in models.problem("local:alien") and "llama" in models.problem("local:alien")
    about = str(models.about(models.spec("local:tiny-bert")))
    assert "bidirectional encoder" in about and "bert" in about and "learned position" in about
    assert "RoPE" in str(models.about(spec)) and "causal decoder" in str(models.about(spec))
    assert models.causal_id("local:tiny-bert") != "local:tiny-bert" and models.causal_id("local:tiny-gpt2") == (
        "local:tiny-gpt2"
    )


def test_loading_tells_its_progress_and_keeps_one_copy_for_every_session():
    heard = []
    model = models.loaded("local:tiny-gpt2", lambda read, total: heard.append((read, total)))
    total = heard[-1][1]
    assert heard == [(k, total) for k in range(1, total + 1)] and total > 10
    assert models.loaded("local:tiny-gpt2") is model and list(offered._loaded) == ["local:tiny-gpt2"]


def test_the_app_shows_tensors_read_of_total_while_a_model_loads_then_clears_it(monkeypatch):
    shown = []

    class Bar:
        def progress(self, value: float, text: str) -> None:
            shown.append((value, text))

        def empty(self) -> None:
            shown.append("emptied")

    monkeypatch.setattr(loaded.st, "progress", lambda value, text: Bar())
    model = loaded.model("local:tiny-bert", "en")
    total = len(model.weights)
    assert shown[0] == (1 / total, f"Loading tiny-bert: 1 of {total} tensors read (once per server)…")
    assert shown[-2] == (1.0, f"Loading tiny-bert: {total} of {total} tensors read (once per server)…")
    assert shown[-1] == "emptied"
    shown.clear()
    assert loaded.model("local:tiny-bert", "zh") is model and not shown  # loaded once: no bar again


def test_the_picker_lists_the_offered_models_with_their_family_layers_heads_and_sizes():
    at = opened("local:tiny-llama")
    options = at.selectbox(key="real_model").options
    llama = models.offers()["local:tiny-llama"]
    line = (f"tiny-llama · llama · 2 layers × 4 heads · {size_text(llama.disk_bytes)} on disk, "
            f"{size_text(llama.float32_bytes)} in float32")  # fmt: skip
    assert line in options, options
    assert any(o.startswith("tiny-bert · bert · 2 layers × 4 heads") for o in options)
    assert "broken · cannot be opened" in options and "alien · cannot be opened" in options
    assert "A causal decoder (llama architecture): 2 layers, 4 query heads and 2 key/value heads" in said(at)


@pytest.mark.parametrize("family", TINY)
def test_picking_each_model_opens_its_default_head_checked_against_the_model(family):
    start = "local:tiny-bert" if family != "bert" else "local:tiny-llama"
    at = opened(start, layer="2", head="3")
    assert_checked(at, start)
    assert session(at).origin.choice.layer == 2 and session(at).origin.choice.head == 3
    at.selectbox(key="real_model").set_value(f"local:tiny-{family}").run()
    assert not at.exception, at.exception
    assert_checked(at, f"local:tiny-{family}")
    choice = session(at).origin.choice
    assert (choice.sentence, choice.layer, choice.head) == ("The cat sat on the mat because it was tired", 1, 1)
    assert at.query_params["model"] == f"local:tiny-{family}"
    at.number_input(key="real_head").set_value(4).run()  # its own bounds: 4 heads
    assert_checked(at, f"local:tiny-{family}")
    at.switch_page("pages/walkthrough.py").run()
    assert not at.exception


@pytest.mark.parametrize(
    ("picked", "words"),
    [("local:broken", "has no model.safetensors"), ("local:alien", "is mamba, not an architecture this app computes")],
)
def test_a_broken_model_says_why_and_the_case_stays(picked, words):
    at = opened("local:tiny-gpt2")
    shown = session(at).case
    at.selectbox(key="real_model").set_value(picked).run()
    assert not at.exception
    assert any(words in w.value and "cannot be opened" in w.value for w in at.warning), [w.value for w in at.warning]
    assert session(at).case is shown and session(at).origin.choice.model == "local:tiny-gpt2"
    assert at.selectbox(key="real_model").value == "local:tiny-gpt2"


def test_a_qwen3_head_walks_its_q_k_norm_as_step_3a():
    at = opened("local:tiny-qwen3", layer="2", head="3")
    assert_checked(at, "local:tiny-qwen3")
    case = session(at).case
    assert case.options.q_norm is not None and step_names(case)[3:5] == ("norm", "rope")


def test_a_model_past_the_budget_is_marked_and_refused_with_both_numbers_before_it_is_read(monkeypatch):
    monkeypatch.setenv("ATTENTION_MODEL_BUDGET", str(450 * 2**10))  # tiny-gpt2's 364 KiB in, tiny-llama's 585 out
    at = opened("local:tiny-gpt2")
    options = at.selectbox(key="real_model").options
    assert any(o.startswith("tiny-llama · llama") and o.endswith("past this server's budget") for o in options)
    assert not any(o.startswith("tiny-gpt2") and o.endswith("budget") for o in options)
    at.selectbox(key="real_model").set_value("local:tiny-llama").run()
    assert any("more than this server's budget of 450 KiB" in w.value for w in at.warning)
    assert session(at).origin.choice.model == "local:tiny-gpt2" and "local:tiny-llama" not in offered._loaded


def test_a_link_to_a_model_not_offered_here_says_so_and_opens_the_article():
    at = opened("local:no-such-model")
    assert any("is not one of" in w.value and "local:tiny-llama" in w.value for w in at.warning)
    assert isinstance(session(at).source, Article)
    bounds = opened("local:tiny-bert", layer="3", head="9")  # its own layers and heads bound a link
    warned = " ".join(w.value for w in bounds.warning)
    assert "layer '3' is not a number from 1 to 2" in warned and "head '9' is not a number from 0 to 4" in warned


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_a_causal_model_on_disk_generates_on_the_decoding_page(family):
    at = opened(f"local:tiny-{family}")
    at.switch_page("pages/decoding.py").run()
    at.radio(key="decoding_source").set_value("generation").run()
    assert f"Generates with tiny-{family}" in said(at)
    at.number_input(key="decoding_new_tokens").set_value(3).run()
    at.button(key="decoding_go").click().run()
    assert not at.exception, at.exception
    view = session(at).view(DecodingView)
    assert view.generation.run.model == f"local:tiny-{family}" and len(view.generation.new_ids) == 3
    n = len(view.generation.run.ids)
    assert view.uncached_same and f"Step {n} of {n}" in at.success[0].value
    assert any(f"tiny-{family}: 2 layers, 4 query heads sharing 2" in m.value for m in at.markdown)
    at.number_input(key="decoding_head").set_value(4).run()
    assert session(at).view(DecodingView).head == 4 and "Step" in at.success[0].value


def test_an_encoder_hands_generation_to_a_causal_model():
    at = opened("local:tiny-bert")
    at.switch_page("pages/decoding.py").run()
    at.radio(key="decoding_source").set_value("generation").run()
    assert not at.exception
    assert "Generates with tiny-bert" not in said(at) and "Generates with" in said(at)


@pytest.mark.parametrize(("family", "head"), [("gpt2", "3"), ("gpt2", "0"), ("qwen3", "0")])
def test_the_exported_script_of_a_model_on_disk_runs_where_its_folder_is(shelf, tmp_path, family, head):
    at = opened(f"local:tiny-{family}", layer="2", head=head)
    script = session(at).origin.script(session(at).case)
    assert script == real_script(f"local:tiny-{family}", "The cat sat on the mat because it was tired", 2, head,
                                 where=f"tiny-{family}")  # fmt: skip
    assert f"MODEL = 'tiny-{family}'  # set this" in script
    path = tmp_path / "head.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env, cwd=shelf)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip().splitlines()[-1].rsplit(" ", 1)[1]) <= 1e-4


def test_a_gguf_file_is_offered_picked_checked_and_its_script_reads_it(shelf, tmp_path):
    at = opened("local:tiny-bert")
    assert any(
        o.startswith("tiny-llama.Q8_0.gguf · llama · 2 layers × 4 heads")
        for o in at.selectbox(key="real_model").options
    )
    at.selectbox(key="real_model").set_value("local:tiny-llama.Q8_0.gguf").run()
    assert_checked(at, "local:tiny-llama.Q8_0.gguf")
    script = session(at).origin.script(session(at).case)
    assert "MODEL = 'tiny-llama.Q8_0.gguf'  # set this" in script
    path = tmp_path / "head.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env, cwd=shelf)
    assert done.returncode == 0, done.stderr


def test_every_family_on_disk_walks_every_head_of_a_layer_checked():
    for family in TINY:
        model = models.loaded(f"local:tiny-{family}")
        run = model.run("The cat sat on the mat")
        for head in range(model.spec.heads):
            case = models.head_case(model, run, 1, head)
            torch.testing.assert_close(attend(case).outputs, run.head_output(1, head), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", TINY)
def test_the_whole_model_page_draws_every_head_of_a_model_on_disk_and_a_causal_one_switches_heads_off(family):
    """Issue 31 for any model the app opens: the whole-model page of a tiny model of each family, and for a causal
    one a head switched off and a layer ranked."""
    at = opened("local:tiny-bert")
    at.selectbox(key="real_model").set_value(f"local:tiny-{family}").run()
    at.switch_page("pages/whole.py").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    charts = at.get("plotly_chart")
    assert charts, "the grid of every head"
    spec = models.spec(f"local:tiny-{family}")
    assert f"{spec.layers} layers × {spec.heads} heads = {spec.layers * spec.heads} maps" in said(at)
    if spec.causal:
        at.button(key="whole_run_again").click().run()
        assert not at.exception, at.exception
        assert any("with these heads off" in m.label for m in at.metric)
        at.button(key="whole_rank").click().run()
        assert not at.exception, at.exception
        ranked = next(d.value for d in at.dataframe if len(d.value) == spec.heads)
        assert len(ranked) == spec.heads


def test_a_model_whose_files_are_removed_while_shown_leaves_its_numbers_and_says_so(shelf, tmp_path, monkeypatch):
    """An operator removes a model's folder while a session shows one of its heads: the next run says so, and the
    head's numbers stay the session's case, no longer tied to the model (whose spec and weights are gone)."""
    from attention.app.origins import make

    shutil.copytree(shelf / "tiny-gpt2", tmp_path / "shelf" / "tiny-gpt2")
    monkeypatch.setenv("ATTENTION_MODELS", str(tmp_path / "shelf"))
    models._offers.cache_clear()
    at = opened("local:tiny-gpt2")
    s = session(at)
    case = s.case
    assert isinstance(s.source, ModelHead)
    make.forget_gone_model(s)  # still offered: nothing happens
    assert isinstance(s.source, ModelHead) and not s.notices
    shutil.rmtree(tmp_path / "shelf" / "tiny-gpt2")
    models._offers.cache_clear()  # (the server looks again after models.RESCAN seconds)
    make.forget_gone_model(s)
    assert not isinstance(s.source, ModelHead) and s.source.case is case and s.case is case
    assert "tiny-gpt2 is no longer offered here" in str(s.notices[-1])
