"""Encoder-decoders through the app (AppTest), on the tiny random BART and T5 of tests/test_encoder_decoder.py with
ATTENTION_MODELS pointing at them: the picker makes a head of any of the three attentions from a source and a target
sentence (the model's own translation by default), checked against the model and against transformers; a link
carries the part and the target; a bad target is a message; the Whole model page shows the three attentions apart;
the translation's alignment rows are transformers' cross-attentions; the exported script runs."""

import html
import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import models
from attention.app.origins import ModelHead
from attention.base.tolerance import within
from attention.models.script import real_script
from attention.models.seq2seq import pair_run
from attention.whole import compute, figures
from tests.apptest import charts, current_trace, session
from tests.test_encoder_decoder import SOURCE, TARGET, make, seen
from tests.test_families import carried, chain_terms, weights_tolerance
from tests.test_own_models import offering, opened, said

FAMILIES = ("bart", "t5")  # BART: a decoder of 3 layers over an encoder of 2; T5: its relative bias, 2 and 2
NEW_TOKENS = 16  # what the app translates (generate.MAX_NEW_TOKENS)


@pytest.fixture(scope="module")
def shelf(tmp_path_factory):
    """An operator's folder of a tiny BART and a tiny T5, and transformers' own of each."""
    root = tmp_path_factory.mktemp("shelf")
    return root, {family: make(family, root / f"tiny-{family}") for family in FAMILIES}


@pytest.fixture(autouse=True)
def offered_here(shelf, tmp_path, monkeypatch):
    """The app offers the shelf alone, nothing loaded yet."""
    yield from offering(shelf[0], tmp_path, monkeypatch)
    models._offers.cache_clear()


def param(at: AppTest, name: str) -> str | None:
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


def test_the_picker_makes_a_cross_attention_head_of_a_source_and_a_target_checked_against_the_model(shelf):
    at = opened("local:tiny-bart")
    head = session(at).origin  # an encoder-decoder opens on its cross-attention, over its own translation
    assert isinstance(head, ModelHead) and (head.choice.part, head.choice.target) == ("cross", None)
    assert at.radio(key="real_part").value == "cross" and at.text_input(key="real_target").value
    assert at.text_input(key="real_target").value == head.pair.target.sentence and session(at).case.cross
    at.text_input(key="real_text").set_value(SOURCE).run()
    at.text_input(key="real_target").set_value(TARGET).run()
    at.number_input(key="real_layer").set_value(3).run()  # the decoder's third layer: the encoder has two
    at.number_input(key="real_head").set_value(2).run()
    s, trace = session(at), current_trace(at)
    pair = s.origin.pair
    assert (s.origin.choice.sentence, s.origin.choice.target, s.origin.choice.layer) == (SOURCE, TARGET, 3)
    assert s.case.tokens == pair.target.tokens and s.case.key_tokens == pair.source.tokens
    assert s.origin.check(trace).agrees and "Agrees with the model's own output of tiny-bart, cross-attention" in said(
        at)  # fmt: skip
    _, out = seen(shelf[1]["bart"], pair.source.ids, pair.target.ids)
    theirs = out.cross_attentions[2][0, 1]  # (n_target, n_source): which source token each target token reads
    assert within(trace["weights"], theirs, weights_tolerance(s.case, trace))
    assert not within(trace["weights"], out.cross_attentions[2][0, 0], weights_tolerance(s.case, trace))
    other = replace(s.origin, choice=replace(s.origin.choice, head=1))  # another head's own output: refused
    assert not other.check(trace).agrees
    at.radio(key="real_part").set_value("decoder").run()
    assert session(at).case.options.mask == "causal" and not session(at).case.cross
    assert session(at).origin.choice.layer == 3 and session(at).origin.check(current_trace(at)).agrees
    at.radio(key="real_part").set_value("encoder").run()  # two layers: the third is its last
    assert session(at).origin.choice.layer == 2 and session(at).case.tokens == pair.source.tokens
    assert session(at).origin.check(current_trace(at)).agrees and at.number_input(key="real_layer").max == 2


