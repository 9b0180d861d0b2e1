"""DeepSeek V2 and V3 against transformers (the oracle): random tiny models with multi-head latent attention (a normed
latent of 8 and a rotary key of 4 shared by 4 heads of 10 query dims and 5 value dims), YaRN with its mscale, a dense
first layer and a mixture of 8 experts (a shared one; V2's softmax top-2, greedy or group-limited, V3's sigmoid
routing with its correction bias in groups) made here with transformers and opened through the app's own loader;
every head's case through the core's latent options, the forward pass, the logits, the greedy tokens with and
without the cache (which keeps the latents alone), the whole-model view; the picker's line; low-rank queries, a head
wider than a case, and a model past the budget refused before a weight is read."""

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from attention import attend, models
from attention.base.case import CaseError, rotary_dims
from attention.base.i18n import render
from attention.base.tolerance import within
from attention.forward.compute import rope_theta, tolerance
from attention.models import sources
from attention.models.deepseek import rope_fraction
from attention.models.generate import generate
from tests.test_families import (  # noqa: F401 (vocabulary and tokenizers: the fixtures the tokenizers come from)
    NEEDS_TOKENIZERS,
    NEW_TOKENS,
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
from tests.test_offered import refused_past_budget_then_opened

transformers = pytest.importorskip("transformers")
pytestmark = NEEDS_TOKENIZERS
# 3 layers (the first dense), 4 heads of 6 + 4 query dims (the rotary 4 first in a head's case: 0.4 of it) and 5 value
# dims, a latent of 8; 8 experts of 16 (2 a token) and a shared one; no low-rank queries (DeepSeek-V2-Lite's way)
DS = {"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4,
      "intermediate_size": 64, "moe_intermediate_size": 16, "q_lora_rank": None, "kv_lora_rank": 8,
      "qk_rope_head_dim": 4, "qk_nope_head_dim": 6, "v_head_dim": 5, "n_routed_experts": 8, "num_experts_per_tok": 2,
      "n_shared_experts": 1, "first_k_dense_replace": 1}  # fmt: skip
# YaRN × 4 over 16 positions, its mscale 0.9 over mscale_all_dim 0.7: a factor on cos and sin, and one on the scale
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rope_theta": 1e4, "mscale": 0.9,
        "mscale_all_dim": 0.7, "beta_fast": 32.0, "beta_slow": 1.0}  # fmt: skip
V2_YARN = {**YARN, "mscale": 0.707, "mscale_all_dim": 0.707}  # DeepSeek-V2-Lite's: the scale's alone
LINE = "latent 8 + rotary 4 · MoE 8 experts, 2 active"
# name: (version, config beyond DS, the picker's line in English)
FAMILIES = {
    "v3": (3, {"n_group": 4, "topk_group": 2, "rope_parameters": YARN, "max_position_embeddings": 64},
           f"deepseek_v3 · {LINE}"),
    "v3_halves": (3, {"rope_interleave": False, "n_group": 1, "topk_group": 1, "norm_topk_prob": False,
                      "tie_word_embeddings": True}, f"deepseek_v3 · {LINE}"),
    "v2": (2, {"rope_parameters": V2_YARN, "max_position_embeddings": 64}, f"deepseek_v2 · {LINE}"),
    "v2_grouped": (2, {"topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2, "mlp_bias": True,
                       "routed_scaling_factor": 1.5}, f"deepseek_v2 · {LINE}"),
}  # fmt: skip
CLASSES = {2: ("DeepseekV2Config", "DeepseekV2ForCausalLM"), 3: ("DeepseekV3Config", "DeepseekV3ForCausalLM")}


def made(version: int, config: dict, folder: Path, tokenizer: Path, seed: int) -> torch.nn.Module:
    """A random DeepSeek with transformers (V3's correction bias random too: it is a buffer), saved with safetensors
    and the tokenizer into folder; transformers' own of that folder, eager attention."""
    config_class, model_class = (getattr(transformers, name) for name in CLASSES[version])
    vocab = json.loads(tokenizer.read_text())["model"]["vocab"]
    model = randomized(model_class(config_class(vocab_size=len(vocab), **config)), seed=seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # V3 chooses by score + bias, weighs by score alone
                b.copy_(0.3 * torch.randn(b.shape, generator=generator))
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    return model_class.from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tokenizers, tmp_path_factory) -> tuple[models.Model, torch.nn.Module, str]:  # noqa: F811
    """The app's model from its folder, and transformers' own of the same folder."""
    folder = tmp_path_factory.mktemp(request.param)
    version, config, _ = FAMILIES[request.param]
    hf = made(version, {**DS, **config}, folder, tokenizers["byte"], seed=len(request.param))
    return sources.open_model(folder), hf, request.param


