"""Phi-3 and Phi-4-mini against transformers (the oracle): random tiny Phi-3 models made here with transformers, one
plain (RoPE on whole heads, unscaled) and one as Phi-4-mini is made (RoPE on part of each head, LongRoPE's short
factors and attention factor) with a sliding window of 3, opened through the app's own loader; every head's case, the
forward pass, the logits and the greedy tokens with and without the cache, the whole-model view; the picker's line."""

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from attention import attend, models
from attention.base.case import rotary_dims
from attention.base.i18n import render
from attention.base.tolerance import within
from attention.forward.compute import rope_theta, tolerance
from attention.models import sources
from tests.test_families import (  # noqa: F401 (vocabulary and tokenizers: the fixtures the tokenizers come from)
    NEEDS_TOKENIZERS,
    SENTENCE,
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
# head_dim 16, grouped-query attention; tokens 1 and 2 the vocabulary's own (Phi-3's defaults are past it)
PHI3 = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 96, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}  # fmt: skip
# Phi-4-mini's way: RoPE on half of each head (4 pairs), each pair's own short factor; an original length of 64 (the
# app's longest sentence: long_factor never used) of 256, a factor of 4: attention factor √(1 + ln 4 / ln 64)
LONGROPE = {"rope_type": "longrope", "rope_theta": 1e4, "partial_rotary_factor": 0.5,
            "short_factor": [1.0, 1.5, 3.0, 8.0], "long_factor": [2.0, 4.0, 8.0, 16.0]}  # fmt: skip
# name: (config, the picker's line in English)
FAMILIES = {
    "phi3": ({**PHI3, "tie_word_embeddings": True}, "phi3"),
    "phi3-longrope": ({**PHI3, "rope_parameters": LONGROPE, "original_max_position_embeddings": 64,
                       "max_position_embeddings": 256, "sliding_window": WINDOW},
                      "phi3 · RoPE on 50% of each head · sliding 3 on every layer"),
}  # fmt: skip
# what the long-context model's attention has beyond plain RoPE, and the spec without it: each must change the logits
WITHOUT = {"windows": None, "rope_frequencies": None, "rope_attention": 1.0}


