"""Gemma 2 and Gemma 3's text model against transformers (the oracle): random tiny models with a sliding window of 3
(Gemma 2's on its odd layers, Gemma 3's on all but its global layer), Gemma 2's scale and softcaps, Gemma 3's q/k
norms and two RoPEs, made here with transformers and opened through the app's own loader; every head's case, the
forward pass, the logits and the greedy tokens with and without the cache; the picker's line."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from attention import attend, models
from attention.base.i18n import render
from attention.base.tolerance import within
from attention.forward.compute import tolerance
from attention.models import sources
from attention.models.gemma import _windows
from tests.test_families import (  # noqa: F401 (vocabulary and tokenizers: the fixtures the tokenizers come from)
    NEEDS_TOKENIZERS,
    SENTENCE,
    SMALL,
    carried,
    chain_terms,
    forward_is_transformers,
    greedy_is_transformers,
    randomized,
    seen,
    tokenizers,
    vocabulary,
    weights_tolerance,
)

transformers = pytest.importorskip("transformers")
pytestmark = NEEDS_TOKENIZERS
WINDOW = 3  # the sentence has 11 tokens: most queries see fewer keys than causal attention would let them
# 4 layers, head_dim 8, grouped-query attention; a query_pre_attn_scalar that is not head_dim (the scale matters);
# tokens 1 and 2 the vocabulary's own (Gemma's defaults are 2 and 1)
GEMMA = {**SMALL, "num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 8, "query_pre_attn_scalar": 5,
         "sliding_window": WINDOW, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}  # fmt: skip
GEMMA3_ROPE = {"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 100.0},
               "sliding_attention": {"rope_type": "default", "rope_theta": 10.0}}  # fmt: skip
# name: (transformers' classes, config, the picker's line in English)
FAMILIES = {
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {**GEMMA, "attn_logit_softcapping": 5.0,
               "final_logit_softcapping": 3.0}, "gemma2 · sliding 3 on odd layers · softcap 5"),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", {**GEMMA, "rope_parameters": GEMMA3_ROPE,
                    "layer_types": ["sliding_attention"] * 3 + ["full_attention"]},
                    "gemma3_text · sliding 3 on every layer but each 4th"),
}  # fmt: skip
# what each family's attention has beyond Llama's, and the spec without it: each must change the logits
WITHOUT = {
    "gemma2": {"windows": None, "softcap": None, "logit_softcap": None, "scale": None},
    "gemma3_text": {"windows": None, "local_rope_base": None, "rope_frequencies": None, "scale": None},
}


def make(family: str, folder: Path, tokenizer: Path) -> torch.nn.Module:
    """A random model of the family with transformers, saved with safetensors and the tokenizer into folder."""
    config_class, model_class, sizes, _ = FAMILIES[family]
    vocab = json.loads(tokenizer.read_text())["model"]["vocab"]
    config = getattr(transformers, config_class)(vocab_size=len(vocab), **sizes)
    model = getattr(transformers, model_class)(config)
    randomized(model, seed=len(family)).save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    return getattr(transformers, model_class).from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tokenizers, tmp_path_factory) -> tuple[models.Model, torch.nn.Module, str]:  # noqa: F811
    """The app's model from its folder, and transformers' own of the same folder."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = make(request.param, folder, tokenizers["byte"])
    return sources.open_model(folder), hf, request.param


def test_the_spec_is_transformers_and_the_picker_says_its_attention(pair):
    model, hf, family = pair
    s, c = model.spec, hf.config
    assert s.model_type == family and s.tied and s.head_dim == 8
    assert (s.windows or (None,) * s.layers) == tuple(layer.self_attn.sliding_window for layer in hf.model.layers)
    assert s.scale == hf.model.layers[0].self_attn.scaling
    assert (s.softcap, s.logit_softcap) == (c.attn_logit_softcapping, c.final_logit_softcapping)
    assert render("en", models.family_line(s)) == FAMILIES[family][3]
    assert "层" in render("zh", models.family_line(s))


def test_the_default_layer_types_are_transformers():
    """Without layer_types in the file: Gemma 2's windows on its odd layers (from 1), Gemma 3's on all but every
    sliding_window_pattern-th, as transformers' configs make them."""
    for kind, extra in (("gemma2", {}), ("gemma3_text", {}), ("gemma3_text", {"sliding_window_pattern": 3})):
        config = {"model_type": kind, "num_hidden_layers": 7, "sliding_window": 5, **extra}
        theirs = getattr(transformers, FAMILIES[kind][0])(**config)
        expected = tuple(5 if t == "sliding_attention" else None for t in theirs.layer_types)
        assert _windows(config) == expected and None in expected


def test_every_head_of_every_layer_through_the_eight_steps_equals_transformers(pair):
    """Each head as a case with the layer's scale, softcap, window, q/k norm and RoPE: its weights as transformers'
    output_attentions, its output as transformers' head and as the model's own, within the one rule."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    assert len(ids) > 2 * WINDOW
    hf_x, hf_heads, out = seen(hf, ids)
    own = model.run(SENTENCE)
    run = replace(own, inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    s, d = model.spec, model.spec.head_dim
    for layer in range(s.layers):
        for head in range(s.heads):
            case = models.head_case(model, run, layer, head)
            o = case.options
            assert (o.window, o.softcap, o.scale) == (s.windows[layer], s.softcap, s.scale)
            assert (o.q_norm is not None) == (s.model_type == "gemma3_text")
            trace = attend(case)
            rule = tolerance(case, trace.__getitem__, projected=True)
            assert within(trace.outputs, hf_heads[layer][:, head * d : (head + 1) * d], rule), (layer, head)
            mine = models.head_case(model, own, layer, head)  # on the model's own inputs: its own head's output
            mine_trace = attend(mine)
            assert within(
                mine_trace.outputs,
                own.head_output(layer, head),
                tolerance(mine, mine_trace.__getitem__, projected=True),
            )
            assert within(trace["weights"], out.attentions[layer][0, head], weights_tolerance(case, trace))


def test_the_forward_pass_equals_transformers_layer_by_layer_and_in_its_logits(pair):
    forward_is_transformers(pair[0], pair[1])


def test_without_each_of_its_parts_the_model_is_not_transformers(pair):
    """Each part of the family's attention matters on this sentence: the same model without it (plain causal
    attention, no cap, 1/√head_dim, one RoPE unscaled) is off transformers' logits by more than the rule."""
    model, hf, family = pair
    ids, _ = model.tokenize(SENTENCE)
    with torch.inference_mode():
        theirs = hf(torch.tensor([ids])).logits[0, -1]
    for part, value in WITHOUT[family].items():
        plain = models.Model(replace(model.spec, **{part: value}), model.weights, model.tokenizer)
        with torch.inference_mode():
            logits = plain.spec.family.forward(plain, torch.tensor(ids)).logits
        assert not within(logits[0], theirs, carried(theirs, chain_terms(model.spec, len(ids)))), part


def test_greedy_tokens_with_and_without_the_cache_are_transformers(pair):
    greedy_is_transformers(pair[0], pair[1])


def test_the_whole_models_weights_are_its_forward_pass(pair):
    """The whole-model view's weights of every head (attention/whole) are the forward pass's: Gemma's scale, softcap,
    windows and local RoPE in them."""
    from attention.whole import compute as whole

    model, _, _ = pair
    run = model.run(SENTENCE)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    assert torch.equal(whole.weights(model, run), own)