def test_the_spec_is_transformers_and_the_picker_says_its_attention(pair):
    """The latent and the rotary key's width (the case's partial rotary turns exactly qk_rope_head_dim dims), the
    value heads' width, YaRN's frequencies and factor as transformers' rotary embedding has them, the scale with its
    mscale as transformers' attention's, the experts."""
    model, hf, name = pair
    s, c = model.spec, hf.config
    attention = hf.model.layers[0].self_attn
    assert (s.model_type, s.latent, s.value_dim) == (c.model_type, c.kv_lora_rank, c.v_head_dim)
    assert s.head_dim == c.qk_nope_head_dim + c.qk_rope_head_dim and s.kv_heads == s.heads
    assert rotary_dims(s.head_dim, s.rope_fraction) == c.qk_rope_head_dim and s.tied == c.tie_word_embeddings
    rotary = hf.model.rotary_emb
    torch.testing.assert_close(rope_theta(s, c.qk_rope_head_dim), rotary.inv_freq.double(), rtol=1e-6, atol=0)
    assert s.rope_attention == pytest.approx(rotary.attention_scaling)
    assert s.scale == attention.scaling  # qk_head_dim^(−1/2), times YaRN's mscale squared where the config has one
    if "rope_parameters" in FAMILIES[name][1]:
        assert s.scale > s.head_dim**-0.5 and (s.rope_attention != 1) == (name == "v3")
    r = s.family.routing
    assert (r.experts, r.top_k, r.dense, r.scale) == (8, 2, 1, c.routed_scaling_factor) and s.experts == (8, 2)
    assert s.family.pairs == (name != "v3_halves") and r.version == int(c.model_type[-1])
    assert render("en", models.family_line(s)) == FAMILIES[name][2]
    assert "潜向量" in render("zh", models.family_line(s))


@pytest.mark.parametrize(("d_rot", "nope"), [(2, 47), (64, 128), (4, 6), (2, 194), (8, 0)])
def test_the_rotary_fraction_turns_exactly_the_rotary_dims(d_rot, nope):
    """rope / (rope + nope) in float can fall below what int(d_head · fraction) needs (2 / 49 · 49 = 1.99…): nudged
    up, it turns exactly qk_rope_head_dim dims; a head without unturned dims has no fraction."""
    fraction = rope_fraction(d_rot, d_rot + nope)
    assert rotary_dims(d_rot + nope, fraction) == d_rot
    assert (fraction is None) == (nope == 0)


