"""OLMo 2 against transformers (the oracle): random tiny models (q/k norms over the width, norms after the attention
and the MLP, none before), made here with transformers and opened through the app's own loader; every head's case
(one head wide, with the other heads' share of its norm: norm_rest) and every layer's case (every head), the forward
pass, the logits and the greedy tokens with and without the cache; the picker's line; and a per-head norm in its
place is caught."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from attention import attend, models
from attention.base.i18n import render
from attention.base.tolerance import within
from attention.forward import compute
from attention.forward.compute import tolerance
from attention.models import sources
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
)

transformers = pytest.importorskip("transformers")
pytestmark = NEEDS_TOKENIZERS
# 2 layers, width 32, 4 query heads sharing 2 key/value heads: q_norm has 32 numbers, k_norm 16
# (tokens 1 and 2 the vocabulary's own; OLMo 2's defaults are others)
OLMO2 = {**SMALL, "num_key_value_heads": 2, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
LINE = "olmo2 · q/k norm over the width"


@pytest.fixture(scope="module")
def pair(tokenizers, tmp_path_factory) -> tuple[models.Model, torch.nn.Module]:  # noqa: F811
    """The app's model from its folder, and transformers' own (eager attention) of the same folder."""
    folder: Path = tmp_path_factory.mktemp("olmo2")
    tokenizer = tokenizers["byte"]
    config = transformers.Olmo2Config(vocab_size=len(json.loads(tokenizer.read_text())["model"]["vocab"]), **OLMO2)
    randomized(transformers.Olmo2ForCausalLM(config), seed=7).save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    hf = transformers.Olmo2ForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    return sources.open_model(folder), hf


def test_the_spec_and_the_picker_line(pair):
    model, hf = pair
    s = model.spec
    assert (s.model_type, s.norm_width, s.heads, s.kv_heads) == ("olmo2", True, 4, 2)
    assert hf.model.layers[0].self_attn.q_norm.weight.shape == (s.heads * s.head_dim,)  # the whole width's γ
    assert render("en", models.family_line(s)) == LINE
    assert "整宽" in render("zh", models.family_line(s))


def test_every_heads_case_is_one_head_and_equals_transformers(pair):
    """A head's case is that head alone (its d_head columns, its γ, and norm_rest: what the layer's other heads add to
    each token's norm, from the model's own q and k): its outputs are transformers' head and the model's own within
    the one rule, and the layer's case's head; the layer's case (every head) is transformers' heads side by side, its
    weights transformers' output_attentions."""
    model, hf = pair
    s, d = model.spec, model.spec.head_dim
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, out = seen(hf, ids)
    own = model.run(SENTENCE)
    run = replace(own, inputs=torch.stack([hf_x[layer] for layer in range(s.layers)]))
    terms = chain_terms(s, len(ids))
    for layer in range(s.layers):
        whole = models.layer_case(model, run, layer)
        whole_trace = attend(whole)
        assert within(whole_trace.outputs, hf_heads[layer], tolerance(whole, whole_trace.__getitem__, projected=True))
        assert within(whole_trace["weights"], out.attentions[layer][0], carried(torch.ones(1), terms)), layer
        for head in range(s.heads):
            case = models.head_case(model, run, layer, head)
            o = case.options
            assert (o.heads, case.d_k, len(case.w_key[0]), len(o.q_norm), len(o.k_norm)) == (1, d, d, d, d)
            assert (o.norm_rest.q_width, o.norm_rest.k_width, len(o.norm_rest.q)) == (32, 16, len(ids))
            trace = attend(case)
            theirs = hf_heads[layer][:, head * d : (head + 1) * d]
            assert within(trace.outputs, theirs, tolerance(case, trace.__getitem__, projected=True)), (layer, head)
            assert within(trace.outputs, whole_trace["head_outputs"][head], tolerance(case, trace.__getitem__))
            assert within(trace["weights"], out.attentions[layer][0, head], carried(torch.ones(1), terms))
            mine = models.head_case(model, own, layer, head)  # on the model's own inputs: its own head's output
            mine_trace = attend(mine)
            assert within(mine_trace.outputs, own.head_outputs[layer, head],
                          tolerance(mine, mine_trace.__getitem__, projected=True))  # fmt: skip


def test_the_forward_pass_equals_transformers_layer_by_layer_and_in_its_logits(pair):
    forward_is_transformers(pair[0], pair[1], weights=False)


def test_greedy_tokens_with_and_without_the_cache_are_transformers(pair):
    greedy_is_transformers(pair[0], pair[1])


def test_the_whole_models_weights_are_its_forward_pass(pair):
    """The whole-model view's weights of every head (its shortcut from the recorded inputs, with the q/k norm over
    the width) are the forward pass's."""
    from attention.whole import compute as whole

    model, _ = pair
    run = model.run(SENTENCE)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    torch.testing.assert_close(whole.weights(model, run), own)


def per_head(m: torch.Tensor, gamma: torch.Tensor, eps: float, rest=None) -> torch.Tensor:
    """The deliberate bug: each head's row over its own root mean square (Qwen3's), with γ's blocks of the width
    (and a head's case's norm_rest left out)."""
    if gamma.numel() != m.shape[-1]:
        gamma = gamma.reshape(-1, 1, m.shape[-1]).repeat_interleave(m.shape[0] * m.shape[-1] // gamma.numel(), 0)
    return m * torch.rsqrt(m.pow(2).mean(-1, keepdim=True) + eps) * gamma


def test_a_per_head_norm_is_caught(pair, monkeypatch):
    """The core's norm and the adapter's made per head: the layer's case, a head's case, the logits and the tokens
    leave transformers'."""
    from attention.models import llama

    model, hf = pair
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, out = seen(hf, ids)
    run = replace(model.run(SENTENCE), inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    monkeypatch.setattr(compute, "rms_norm", per_head)
    monkeypatch.setattr(llama, "rms_norm", lambda m, gamma, eps: per_head(m, gamma, eps) if m.dim() == 3 else
                        m * torch.rsqrt(m.pow(2).mean(-1, keepdim=True) + eps) * gamma)  # fmt: skip
    case = models.layer_case(model, run, 0)
    trace = attend(case)
    assert not within(trace.outputs, hf_heads[0], tolerance(case, trace.__getitem__, projected=True))
    d = model.spec.head_dim
    head = models.head_case(model, run, 0, 1)
    head_trace = attend(head)
    assert not within(head_trace.outputs, hf_heads[0][:, d : 2 * d], tolerance(head, head_trace.__getitem__))
    with torch.inference_mode():
        logits = model.spec.family.forward(model, torch.tensor(ids)).logits
    assert not within(logits[0], out.logits[0, -1], carried(out.logits[0, -1], chain_terms(model.spec, len(ids))))
