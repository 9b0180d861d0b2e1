"""The whole model (attention/whole/): heads switched off, made their mean or patched from another sentence, against
transformers with the same heads changed through a hook on its attention output projection; the grid of every
head's map and its order by kind on constructed weights whose kind is known."""

import json

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import models
from attention.base.tolerance import within
from attention.models import sources
from attention.models.kinds import KINDS, Kind
from attention.models.model import Pass
from attention.whole import compute, figures
from attention.whole.state import Looking
from tests.apptest import APP, session
from tests.test_families import FAMILIES, SENTENCE, carried, chain_terms, make, tokenizers, vocabulary  # noqa: F401
from tests.test_models import hf_smol  # noqa: F401

transformers = pytest.importorskip("transformers")
CAUSAL = ("llama", "gpt2")  # the two ways heads reach the output projection: o_proj (Llama) and c_proj (GPT-2)
needs_models = pytest.mark.skipif(
    models.missing("smollm2") or models.missing("minilm"), reason="the shipped models' tokenizers (model packages)"
)


@pytest.fixture(scope="module", params=CAUSAL)
def pair(request, tokenizers, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp(request.param)
    hf = make(request.param, folder, tokenizers[FAMILIES[request.param][3]])
    return sources.open_model(folder), hf


def their_logits(hf, ids: list[int], heads: set[tuple[int, int]], how: str, source=None) -> torch.Tensor:
    """transformers' last logits with the heads' slices of the output projection's input changed by a pre-hook."""
    body = getattr(hf, "model", None) or getattr(hf, "transformer", None)
    blocks = getattr(body, "layers", None) or getattr(body, "h", None)
    projection = "self_attn.o_proj" if hasattr(blocks[0], "self_attn") else "attn.c_proj"
    d = hf.config.hidden_size // hf.config.num_attention_heads
    hooks = []
    for layer, block in enumerate(blocks):
        picked = [h for at, h in heads if at == layer]

        def hook(module, args, picked=picked, layer=layer):
            x = args[0].clone()  # (1, n, heads · d): the heads side by side
            for h in picked:
                part = x[..., h * d : (h + 1) * d]
                if how == "zero":
                    x[..., h * d : (h + 1) * d] = 0
                elif how == "mean":
                    x[..., h * d : (h + 1) * d] = part.mean(1, keepdim=True)
                else:
                    x[..., h * d : (h + 1) * d] = source[layer][..., h * d : (h + 1) * d]
            return (x, *args[1:])

        hooks.append(block.get_submodule(projection).register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            return hf(torch.tensor([ids])).logits[0, -1]
    finally:
        for hook in hooks:
            hook.remove()


def their_heads(hf, ids: list[int]) -> dict[int, torch.Tensor]:
    """transformers' heads side by side at each layer's output projection (1, n, heads · d)."""
    body = getattr(hf, "model", None) or getattr(hf, "transformer", None)
    blocks = getattr(body, "layers", None) or getattr(body, "h", None)
    projection = "self_attn.o_proj" if hasattr(blocks[0], "self_attn") else "attn.c_proj"
    caught, hooks = {}, []
    for layer, block in enumerate(blocks):
        hooks.append(block.get_submodule(projection).register_forward_pre_hook(
            lambda module, args, layer=layer: caught.__setitem__(layer, args[0].clone())))  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for hook in hooks:
            hook.remove()
    return caught


@needs_models
@pytest.mark.parametrize("how", compute.HOWS)
@pytest.mark.parametrize("heads", [{(0, 1)}, {(1, 0), (1, 1), (1, 2), (1, 3)}, {(0, 3), (1, 2)}])
def test_heads_switched_off_give_transformers_logits(pair, heads, how):
    """One head, a whole layer, a hand-picked set; zeroed or made their mean: the same logits as transformers'."""
    model, hf = pair
    ids, _ = model.tokenize(SENTENCE)
    own = compute.predict(model, ids, compute.Switch(frozenset(heads), how))
    theirs = their_logits(hf, ids, heads, how)
    plain = compute.predict(model, ids)
    tolerance = carried(theirs, chain_terms(model.spec, len(ids)))
    assert within(own.logits, theirs, tolerance)
    assert not within(plain.logits, theirs, tolerance)  # the switch moved the logits: the check could fail


@needs_models
def test_a_head_patched_from_another_sentence_gives_transformers_logits(pair):
    model, hf = pair
    clean, _ = model.tokenize("The capital of France is")
    corrupt, _ = model.tokenize("The capital of Italy is")
    assert len(clean) == len(corrupt)
    with torch.inference_mode():
        source = model.spec.family.forward(model, torch.tensor(clean)).head_outputs
    own = compute.predict(model, corrupt, compute.Switch(frozenset({(1, 2)}), "patch", source))
    theirs = their_logits(hf, corrupt, {(1, 2)}, "patch", their_heads(hf, clean))
    assert within(own.logits, theirs, carried(theirs, chain_terms(model.spec, len(corrupt))))


@needs_models
def test_patching_a_layer_gives_each_head_its_part_and_a_sentence_patched_from_itself_nothing(pair):
    """Each head patched alone carries a finite part; a sentence patched from itself is the same pass (0 carried)."""
    model, _ = pair
    clean, _ = model.tokenize("The capital of France is")
    corrupt, _ = model.tokenize("The capital of Italy is")
    result = compute.patch(model, clean, corrupt, model.spec.layers - 1)
    assert len(result.heads) == model.spec.heads
    parts = [result.carried(p) for p in result.heads]
    assert all(np.isfinite(parts))
    same = compute.patch(model, corrupt, corrupt, 0)
    assert all(abs(p.difference - same.corrupt_difference) < 1e-4 for p in same.heads)


@needs_models
def test_ranking_a_layer_orders_heads_by_the_top_tokens_move(pair):
    model, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    ranked = compute.rank(model, ids, 0)
    moves = [abs(a.change) for _, a in ranked]
    assert sorted(h for h, _ in ranked) == list(range(model.spec.heads))
    assert moves == sorted(moves, reverse=True)
    head, most = ranked[0]
    again = compute.ablate(model, ids, frozenset({(0, head)}))
    assert again.change == pytest.approx(most.change)


def kind(name: str, share: float) -> Kind:
    return Kind(first=share if name == "first" else 0.1, previous=share if name == "previous" else 0.1,
                itself=0.1, broad=0.5, name=name)  # fmt: skip


def test_order_by_kind_groups_heads_and_puts_the_strongest_first():
    weights = torch.zeros(2, 4, 3, 3)
    found = ((kind("mixed", 0.3), kind("first", 0.6), kind("previous", 0.9), kind("first", 0.8)),
             (kind("first", 0.7),) * 4)  # fmt: skip
    whole = compute.Whole(weights, found, causal=True)
    assert compute.order(whole, "head") == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert compute.order(whole, "kind") == [[3, 1, 2, 0], [0, 1, 2, 3]]


def test_the_grid_puts_each_head_in_its_tile_and_a_click_back_on_its_head():
    """Constructed weights: head (l, h) all (10 l + h) / 100; its tile holds it, the gaps are empty, a click on the
    overlay's cell opens the head drawn there, and a causal mask's keys are empty."""
    layers, heads, n = 3, 4, 5
    weights = torch.tensor([[[[at * 10 + h] * n] * n for h in range(heads)] for at in range(layers)]) / 100
    ordered = [[3, 2, 1, 0], [0, 1, 2, 3], [1, 0, 3, 2]]
    grid = figures.grid(compute.Whole(weights, None, causal=False), ordered)
    for layer in range(layers):
        for column in range(heads):
            row, col = figures.origin(n, layer, column)
            assert np.allclose(grid[row : row + n, col : col + n], (layer * 10 + ordered[layer][column]) / 100)
            assert figures.head_at(ordered, (layer, column)) == (layer, ordered[layer][column])
            assert np.isnan(grid[row - 1, col])  # the strip above
            assert column == heads - 1 or np.isnan(grid[row, col + n])  # the gap beside
    assert figures.head_at(ordered, (layers, 0)) is None
    causal = figures.grid(compute.Whole(weights, None, causal=True), ordered)
    row, col = figures.origin(n, 0, 0)
    assert np.isnan(causal[row, col + 1]) and not np.isnan(causal[row + 1, col + 1])  # key 2 unseen by query 1


def test_the_strips_carry_each_heads_kind_and_the_text_version_every_head():
    layers, heads, n = 2, 3, 6
    found = tuple((kind("first", 0.9), kind("previous", 0.8), kind("mixed", 0.3)) for _ in range(layers))
    whole = compute.Whole(torch.full((layers, heads, n, n), 1 / n), found, causal=False)
    ordered = compute.order(whole, "kind")
    image = figures.indices(whole, ordered)
    for layer in range(layers):
        for column, head in enumerate(ordered[layer]):
            row, col = figures.origin(n, layer, column)
            want = figures.SHADES + KINDS.index(found[layer][head].name)
            assert (image[row - figures.strip(n) : row, col : col + n] == want).all()
    table = figures.table(whole, "en")
    assert len(table) == layers * heads and list(table.iloc[1][["Layer", "Head"]]) == [1, 2]
    assert "first token: 2" in figures.summary(whole, "en") and "previous token: 2" in figures.summary(whole, "en")


class Fixed:
    """A stand-in model whose one head puts weight `sink` on whichever token comes first, the rest on the previous."""

    class spec:
        heads, layers = 1, 1

        class family:
            @staticmethod
            def forward(model, ids, edit=None):
                n = len(ids)
                w = torch.zeros(n, n)
                w[0, 0] = 1
                for i in range(1, n):
                    w[i, 0] += Fixed.sink
                    w[i, i - 1] += 1 - Fixed.sink
                return Pass(None, None, w[None, None], None)

    sink = 0.7
    device = "cpu"


def test_without_its_first_token_the_weight_moves_to_the_new_first():
    """A head that parks 0.7 on whatever token is first: typed, removed and replaced each show 0.7 there, and the
    rest on the previous token (row 2's previous is the first: 0.3 more there, over n − 1 rows)."""
    ids = (5, 6, 7, 8, 9)
    found = compute.first_token(Fixed, ids, 0, 0, other=42)
    assert [v.name for v in found] == ["typed", "removed", "replaced"]
    assert [v.ids[0] for v in found] == [5, 6, 42]
    for v in found:
        rows = len(v.ids) - 1
        assert v.first == pytest.approx(0.7 + 0.3 / rows)
        assert v.most_other == (1, pytest.approx(0.3 / rows))
    assert len(compute.first_token(Fixed, (5, 6), 0, 0, other=42)) == 2  # no sentence of one token


# SmolLM2 (the shipped model): against transformers, and the page through AppTest

needs_smollm2 = pytest.mark.skipif(models.missing("smollm2"), reason="the SmolLM2 package")


@needs_smollm2
def test_smollm2_heads_switched_off_give_transformers_logits(hf_smol):  # noqa: F811
    smol = models.loaded("smollm2")
    hf, _ = hf_smol
    ids, _ = smol.tokenize("The capital of France is")
    heads = {(18, 3), (20, 0), (20, 1), (20, 2), (20, 3), (20, 4), (20, 5), (20, 6), (20, 7), (20, 8)}
    for how in compute.HOWS:
        own = compute.predict(smol, ids, compute.Switch(frozenset(heads), how))
        theirs = their_logits(hf, ids, heads, how)
        assert within(own.logits, theirs, carried(theirs, chain_terms(smol.spec, len(ids)))), how
    assert smol.tokenizer.decode([compute.predict(smol, ids).first]) == " Paris"


@pytest.fixture
def page() -> AppTest:
    """The whole-model page on SmolLM2's default head (a link: model, layer and head)."""
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"model": "smollm2", "text": "The capital of France is", "layer": "18", "head": "4"})
    app.run()
    app.switch_page("pages/whole.py").run()
    assert not app.exception, app.exception
    return app


