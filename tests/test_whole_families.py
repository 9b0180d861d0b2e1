"""The whole-model view, kinds, ablation and patching (attention/whole/) on every family beyond Llama and GPT-2, against
transformers: random tiny models of Gemma 2 and 3, BLOOM, GPT-NeoX, Phi-3, gpt-oss, Mistral, Qwen2, Qwen3, SmolLM3 and
DeepSeek V2 and V3 (windows that leave keys out, ALiBi, partial rotary, sinks, NoPE, multi-head latent attention and
experts), heads switched off or patched in our forward pass and in transformers' through a pre-hook on its attention
output projection, within the one rule."""

import pytest
import torch

from attention.base.tolerance import within
from attention.models import sources
from attention.models.kinds import KINDS, kinds
from attention.whole import compute
from tests.test_families import FAMILIES as OURS
from tests.test_families import NEEDS_TOKENIZERS, SENTENCE, carried, chain_terms, make, tokenizers, vocabulary  # noqa: F401
from tests.test_families_2026 import FAMILIES as MODERN
from tests.test_families_bloom_neox import FAMILIES as BLOOM_NEOX
from tests.test_families_deepseek import DS
from tests.test_families_deepseek import FAMILIES as DEEPSEEK
from tests.test_families_gemma import FAMILIES as GEMMA
from tests.test_families_gpt_oss import GPT_OSS
from tests.test_families_phi3 import FAMILIES as PHI3

