"""gpt-oss against transformers (the oracle): random tiny models with a sink logit per head, a sliding window of 3 on
the layers layer_types marks, biases on q, k, v and o, YaRN RoPE and a mixture of 4 experts (top 2, a clamped
SwiGLU), made here with transformers and opened through the app's own loader; every head's case, the forward pass,
the logits, the greedy tokens with and without the cache, the whole-model view; the picker's line."""

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from attention import attend, models
from attention.base.case import CaseError
from attention.base.i18n import render
from attention.base.tolerance import within
from attention.forward.compute import rope_theta, tolerance
from attention.models import sources
from attention.models.gpt_oss import _windows
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
# 3 layers (sliding, full, sliding by GptOssConfig's default layer_types), head_dim 8, grouped-query attention,
# 4 experts of which each token takes 2, a SwiGLU limit that the random weights pass (the clamp matters)
GPT_OSS = {**SMALL, "num_hidden_layers": 3, "num_key_value_heads": 2, "head_dim": 8, "sliding_window": WINDOW,
           "num_local_experts": 4, "num_experts_per_tok": 2, "swiglu_limit": 1.5, "pad_token_id": 0}  # fmt: skip
# name: (config beyond GPT_OSS, the picker's line in English): GptOssConfig's own YaRN (× 32 over 4,096 positions), and
# a smaller YaRN with an untied and a tied output layer and every layer sliding
FAMILIES = {
    "default": ({}, "gpt_oss · sliding 3 on layers 1, 3 · sinks"),
    "yarn_tied": ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8,
                                       "rope_theta": 100.0}, "max_position_embeddings": 32,
                   "tie_word_embeddings": True, "layer_types": ["sliding_attention"] * 3},
                  "gpt_oss · sliding 3 on every layer · sinks"),
}  # fmt: skip