def whole_chart(app: AppTest) -> dict:
    (spec,) = [c for c in map(lambda c: json.loads(c.proto.spec), app.get("plotly_chart"))
               if [d["type"] for d in c["data"]] == ["heatmap", "image"]]  # fmt: skip
    return spec


def test_without_a_model_the_page_says_how_and_its_button_opens_one(at):
    at.switch_page("pages/whole.py").run()
    assert "real model" in at.info[0].value.lower() and not at.get("plotly_chart")
    if models.missing("smollm2"):
        return
    at.button(key="whole_open_model").click().run()
    assert not at.exception and session(at).case.options.mask == "causal"
    assert len(whole_chart(at)["data"]) == 2


@needs_smollm2
def test_the_page_draws_every_head_names_each_and_keeps_its_sort_in_the_link(page):
    spec = whole_chart(page)
    overlay, image = spec["data"]
    assert image["type"] == "image" and image["source"].startswith("data:image/png;base64,")
    assert len(overlay["text"]) == 30 and len(overlay["text"][0]) == 9
    assert overlay["text"][17][3].startswith("layer 18, head 4 · ")  # the open head, named with its kind
    (frame,) = spec["layout"]["shapes"]  # and outlined
    assert frame["x0"] == 2.5 and frame["y0"] == 16.5
    assert page.query_params.get("sort") is None
    page.radio(key="whole_sort_en").set_value("grouped by kind").run()
    assert page.query_params["sort"] == ["kind"] or page.query_params["sort"] == "kind"
    grouped = whole_chart(page)["data"][0]["text"]
    assert sorted(grouped[17]) == sorted(overlay["text"][17]) and grouped != overlay["text"]
    version = page.expander(key="whole_text") if hasattr(page, "expander") else None
    assert version is not None