transformers = pytest.importorskip("transformers")
pytestmark = NEEDS_TOKENIZERS
THREE = {"num_hidden_layers": 3}  # the families' own files' sizes, cut to 3 layers where they have more
# model_type: (transformers' classes, config), each family's test file's own model; a window of 3 on the 11-token
# sentence wherever the family has one (Gemma 2's layers 0 and 2, Gemma 3's 0 and 2, Phi-3's every layer, gpt-oss's
# 0 and 2, Mistral's every layer, Qwen2's layer 1), SmolLM3's layer 1 without RoPE
FAMILIES = {
    "gemma2": (*GEMMA["gemma2"][:2], {**GEMMA["gemma2"][2], **THREE}),
    "gemma3_text": (*GEMMA["gemma3_text"][:2], {**GEMMA["gemma3_text"][2], **THREE,
                    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}),
    "bloom": BLOOM_NEOX["bloom"][:3],
    "gpt_neox": BLOOM_NEOX["gpt_neox"][:3],
    "phi3": ("Phi3Config", "Phi3ForCausalLM", PHI3["phi3-longrope"][0]),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", GPT_OSS),
    "mistral": MODERN["mistral"][:3],
    "qwen2": MODERN["qwen2"][:3],
    "qwen3": OURS["qwen3"][:3],
    "smollm3": (*MODERN["smollm3"][:2], {**MODERN["smollm3"][2], "num_hidden_layers": 2}),
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM", {**DS, **DEEPSEEK["v2_grouped"][1]}),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", {**DS, **DEEPSEEK["v3"][1]}),
}  # fmt: skip
PROJECTIONS = ("self_attn.o_proj", "self_attention.dense", "attention.dense")  # most families'; BLOOM's; GPT-NeoX's


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tokenizers, tmp_path_factory):  # noqa: F811
    """The app's model from its folder, and transformers' own of the same folder (eager attention)."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = make(request.param, folder, tokenizers["byte"], FAMILIES[request.param])
    model = sources.open_model(folder)
    assert model.spec.model_type == request.param  # the family's own adapter reads it
    return model, hf


def projections(hf) -> list[torch.nn.Module]:
    """Each layer's attention output projection in transformers' model: the module that reads the heads side by side
    (o_proj in Llama's, Gemma's, Phi-3's and gpt-oss's blocks; dense in BLOOM's and GPT-NeoX's)."""
    body = hf.base_model
    blocks = getattr(body, "layers", None) or body.h
    name = next(n for n in PROJECTIONS if hasattr(blocks[0], n.split(".")[0]))
    return [block.get_submodule(name) for block in blocks]


def width(spec) -> int:
    """A head's slice of the output projection's input: its value width (DeepSeek's v_head_dim), else head_dim."""
    return spec.value_dim or spec.head_dim


def their_logits(hf, ids: list[int], heads, how: str, d: int, source=None) -> torch.Tensor:
    """transformers' last logits with the heads' slices (head_dim d) of the output projection's input changed by a
    pre-hook: zeroed, made their mean over the positions, or (patch) the source's."""
    hooks = []
    for layer, projection in enumerate(projections(hf)):
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

        hooks.append(projection.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            return hf(torch.tensor([ids])).logits[0, -1]
    finally:
        for hook in hooks:
            hook.remove()


def their_heads(hf, ids: list[int]) -> dict[int, torch.Tensor]:
    """transformers' heads side by side at each layer's output projection (1, n, heads · d)."""
    caught, hooks = {}, []
    for layer, projection in enumerate(projections(hf)):
        hooks.append(projection.register_forward_pre_hook(
            lambda module, args, layer=layer: caught.__setitem__(layer, args[0].clone())))  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for hook in hooks:
            hook.remove()
    return caught


def picked(spec, which: str) -> frozenset[tuple[int, int]]:
    """One head, a whole layer (the last: after it only the MLP and the logits), or a head in the first and last."""
    last = spec.layers - 1
    sets = {"one": {(0, 1)}, "layer": {(last, h) for h in range(spec.heads)}, "two": {(0, spec.heads - 1), (last, 2)}}
    return frozenset(sets[which])


@pytest.mark.parametrize("how", compute.HOWS)
@pytest.mark.parametrize("which", ["one", "layer", "two"])
def test_heads_switched_off_give_transformers_logits(pair, which, how):
    """Zeroed or made their mean, in our pass (the Switch) and in transformers' (the hook): the same logits, and
    the plain logits are not (the switch moved them past the rule: the check could fail)."""
    model, hf = pair
    ids, _ = model.tokenize(SENTENCE)
    heads = picked(model.spec, which)
    own = compute.predict(model, ids, compute.Switch(heads, how))
    theirs = their_logits(hf, ids, heads, how, width(model.spec))
    rule = carried(theirs, chain_terms(model.spec, len(ids)))
    assert within(own.logits, theirs, rule)
    assert not within(compute.predict(model, ids).logits, theirs, rule)


@pytest.mark.parametrize("which", ["one", "two"])
def test_a_head_patched_from_another_sentence_gives_transformers_logits(pair, which):
    """The clean sentence's head outputs (ours from our pass, theirs caught by the hook) put into the corrupt one's."""
    model, hf = pair
    clean, _ = model.tokenize("The capital of France is")
    corrupt, _ = model.tokenize("The capital of Italy is")
    assert len(clean) == len(corrupt) and clean != corrupt
    heads = picked(model.spec, which)
    with torch.inference_mode():
        source = model.spec.family.forward(model, torch.tensor(clean)).head_outputs
    own = compute.predict(model, corrupt, compute.Switch(heads, "patch", source))
    theirs = their_logits(hf, corrupt, heads, "patch", width(model.spec), their_heads(hf, clean))
    rule = carried(theirs, chain_terms(model.spec, len(corrupt)))
    assert within(own.logits, theirs, rule)
    assert not within(compute.predict(model, corrupt).logits, theirs, rule)  # the patch moved them


def test_the_whole_views_weights_are_the_forward_passes_and_transformers(pair):
    """compute.weights (from the recorded inputs, or the pass run again where the attention is not plain) equals the
    forward pass's weights and transformers' output_attentions; a window leaves the last row's first keys at 0."""
    model, hf = pair
    s, run = model.spec, model.run(SENTENCE)
    n = len(run.ids)
    with torch.inference_mode():
        own = s.family.forward(model, torch.tensor(run.ids)).weights
    with torch.no_grad():
        attentions = hf(torch.tensor([run.ids]), output_attentions=True).attentions
    ours = compute.weights(model, run)
    rule = carried(torch.ones(1), chain_terms(s, n))
    assert ours.shape == own.shape == (s.layers, s.heads, n, n)
    assert within(ours, own, rule)
    for layer in range(s.layers):
        assert within(ours[layer], attentions[layer][0], rule), layer
    for layer, window in enumerate(s.windows or ()):
        if window is not None:  # the window bites: keys causal attention would show the last query are left out
            assert window < n - 1 and (ours[layer, :, -1, : n - window] == 0).all(), layer


def test_every_head_has_one_kind_as_the_view_finds_it(pair):
    """The view's kinds (the probe's induction scores, then the sentence's measures): one kind per head, each of
    KINDS, with the measures that transformers' own weights give."""
    model, hf = pair
    s, run = model.spec, model.run(SENTENCE)
    scores = compute.induction_scores(model)
    assert scores.shape == (s.layers, s.heads) and torch.isfinite(scores).all()
    found = compute.whole(model, run, scores)
    assert found.causal and len(found.kinds) == s.layers
    assert all(len(layer) == s.heads for layer in found.kinds)
    assert all(k.name in KINDS and k.induction is not None for layer in found.kinds for k in layer)
    assert all(sorted(heads) == list(range(s.heads)) for heads in compute.order(found, "kind"))
    with torch.no_grad():
        attentions = hf(torch.tensor([list(run.ids)]), output_attentions=True).attentions
    for layer in range(s.layers):
        theirs = kinds(attentions[layer][0], causal=True)
        for own, other in zip(found.kinds[layer], theirs, strict=True):
            measures = (own.first, own.previous, own.itself, own.broad)
            assert measures == pytest.approx((other.first, other.previous, other.itself, other.broad), abs=1e-5)