def make(name: str, folder: Path, tokenizer: Path) -> torch.nn.Module:
    """A random gpt-oss with transformers, saved with safetensors and the tokenizer into folder."""
    vocab = json.loads(tokenizer.read_text())["model"]["vocab"]
    config = transformers.GptOssConfig(vocab_size=len(vocab), **GPT_OSS, **FAMILIES[name][0])
    model = transformers.GptOssForCausalLM(config)
    randomized(model, seed=len(name)).save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    return transformers.GptOssForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tokenizers, tmp_path_factory) -> tuple[models.Model, torch.nn.Module, str]:  # noqa: F811
    """The app's model from its folder, and transformers' own of the same folder."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = make(request.param, folder, tokenizers["byte"])
    return sources.open_model(folder), hf, request.param


def test_the_spec_is_transformers_and_the_picker_says_its_attention(pair):
    model, hf, name = pair
    s, c = model.spec, hf.config
    assert s.model_type == "gpt_oss" and s.sinks and s.bias and s.tied == c.tie_word_embeddings
    assert (s.windows or (None,) * s.layers) == tuple(layer.self_attn.sliding_window for layer in hf.model.layers)
    rotary = hf.model.rotary_emb  # YaRN's frequencies and factor: transformers' own
    torch.testing.assert_close(rope_theta(s, s.head_dim), rotary.inv_freq.double(), rtol=1e-6, atol=0)
    assert s.rope_attention == pytest.approx(rotary.attention_scaling) and s.rope_attention > 1
    f = s.family
    assert (f.experts, f.top_k, f.alpha, f.limit) == (4, 2, c.swiglu_alpha, c.swiglu_limit)
    assert render("en", models.family_line(s)) == FAMILIES[name][1]
    assert "汇聚" in render("zh", models.family_line(s))


def test_the_default_layer_types_are_transformers():
    """Without layer_types in the file: a window on the odd layers counted from 1, as GptOssConfig makes them."""
    config = {"model_type": "gpt_oss", "num_hidden_layers": 5, "sliding_window": 7}
    theirs = transformers.GptOssConfig(**config)
    assert _windows(config) == tuple(7 if t == "sliding_attention" else None for t in theirs.layer_types)
    assert _windows(config) == (7, None, 7, None, 7)


def test_every_head_of_every_layer_through_the_eight_steps_equals_transformers(pair):
    """Each head as a case with its own sink, the layer's window, YaRN's RoPE and the biases: its weights as
    transformers' output_attentions (the sink's dropped), its output as transformers' head and as the model's own,
    within the one rule; a whole layer's case carries every head's sink."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    assert len(ids) > 2 * WINDOW
    hf_x, hf_heads, out = seen(hf, ids)
    own = model.run(SENTENCE)
    run = replace(own, inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    s, d = model.spec, model.spec.head_dim
    shares = []
    for layer in range(s.layers):
        sinks = hf.model.layers[layer].self_attn.sinks.detach()
        assert models.layer_case(model, run, layer).options.sinks == tuple(sinks.tolist())
        for head in range(s.heads):
            case = models.head_case(model, run, layer, head)
            o = case.options
            assert (o.window, o.sinks, o.bias) == (s.windows[layer], (sinks[head].item(),), True)
            assert o.scale == pytest.approx(s.rope_attention**2 / math.sqrt(d))
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
            shares.append(1 - trace["weights"].sum(-1))  # (n,): each row's weight on the sink
    assert torch.cat(shares).max() > 0.1  # the sinks take a share of rows: their denominators matter here


def test_the_forward_pass_equals_transformers_layer_by_layer_and_in_its_logits(pair):
    forward_is_transformers(pair[0], pair[1])


def test_without_each_of_its_parts_the_model_is_not_transformers(pair):
    """Each part matters on this sentence: the same model without its sinks, its windows, YaRN's factor, or the
    SwiGLU's clamp, or routed to one expert, is off transformers' logits by more than the rule."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    with torch.inference_mode():
        theirs = hf(torch.tensor([ids])).logits[0, -1]
    s, w, tokenizer = model.spec, model.weights, model.tokenizer
    no_sinks = {n: torch.full_like(t, -math.inf) if n.endswith(".sinks") else t for n, t in w.items()}  # e^−∞ = 0
    without = {
        "sinks": models.Model(s, no_sinks, tokenizer),
        "windows": models.Model(replace(s, windows=None), w, tokenizer),
        "yarn": models.Model(replace(s, rope_attention=1.0), w, tokenizer),
        "clamp": models.Model(replace(s, family=replace(s.family, limit=math.inf)), w, tokenizer),
        "top_1": models.Model(replace(s, family=replace(s.family, top_k=1)), w, tokenizer),
    }
    for part, plain in without.items():
        with torch.inference_mode():
            logits = plain.spec.family.forward(plain, torch.tensor(ids)).logits
        assert not within(logits[0], theirs, carried(theirs, chain_terms(model.spec, len(ids)))), part


def test_greedy_tokens_with_and_without_the_cache_are_transformers(pair):
    greedy_is_transformers(pair[0], pair[1])


def test_the_whole_models_weights_are_its_forward_pass(pair):
    """The whole-model view's weights of every head (attention/whole) are the forward pass's: the sinks, the windows
    and YaRN in them (its shortcut knows none of them, so the pass runs again)."""
    from attention.whole import compute as whole

    model, _, _ = pair
    run = model.run(SENTENCE)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    assert torch.equal(whole.weights(model, run), own)


def test_a_quantized_checkpoint_is_named(tmp_path):
    """The released checkpoints' MXFP4 experts are not read: picking one says so, naming its config."""
    config = {"model_type": "gpt_oss", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32,
              "vocab_size": 10, "quantization_config": {"quant_method": "mxfp4"}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(b"")  # never read: the config says enough
    with pytest.raises(CaseError) as caught:
        sources.spec_at(tmp_path)
    said = "asks for quantized weights (mxfp4), which this app does not compute"
    assert str(caught.value) == f"{tmp_path / 'config.json'}: {said}"