def test_a_link_carries_the_part_and_the_target_and_a_bad_one_is_said():
    at = opened("local:tiny-t5", text=SOURCE, target_text=TARGET, part="decoder", layer="2", head="3")
    choice = session(at).origin.choice
    assert (choice.part, choice.target, choice.layer, choice.head) == ("decoder", TARGET, 2, 3)
    assert session(at).case.options.relative_bias is not None  # T5's bias travels with its decoder's head
    assert (param(at, "part"), param(at, "target_text")) == ("decoder", TARGET)
    again = opened("local:tiny-t5", **{k: param(at, k) for k in ("text", "target_text", "part", "layer", "head")})
    assert session(again).case == session(at).case
    at.button(key="real_translate").click().run()  # back to the model's own translation: greedy, not in the link
    assert session(at).origin.choice.target is None and param(at, "target_text") is None and param(at, "part")
    bad = opened("local:tiny-bart", part="sideways", target_text=" ".join(["cat"] * 70), layer="3")
    assert "part: 'sideways' is not one of this control's values" in said(bad)
    assert "This link's target sentence is 72 tokens, more than the limit of 63" in said(bad)
    assert session(bad).origin.choice == replace(session(bad).origin.choice, part="cross", target=None, layer=3)
    bounds = opened("local:tiny-bart", part="encoder", layer="3")  # the part's own layers bound a link
    assert "layer '3' is not a number from 1 to 2" in said(bounds) and session(bounds).origin.choice.layer == 1


@pytest.mark.parametrize(
    ("typed", "problem"), [("", "target sentence: is empty"), (" ".join(["cat"] * 70), "target sentence: is 72 tokens")]
)
def test_a_target_sentence_the_model_cannot_take_is_a_message_and_the_case_stays(typed, problem):
    at = opened("local:tiny-bart", text=SOURCE, target_text=TARGET)
    shown = session(at).case
    at.text_input(key="real_target").set_value(typed).run()
    assert not at.exception and problem in said(at)
    assert session(at).case is shown and at.text_input(key="real_target").value == typed  # kept as typed