def test_every_head_of_every_layer_through_the_eight_steps_equals_transformers(pair):
    """Each head as a latent case (W_DKV and the latent's norm shared by the heads, W_UK with the rotary key's
    identity block, W_UV, the rotary part of the query first): its weights as transformers' output_attentions, its
    output as transformers' head and as the model's own, within the one rule; the whole layer's case too."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, out = seen(hf, ids)
    own = model.run(SENTENCE)
    run = replace(own, inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    s, d_v = model.spec, model.spec.value_dim
    for layer in range(s.layers):
        attention = hf.model.layers[layer].self_attn
        for head in range(s.heads):
            case = models.head_case(model, run, layer, head)
            o = case.options
            assert (case.d_c, case.d_rot, case.d_v, o.norm_eps) == (s.latent + 4, 4, d_v, 1e-6)
            assert o.latent_norm == tuple(attention.kv_a_layernorm.weight.tolist()) and o.mask == "causal"
            trace = attend(case)
            rule = tolerance(case, trace.__getitem__, projected=True)
            assert within(trace.outputs, hf_heads[layer][:, head * d_v : (head + 1) * d_v], rule), (layer, head)
            assert within(trace["weights"], out.attentions[layer][0, head], weights_tolerance(case, trace))
            mine = models.head_case(model, own, layer, head)  # on the model's own inputs: its own head's output
            mine_trace = attend(mine)
            assert within(
                mine_trace.outputs,
                own.head_output(layer, head),
                tolerance(mine, mine_trace.__getitem__, projected=True),
            )
        whole = models.layer_case(model, run, layer)
        trace = attend(whole)
        assert within(trace.outputs, hf_heads[layer], tolerance(whole, trace.__getitem__, projected=True)), layer


def test_a_wrong_latent_leaves_transformers(pair):
    """The check can fail: a head's case with its latent's norm left out, or the rotary key's identity block halved,
    is off transformers' head by more than the rule."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, _ = seen(hf, ids)
    run = replace(model.run(SENTENCE), inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    case = models.head_case(model, run, 1, 2)
    rank, d_v = model.spec.latent, model.spec.value_dim
    halved = tuple(tuple(v / 2 if i >= rank else v for v in row) for i, row in enumerate(case.w_key))
    for wrong in (replace(case, options=replace(case.options, latent_norm=None)), replace(case, w_key=halved)):
        trace = attend(wrong)
        rule = tolerance(wrong, trace.__getitem__, projected=True)
        assert not within(trace.outputs, hf_heads[1][:, 2 * d_v : 3 * d_v], rule)


def test_the_forward_pass_equals_transformers_layer_by_layer_and_in_its_logits(pair):
    forward_is_transformers(pair[0], pair[1])


def test_without_each_of_its_parts_the_model_is_not_transformers(pair):
    """Each part matters on this sentence: the same model without the latent's norm, with its rotary pairs read the
    other way, without the mscale in its scale, routed to one expert, without its shared expert, or (V3) without its
    correction bias, is off transformers' logits by more than the rule."""
    model, hf, name = pair
    ids, _ = model.tokenize(SENTENCE)
    with torch.inference_mode():
        theirs = hf(torch.tensor([ids])).logits[0, -1]
    s, w, tokenizer = model.spec, model.weights, model.tokenizer
    unnormed = {n: torch.ones_like(t) if n.endswith("kv_a_layernorm.weight") else t for n, t in w.items()}
    unbiased = {n: torch.zeros_like(t) if n.endswith("e_score_correction_bias") else t for n, t in w.items()}
    without = {
        "latent norm": models.Model(s, unnormed, tokenizer),
        "pairs": models.Model(replace(s, rope_frequencies=tuple(reversed(rope_theta(s, 4).tolist()))), w, tokenizer),
        "top 1": models.Model(replace(s, family=routed(s.family, top_k=1)), w, tokenizer),
        "shared": models.Model(replace(s, family=routed(s.family, shared=0)), w, tokenizer),
    }
    if "rope_parameters" in FAMILIES[name][1]:
        without["mscale"] = models.Model(replace(s, scale=s.head_dim**-0.5), w, tokenizer)
    if s.family.routing.version == 3:
        without["correction bias"] = models.Model(s, unbiased, tokenizer)
    for part, plain in without.items():
        with torch.inference_mode():
            logits = plain.spec.family.forward(plain, torch.tensor(ids)).logits
        assert not within(logits[0], theirs, carried(theirs, chain_terms(s, len(ids)))), part


def routed(family, **changes):
    """The family with its experts' routing changed."""
    return replace(family, routing=replace(family.routing, **changes))


def test_greedy_tokens_with_and_without_the_cache_are_transformers(pair):
    greedy_is_transformers(pair[0], pair[1])


def test_the_cache_keeps_the_latents_alone(pair):
    """What a generation's cache holds: each layer's latent and rotary key a token (d_c + d_rot numbers), not every
    head's keys and values ((d_head + d_v) · heads), as transformers' cache keeps them."""
    model = pair[0]
    s = model.spec
    made = generate(model, SENTENCE, NEW_TOKENS, cached=True)
    tokens = len(made.run.ids)  # the last one too: the run passes it once more
    assert made.cache_bytes == 4 * s.layers * tokens * (s.latent + 4)
    assert made.cache_bytes < 4 * s.layers * tokens * s.heads * (s.head_dim + s.value_dim)


def test_the_whole_models_weights_are_its_forward_pass(pair):
    """The whole-model view's weights of every head (attention/whole) are the forward pass's (its shortcut knows no
    latent, so the pass runs again)."""
    from attention.whole import compute as whole

    model, _, _ = pair
    run = model.run(SENTENCE)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    assert torch.equal(whole.weights(model, run), own)


# Refused before a weight is read ---------------------------------------------------------------------------------

# DeepSeek-V2-Lite's config.json (its keys as the released file has them)
V2_LITE = {"architectures": ["DeepseekV2ForCausalLM"], "attention_bias": False, "bos_token_id": 100000,
           "eos_token_id": 100001, "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048,
           "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840,
           "model_type": "deepseek_v2", "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1,
           "n_routed_experts": 64, "n_shared_experts": 2, "norm_topk_prob": False, "num_attention_heads": 16,
           "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16, "q_lora_rank": None,
           "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
           "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                            "original_max_position_embeddings": 4096, "type": "yarn"},
           "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax", "tie_word_embeddings": False,
           "topk_group": 1, "topk_method": "greedy", "v_head_dim": 128, "vocab_size": 102400}  # fmt: skip


def config_only(folder: Path, config: dict) -> Path:
    """A folder with the config and an empty weights file: never read, the config says enough."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def test_deepseek_v2_lites_config_reads_as_transformers_reads_it_and_its_heads_are_wider_than_a_case(tmp_path):
    """The released DeepSeek-V2-Lite's config: its spec as transformers' DeepseekV2Config and attention read it
    (YaRN's frequencies over the 64 rotary dims, the scale with mscale_all_dim's square) and its picker's line; a
    head's W_Q (2,048 × 192) and W_DKV (2,048 × 576) are more than a case holds, said before anything is read."""
    spec = sources.spec_at(config_only(tmp_path / "DeepSeek-V2-Lite", V2_LITE))
    config = transformers.DeepseekV2Config(**V2_LITE)
    rotary = transformers.models.deepseek_v2.modeling_deepseek_v2.DeepseekV2RotaryEmbedding(config)
    attention = transformers.models.deepseek_v2.modeling_deepseek_v2.DeepseekV2Attention(config, 0)
    assert (spec.layers, spec.heads, spec.head_dim, spec.value_dim, spec.latent) == (27, 16, 192, 128, 512)
    assert rotary_dims(spec.head_dim, spec.rope_fraction) == 64 and spec.rope_scaling == "yarn"
    torch.testing.assert_close(rope_theta(spec, 64), rotary.inv_freq.double(), rtol=1e-6, atol=0)
    assert spec.scale == attention.scaling and spec.rope_attention == rotary.attention_scaling == 1.0
    assert render("en", models.family_line(spec)) == "deepseek_v2 · latent 512 + rotary 64 · MoE 64 experts, 6 active"
    wide = models.latent_too_wide(spec)
    assert render("en", wide) == (
        "its multi-head latent attention's W_Q is 2,048 × 192 numbers, more than a case holds (162 columns at most "
        "for 2,048 rows)"
    )


def test_low_rank_queries_are_refused_saying_why(tmp_path):
    """q_lora_rank (full DeepSeek-V2/V3: q = RMSNorm(x W_DQ) W_UQ) has no step in a head's case: refused, naming the
    config, before a weight is read."""
    folder = config_only(tmp_path / "full", {**V2_LITE, "model_type": "deepseek_v3", "q_lora_rank": 1536})
    with pytest.raises(CaseError) as caught:
        sources.spec_at(folder)
    assert str(caught.value) == (
        f"{folder / 'config.json'}: makes its queries through a low-rank latent (q_lora_rank 1536: q = RMSNorm(x W_DQ) "
        "W_UQ), a norm between two projections that a head's case has no step for; DeepSeek models without it "
        "(q_lora_rank null: DeepSeek-V2-Lite, Moonlight) open"
    )
    assert "q_lora_rank 1536" in render("zh", caught.value.message)
    quantized = config_only(tmp_path / "fp8", {**V2_LITE, "quantization_config": {"quant_method": "fp8"}})
    with pytest.raises(CaseError, match=r"asks for quantized weights \(fp8\)"):
        sources.spec_at(quantized)


def test_a_mixture_of_experts_past_the_budget_is_refused_with_both_numbers_before_it_is_read(
    tokenizers,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """Every expert counts (a token uses 2 of 8, the server holds all 8): refused before a file is read, the picker's
    line says so with the family's attention; within the budget it opens."""
    folder = tmp_path / "shelf" / "tiny-deepseek"
    hf = made(3, {**DS, "n_group": 4, "topk_group": 2}, folder, tokenizers["byte"], seed=1)
    parameters = sum(p.numel() for p in hf.parameters()) + sum(b.numel() for n, b in hf.named_buffers()
                                                                if n.endswith("e_score_correction_bias"))  # fmt: skip
    experts = sum(p.numel() for name, p in hf.named_parameters() if ".experts." in name)
    size = 4 * parameters  # float32 bytes, every expert's
    limit = size - 4 * experts // 2  # past the model with the 2 experts a token uses, short of all 8
    line = f"tiny-deepseek · deepseek_v3 · {LINE} · 3 layers × 4 heads"
    model = refused_past_budget_then_opened(monkeypatch, tmp_path, "tiny-deepseek", size, limit, line)
    assert math.isfinite(model.run(SENTENCE).next_tokens[0][1])
