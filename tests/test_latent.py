"""Multi-head latent attention (DeepSeek's MLA) in the core: random latent cases (with the decoupled rotary key, the
latent's norm, and today's other options) equal FlexAttention within the one rule; a DeepSeek V3 attention layer of
transformers equals a latent case made from its weights; a latent's cache is smaller; bad latents are messages."""

import random

import pytest
import torch

from attention.base import presets
from attention.base.case import CaseError, case_to_dict, parse_case, with_options
from attention.base.record import compare
from attention.forward.compute import attend, tolerance
from attention.forward.oracle import check, flex_outputs
from tests.cases import with_latent
from tests.test_modern import modern_case


@pytest.mark.parametrize("seed", range(24))
def test_random_latent_cases_with_random_variants_equal_flex_attention(seed):
    case = parse_case(with_latent(modern_case(seed), random.Random(seed)))
    trace = attend(case)
    checked = check(trace)
    assert checked.oracle == "flex_attention"
    assert checked.agrees, checked
    latent = trace["latent"]
    assert latent.shape == (case.n, case.d_c)
    assert torch.equal(trace["values"] if case.options.heads == 1 else trace["values"].transpose(0, 1).flatten(1),
                       latent @ torch.tensor(case.w_value, dtype=latent.dtype))  # fmt: skip
    assert "differs" not in " ".join(trace.step("repeat").notes)


def test_the_decoupled_rotary_key_is_one_key_for_every_head():
    base = case_to_dict(presets.random_case(5, 4, 8, 8, seed=2, heads=2, rope_base=100.0, rope_fraction=0.5))
    case = parse_case(with_latent(base, random.Random(0), norm=True))
    keys = attend(case)["keys"]  # (2, 5, 4): the first 2 dims of each head are the shared key, turned
    assert torch.equal(keys[0, :, :2], keys[1, :, :2])
    assert not torch.equal(keys[0, :, 2:], keys[1, :, 2:])


def test_the_check_fails_on_a_small_difference_in_the_latent():
    case = parse_case(with_latent(case_to_dict(presets.random_case(6, 4, 4, 4, seed=3)), random.Random(1)))
    other = with_options(case, w_latent=[[v + (0.01 if (i, j) == (0, 0) else 0) for j, v in enumerate(row)]
                                         for i, row in enumerate(case.options.w_latent)])  # fmt: skip

    trace = attend(case)
    assert not compare("flex", trace.outputs, flex_outputs(other), tolerance(case, trace.__getitem__)).agrees


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        ({"w_latent": [[1.0, 2.0]] * 4}, "Latent W_DKV", "needs 3"),  # w_key has 3 rows
        ({"w_latent": [[1.0, 2.0, 3.0]] * 3}, "Latent W_DKV", "4"),  # x has 4 features
        ({"w_latent": [[1.0, 2.0, "a"]] * 4}, "Latent W_DKV, row 1, column 3", "not a number"),
        ({"latent_norm": [1.0] * 4}, "latent norm weights", "1 to 3"),
        ({"w_latent": None}, "w_key", "expected 4"),  # w_key made for a latent, the latent taken away
    ],
)
def test_bad_latents_are_messages_naming_the_place(change, where, problem):
    case = case_to_dict(presets.random_case(3, 4, 4, 4, seed=0))
    plain = parse_case(case)
    with pytest.raises(CaseError, match="needs a latent"):
        with_options(plain, latent_norm=[1.0])
    with pytest.raises(CaseError, match="Latent W_DKV: has 3 columns; keys and values are made from its latent"):
        with_options(plain, w_latent=[[1.0] * 3] * 4)
    case = with_latent(case, random.Random(0))
    case["w_key"], case["w_value"] = case["w_key"][:3], case["w_value"][:3]
    case["options"]["w_latent"] = [row[:3] for row in case["options"]["w_latent"]]
    case["options"].pop("latent_norm", None)
    case["options"] |= change
    case["options"] = {k: v for k, v in case["options"].items() if v is not None}
    with pytest.raises(CaseError) as error:
        parse_case(case)
    assert where in str(error.value.where) and problem in str(error.value), str(error.value)


def deepseek_case(attention, x: torch.Tensor, config) -> dict:
    """A case file of one DeepSeek V3 attention layer (interleaved RoPE, no low-rank queries) on x: its kv_a_proj as
    W_DKV (the compressed part, then the rotary key), kv_a_layernorm as the latent's norm, kv_b_proj split into W_UK
    and W_UV, each head's query with its rotary part first (the steps turn a head's first dims; a score is the same
    sum in either order), o_proj as w_out."""
    h, nope, rope, d_v = config.num_attention_heads, config.qk_nope_head_dim, config.qk_rope_head_dim, config.v_head_dim
    rank, d_head = config.kv_lora_rank, nope + rope
    w_q = attention.q_proj.weight.T.unflatten(1, (h, d_head))  # (d_in, h, nope + rope): the rotary part last
    w_q = torch.cat((w_q[..., nope:], w_q[..., :nope]), dim=-1).flatten(1)  # rotary first
    w_kv = attention.kv_b_proj.weight.T.unflatten(1, (h, nope + d_v))  # (rank, h, nope + d_v)
    w_key = torch.zeros(rank + rope, h, d_head)
    w_key[:rank, :, rope:] = w_kv[..., :nope]  # the compressed part reaches a head's unturned dims
    w_key[rank:, :, :rope] = torch.eye(rope)[:, None, :]  # the rotary key, copied into every head
    w_value = torch.cat((w_kv[..., nope:].flatten(1), torch.zeros(rope, h * d_v)))
    theta = config.rope_parameters["rope_theta"]
    return {
        "format": "attention-case/1", "x": x.tolist(), "w_query": w_q.tolist(), "w_key": w_key.flatten(1).tolist(),
        "w_value": w_value.tolist(),
        "options": {
            "heads": h, "scale": attention.scaling, "mask": "causal", "rope_base": theta,
            "rope_fraction": rope / d_head, "w_latent": attention.kv_a_proj_with_mqa.weight.T.tolist(),
            "latent_norm": attention.kv_a_layernorm.weight.tolist(),
            "norm_eps": attention.kv_a_layernorm.variance_epsilon,
            "w_out": attention.o_proj.weight.T.tolist(),
        },
    }  # fmt: skip


def test_a_deepseek_v3_attention_layer_equals_its_latent_case():
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as deepseek

    config = DeepseekV3Config(
        hidden_size=16, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None, kv_lora_rank=4,
        qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=3, rope_interleave=True, attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(0)
    attention = deepseek.DeepseekV3Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        attention.kv_a_layernorm.weight.uniform_(0.5, 1.5)  # not all ones: a norm left out shows
        x = torch.randn(1, 6, 16)
        position = torch.arange(6)[None]
        cos_sin = deepseek.DeepseekV3RotaryEmbedding(config)(x, position)
        mask = torch.full((6, 6), float("-inf")).triu(1)[None, None]
        expected, _ = attention(x, cos_sin, mask)
    case = parse_case(deepseek_case(attention, x[0], config))
    trace = attend(case)

    assert compare(
        "transformers", trace.outputs, expected[0], tolerance(case, trace.__getitem__, projected=True)
    ).agrees
    assert case.d_rot == 4 and case.d_c == 8