@needs_smollm2
def test_switching_off_ranking_and_patching_on_the_page_are_computes(page):
    smol = models.loaded("smollm2")
    ids, _ = smol.tokenize("The capital of France is")
    assert not page.metric  # run on demand
    page.button(key="whole_run_again").click().run()
    (metric,) = page.metric
    want = compute.ablate(smol, ids, frozenset({(17, 3)}))
    assert "Paris" in metric.label and metric.value == f"{want.after.probabilities[want.before.first].item():.1%}"
    page.button(key="whole_switch_layer").click().run()
    assert session(page).view(Looking).switched == tuple((18, h) for h in range(1, 10))
    page.button(key="whole_rank").click().run()
    ranked = compute.rank(smol, ids, 17)
    table = _frame(page, "Change")
    assert list(table.iloc[:, 0]) == [f"layer 18, head {h + 1}" for h, _ in ranked]
    page.button(key="whole_patch").click().run()
    table = _frame(page, "Part of the difference carried")
    result = compute.patch(smol, ids, smol.tokenize("The capital of Italy is")[0], 17)
    assert [smol.tokenizer.decode([i]) for i in result.tokens] == [" Paris", " Rome"]
    assert np.allclose(table.iloc[:, 2], [result.carried(p) for p in result.heads])


def _frame(app: AppTest, column: str):
    """The table the page drew with this column."""
    for frame in app.dataframe:
        if column in frame.value.columns:
            return frame.value
    raise AssertionError(f"no table with {column}")