def grids(at: AppTest) -> list[dict]:
    """The Whole model page's grids (an image under an overlay of a cell a head), in the order drawn."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [s for s in specs if [d["type"] for d in s["data"]] == ["heatmap", "image"]]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_whole_model_page_shows_the_encoder_the_decoder_and_the_cross_attention_apart(shelf, family):
    at = opened(f"local:tiny-{family}", text=SOURCE, target_text=TARGET, part="decoder", layer="1", head="2")
    at.switch_page("pages/whole.py").run()
    assert not at.exception, at.exception
    spec, pair = models.spec(f"local:tiny-{family}"), session(at).origin.pair
    parts = ["Encoder self-attention", "Decoder self-attention", "Cross-attention"]
    assert [h.value for h in at.subheader][:3] == parts
    names = [g["data"][0]["text"] for g in grids(at)]  # a name a head: layers down, heads across
    assert [(len(n), len(n[0])) for n in names] == [(spec.layers, 4), (spec.decoder_layers, 4),
                                                    (spec.decoder_layers, 4)]  # fmt: skip
    outlined = [bool(g["layout"].get("shapes")) for g in grids(at)]
    assert outlined == [False, True, False]  # the decoder's head shown, in its own grid alone
    n, m = len(pair.source.ids), len(pair.target.ids)
    assert f"{spec.decoder_layers} layers × 4 heads, each map {m} × {n}: target tokens down" in said(at)
    (cross,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if "cross-attention, layer 1" in
                json.dumps(json.loads(c.proto.spec)["layout"].get("title"))]  # fmt: skip
    assert cross["data"][0]["x"] == [html.escape(t, quote=False) for t in pair.source.tokens]
    assert cross["data"][0]["y"] == [html.escape(t, quote=False) for t in pair.target.tokens]
    assert "which is not built yet" in said(at)  # switching off, ranking, patching: said, not drawn
    assert not at.get("metric") and "whole_run_again" not in [b.key for b in at.button]
    found = compute.parts(models.loaded(spec.name), pair)  # each part's weights: transformers'
    _, out = seen(shelf[1][family], pair.source.ids, pair.target.ids)
    terms = chain_terms(replace(spec, layers=spec.layers + spec.decoder_layers), n)
    for part, theirs in (("encoder", out.encoder_attentions), ("decoder", out.decoder_attentions),
                         ("cross", out.cross_attentions)):  # fmt: skip
        assert within(found[part].weights, torch.cat(theirs), carried(torch.ones(1), terms)), part
    assert found["cross"].kinds is None and found["decoder"].causal and found["encoder"].kinds is not None


def test_a_cross_attention_grid_puts_each_heads_target_by_source_map_in_its_tile_and_a_click_back_on_it():
    layers, heads, m, n = 2, 3, 4, 7
    weights = torch.tensor([[10 * layer + h for h in range(heads)] for layer in range(layers)], dtype=torch.float32)
    whole = compute.Whole(weights[..., None, None].expand(layers, heads, m, n) / 100, None, causal=False)
    ordered = compute.order(whole, "head")
    image = figures.grid(whole, ordered)
    assert image.shape == (layers * (figures.strip(m) + m + figures.GAP) - figures.GAP, heads * (n + 1) - 1)
    for layer in range(layers):
        for column in range(heads):
            row, col = figures.origin(m, layer, column, n)
            assert np.allclose(image[row : row + m, col : col + n], (10 * layer + column) / 100)
            assert figures.head_at(ordered, (layer, column)) == (layer, column)
    assert np.isnan(image[:, n]).all()  # the gap between two tiles
    assert "each 4 target tokens × 7 source tokens" in figures.summary(whole)


def test_the_translation_shows_each_new_tokens_cross_attention_rows_as_transformers_does(shelf):
    at = opened("local:tiny-bart", text=SOURCE)
    model, ids = models.loaded("local:tiny-bart"), session(at).origin.pair.source.ids
    with torch.inference_mode():
        made = shelf[1]["bart"].generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1,
                                         forced_eos_token_id=None, output_attentions=True,
                                         return_dict_in_generate=True)  # fmt: skip
    # (decoder layers, heads, new tokens, n_src): each step's row of the token before the one it chose
    theirs = torch.stack([torch.stack([layer[0, :, -1] for layer in step]) for step in made.cross_attentions], dim=2)
    terms = chain_terms(replace(model.spec, layers=model.spec.layers + model.spec.decoder_layers), len(ids))
    allowed = carried(torch.ones(1), terms)
    shown = charts(at)["alignment, layer 1, head 1"]  # the cross-attention head shown, to start with
    assert within(torch.tensor(shown), theirs[0, 0], allowed) and not within(torch.tensor(shown), theirs[0, 1], allowed)
    alignment = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                     if json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("alignment"))  # fmt: skip
    new = model.labels(made.sequences[0].tolist())[1:]  # target tokens down, as generated (after the start token)
    assert alignment["data"][0]["y"] == [html.escape(t, quote=False) for t in new]
    assert session(at).origin.pair.target.sentence == model.tokenizer.decode(made.sequences[0, 1:].tolist())
    at.number_input(key="align_layer").set_value(3).run()
    at.number_input(key="align_head").set_value(0).run()
    assert within(torch.tensor(charts(at)["alignment, layer 3, mean of the heads"]), theirs[2].mean(0), allowed)
    at.button(key="align_open").click().run()  # that layer's cross-attention heads on the translation, opened
    choice = session(at).origin.choice
    assert (choice.part, choice.target, choice.layer, choice.head) == ("cross", None, 3, 0)
    assert session(at).case.options.heads == 4 and session(at).case.n_kv == len(ids)


@pytest.mark.parametrize(("part", "target"), [("cross", None), ("decoder", TARGET), ("encoder", TARGET)])
def test_the_exported_script_of_an_encoder_decoders_head_runs_at_home(shelf, monkeypatch, capsys, part, target):
    monkeypatch.chdir(shelf[0])  # where the person keeps the model's folder
    script = real_script("local:tiny-t5", SOURCE, 2, 0 if part == "cross" else 3, where="tiny-t5", part=part,
                         target_text=target)  # fmt: skip
    exec(compile(script, "exported.py", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    assert "largest difference from the model:" in printed
    pair = pair_run(models.open("tiny-t5"), SOURCE, TARGET)
    keys = pair.source.tokens if part != "decoder" else pair.target.tokens
    assert f"key tokens: {keys!r}" in printed or target is None