def make(family: str, folder: Path, tokenizer: Path) -> torch.nn.Module:
    """A random model of the family with transformers, saved with safetensors and the tokenizer into folder."""
    vocab = json.loads(tokenizer.read_text())["model"]["vocab"]
    config = transformers.Phi3Config(vocab_size=len(vocab), **FAMILIES[family][0])
    model = transformers.Phi3ForCausalLM(config)
    randomized(model, seed=len(family)).save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    return transformers.Phi3ForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tokenizers, tmp_path_factory) -> tuple[models.Model, torch.nn.Module, str]:  # noqa: F811
    """The app's model from its folder, and transformers' own of the same folder."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = make(request.param, folder, tokenizers["byte"])
    return sources.open_model(folder), hf, request.param


def test_the_spec_is_transformers_and_the_picker_says_its_attention(pair):
    """RoPE's turned dims and frequencies as transformers' rotary embedding has them (LongRoPE's short ones), its
    attention factor, the window on every layer."""
    model, hf, family = pair
    s, c = model.spec, hf.config
    assert s.model_type == "phi3" and s.tied == c.tie_word_embeddings and not s.bias
    assert (s.heads, s.kv_heads, s.head_dim) == (4, 2, 16)
    rotary = hf.model.rotary_emb
    theta = rope_theta(s, rotary_dims(s.head_dim, s.rope_fraction))
    torch.testing.assert_close(theta, rotary.inv_freq.double(), rtol=1e-6, atol=0)  # theirs in float32
    assert s.rope_attention == pytest.approx(rotary.attention_scaling, rel=1e-12)
    assert (s.rope_fraction or 1.0) == c.rope_parameters["partial_rotary_factor"]
    assert (s.windows or (None,) * s.layers) == (c.sliding_window,) * s.layers
    assert render("en", models.family_line(s)) == FAMILIES[family][1]
    if family == "phi3-longrope":
        assert s.rope_attention == pytest.approx(math.sqrt(1 + math.log(4) / math.log(64)))
        assert s.rope_scaling == "longrope" and "longrope" in str(models.about(s))
        assert "%" in render("zh", models.family_line(s))


def test_an_older_phi3_config_reads_as_transformers_reads_it():
    """Phi-3's and Phi-4-mini's config.json: rope_scaling of type "longrope", partial_rotary_factor and
    original_max_position_embeddings beside it; as Phi3Config reads them. A long_factor a sentence here could reach,
    another scaling, short factors not one per pair, or another activation is named."""
    config = {"model_type": "phi3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "vocab_size": 100, "rope_theta": 500.0, "partial_rotary_factor": 0.75, "max_position_embeddings": 8192,
              "original_max_position_embeddings": 4096, "sliding_window": 8192,
              "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5],
                               "long_factor": [2.0] * 6}}  # fmt: skip
    theirs = transformers.Phi3Config(**{k: v for k, v in config.items() if k != "model_type"})
    rotary = transformers.models.phi3.modeling_phi3.Phi3RotaryEmbedding(theirs)
    sizes = sources.family_of(config, Path("config.json")).sizes(config)
    assert sizes["rope_fraction"] == theirs.rope_parameters["partial_rotary_factor"] == 0.75
    assert sizes["rope_base"] == theirs.rope_parameters["rope_theta"]
    torch.testing.assert_close(
        torch.tensor(sizes["rope_frequencies"], dtype=torch.float64), rotary.inv_freq.double(), rtol=1e-6, atol=0
    )
    assert sizes["rope_attention"] == pytest.approx(rotary.attention_scaling, rel=1e-12)
    assert sizes["windows"] is None  # a window as long as the model's context leaves no key out
    scaling = config["rope_scaling"]
    for wrong in ({"original_max_position_embeddings": 32}, {"rope_scaling": {"rope_type": "linear", "factor": 2}},
                  {"rope_scaling": {**scaling, "short_factor": [1.0] * 5}}, {"hidden_act": "gelu"}):  # fmt: skip
        with pytest.raises(ValueError):
            sources.family_of(config, Path("config.json")).sizes({**config, **wrong})


def test_every_head_of_every_layer_through_the_eight_steps_equals_transformers(pair):
    """Each head as a case with the layer's window, RoPE on its first dims with LongRoPE's frequencies and factor: its
    weights as transformers' output_attentions, its output as transformers' head and as the model's own, within the
    one rule; every head at once as the model's own too."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    assert len(ids) > 2 * WINDOW
    hf_x, hf_heads, out = seen(hf, ids)
    own = model.run(SENTENCE)
    run = replace(own, inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    s, d = model.spec, model.spec.head_dim
    for layer in range(s.layers):
        whole_layer = models.layer_case(model, own, layer)
        trace = attend(whole_layer)
        heads = own.head_outputs[layer].transpose(0, 1).flatten(1)  # (n, h · d): side by side
        assert within(trace.outputs, heads, tolerance(whole_layer, trace.__getitem__, projected=True)), layer
        for head in range(s.heads):
            case = models.head_case(model, run, layer, head)
            o = case.options
            assert (o.window, o.rope_fraction, o.rope_frequencies) == (
                s.windows[layer] if s.windows else None, s.rope_fraction, s.rope_frequencies,
            )  # fmt: skip
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


@pytest.mark.parametrize("pair", ["phi3-longrope"], indirect=True)
def test_without_each_of_its_parts_the_model_is_not_transformers(pair):
    """Each part of the long-context model's attention matters on this sentence: the same model without it (plain
    causal attention, base^(−2p/d_rot), no attention factor) is off transformers' logits by more than the rule."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    with torch.inference_mode():
        theirs = hf(torch.tensor([ids])).logits[0, -1]
    for part, value in WITHOUT.items():
        plain = models.Model(replace(model.spec, **{part: value}), model.weights, model.tokenizer)
        with torch.inference_mode():
            logits = plain.spec.family.forward(plain, torch.tensor(ids)).logits
        assert not within(logits[0], theirs, carried(theirs, chain_terms(model.spec, len(ids)))), part


def test_greedy_tokens_with_and_without_the_cache_are_transformers(pair):
    greedy_is_transformers(pair[0], pair[1])


def test_the_whole_models_weights_are_its_forward_pass(pair):
    """The whole-model view's weights of every head (attention/whole) are the forward pass's: the window, the partial
    rotary and LongRoPE's factor in them (the pass runs again), the plain model's from its shortcut."""
    from attention.whole import compute as whole

    model, _, _ = pair
    run = model.run(SENTENCE)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    assert within(whole.weights(model, run), own, carried(torch.ones(1), chain_terms(model.spec, len(run.ids))))