@needs_smollm2
def test_a_layer_opens_as_one_multi_head_case_on_the_weights_step(page):
    page.number_input(key="whole_open_layer_at").set_value(3).run()
    page.button(key="whole_open_layer").click().run()
    s = session(page)
    assert s.case.options.heads == 9 and s.source.choice.layer == 3 and s.step == "softmax"


@needs_smollm2
@pytest.mark.parametrize(
    ("ask", "sort", "ranked"), [("first", "kind", False), ("rank", "head", True), ("why_first", "head", False)]
)
def test_a_question_of_the_overview_opens_the_page_set_up_to_answer_it(ask, sort, ranked):
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"model": "smollm2", "layer": "18", "head": "4"})
    app.run()
    links = {e.proto.query_string: e.proto.page for e in app.get("page_link") if "ask=" in e.proto.query_string}
    assert links[f"ask={ask}"].endswith("whole") or "whole" in links[f"ask={ask}"]
    app.query_params["ask"] = ask
    app.switch_page("pages/whole.py").run()
    view = session(app).view(Looking)
    assert view.sort == sort and (view.ranked_layer == 18) == ranked
    assert ("Weight on the first token" in str([f.value.columns for f in app.dataframe])) == (ask == "why_first")
    assert "ask" not in app.query_params  # answered once


@needs_models
def test_every_heads_weights_from_the_recorded_inputs_are_the_forward_passes(pair):
    """The view's weights, from each layer's recorded input (no MLP run again), equal the forward pass's own."""
    model, _ = pair
    run = model.run(SENTENCE)
    with torch.inference_mode():
        theirs = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    ours = compute.weights(model, run)
    assert ours.shape == theirs.shape
    assert within(ours, theirs, carried(torch.ones(1), chain_terms(model.spec, len(run.ids))))


@pytest.mark.skipif(models.missing("minilm"), reason="the MiniLM package")
def test_an_encoder_draws_its_heads_takes_its_cls_away_and_switches_nothing_off():
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"model": "minilm", "layer": "2", "head": "3"})
    app.run()
    app.switch_page("pages/whole.py").run()
    assert not app.exception, app.exception
    overlay = whole_chart(app)["data"][0]
    assert len(overlay["text"]) == 6 and len(overlay["text"][0]) == 12
    assert "encoder" in " ".join(i.value for i in app.info) and not app.get("multiselect")
    app.button(key="whole_first_run").click().run()
    table = _frame(app, "First token")
    assert list(table.iloc[:, 1]) == ["[CLS]", "the", "a"]  # typed, removed (its next token first), replaced


def test_a_links_sort_opens_the_view_and_a_bad_one_is_refused_with_why():
    from attention.whole import state

    assert state.open_link({}) == (None, None)
    view, notice = state.open_link({"sort": "kind"})
    assert view.sort == "kind" and notice is None and state.link(view) == {"sort": "kind"}
    assert state.link(state.Looking()) == {"sort": None}  # the model's order: nothing in the link
    view, notice = state.open_link({"sort": "<b>"})
    assert view is None and notice.key == "whole.bad_sort"
    kept = state.Looking()
    kept.choose(sort="nonsense", how="mean")
    assert kept.sort == "head" and kept.how == "mean"


@needs_models
@pytest.mark.parametrize("family", ["bert", "qwen2", "qwen3"])  # biases; q/k norm
def test_every_heads_weights_of_other_families_are_the_forward_passes(family, tokenizers, tmp_path):  # noqa: F811
    make(family, tmp_path, tokenizers[FAMILIES[family][3]])
    model = sources.open_model(tmp_path)
    run = model.run(SENTENCE)
    with torch.inference_mode():
        theirs = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    assert within(compute.weights(model, run), theirs, carried(torch.ones(1), chain_terms(model.spec, len(run.ids))))


@needs_smollm2
def test_a_one_token_sentence_says_why_nothing_is_parked_instead_of_failing():
    app = AppTest.from_file(APP, default_timeout=120)
    app.query_params.update({"model": "smollm2", "text": "Hello", "layer": "18", "head": "4", "ask": "why_first"})
    app.run()
    app.switch_page("pages/whole.py").run()
    assert not app.exception, app.exception
    assert len(session(app).source.run.ids) == 1
    assert any("The sentence is one token" in c.value for c in app.caption)


@needs_models
def test_the_first_token_put_in_place_comes_after_the_token_every_sentence_begins_with():
    """MiniLM begins every sentence with [CLS]: a typed word's first piece is what replaces the sentence's first
    token; SmolLM2 begins with none: the word's first token itself."""
    bert, smol = models.loaded("minilm"), models.loaded("smollm2")
    assert compute.first_of(bert, "A") == bert.tokenizer.token_to_id("a")
    assert compute.first_of(smol, "A cat") == smol.tokenize("A cat")[0][0]


def test_a_view_of_another_model_forgets_its_layers_and_heads_and_keeps_its_sort():
    view = Looking(sort="kind", switched=((20, 3),), ranked_layer=20, patched_layer=18, ablating=True)
    assert not view.of("smollm2") and view.ranked_layer == 20  # a fresh view: a link's question set it up
    assert view.of("minilm") and view.switched == () and view.ranked_layer is None and not view.ablating
    assert not view.of("minilm")
    assert view.of("smollm2")
    view.switched, view.ranked_layer = ((2, 1),), 2
    assert not view.of("smollm2") and view.ranked_layer == 2  # the same model: kept
    assert view.of("local:tiny-llama") and view.ranked_layer is None and view.sort == "kind"
