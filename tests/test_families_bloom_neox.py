"""BLOOM's ALiBi and GPT-NeoX's partial rotary against transformers (the oracle): random tiny BLOOM and GPT-NeoX
models made here with transformers and opened through the app's own loader; every head's case (its own slope, RoPE on
its first dims), the forward pass, the logits and the greedy tokens with and without the cache; the picker's line
saying the family's attention."""

import json
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
from attention.whole import compute as whole
from tests.test_families import (  # noqa: F401 (vocabulary and tokenizers: the fixtures the tokenizers come from)
    NEEDS_TOKENIZERS,
    SENTENCE,
    carried,
    chain_terms,
    forward_is_transformers,
    greedy_is_transformers,
    randomized,
    tokenizers,
    vocabulary,
    weights_tolerance,
)

transformers = pytest.importorskip("transformers")
pytestmark = NEEDS_TOKENIZERS
TOKENS = {"pad_token_id": None, "bos_token_id": 1, "eos_token_id": 2}  # within the byte vocabulary
BLOOM = ("self_attention", "self_attention.dense")  # what a block's attention reads, its heads side by side
NEOX = ("attention", "attention.dense")
# name: (transformers' classes, config, the picker's line in English, the attention's module and its output
# projection's in a block); 6 heads: ALiBi's slopes of 4 heads and 2 more of 8's (transformers' two branches); GPT-NeoX
# with Pythia's defaults (parallel residual, exact GELU, biases, untied) and with each of them the other way
FAMILIES = {
    "bloom": ("BloomConfig", "BloomForCausalLM", {"hidden_size": 48, "n_layer": 2, "n_head": 6, **TOKENS},
              "bloom · ALiBi", BLOOM),
    "bloom-untied": ("BloomConfig", "BloomForCausalLM", {"hidden_size": 32, "n_layer": 2, "n_head": 4,
                     "tie_word_embeddings": False, **TOKENS}, "bloom · ALiBi", BLOOM),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"hidden_size": 64, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "intermediate_size": 128, "rotary_pct": 0.25, **TOKENS},
                 "gpt_neox · RoPE on 25% of each head", NEOX),
    "gpt_neox-sequential": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"hidden_size": 32, "num_hidden_layers": 2,
                            "num_attention_heads": 4, "intermediate_size": 64, "rotary_pct": 0.5,
                            "use_parallel_residual": False, "hidden_act": "gelu_new", "attention_bias": False,
                            "tie_word_embeddings": True, **TOKENS}, "gpt_neox · RoPE on 50% of each head", NEOX),
}  # fmt: skip
SEEDS = {"bloom": 11}  # a tied BLOOM tends to say its last token again: this one's random weights say several


def make(family: str, folder: Path, tokenizer: Path) -> torch.nn.Module:
    """A random model of the family with transformers, saved with safetensors and the tokenizer into folder."""
    config_class, model_class, sizes, _, _ = FAMILIES[family]
    vocab = json.loads(tokenizer.read_text())["model"]["vocab"]
    config = getattr(transformers, config_class)(vocab_size=len(vocab), **sizes)
    model = getattr(transformers, model_class)(config)
    randomized(model, seed=SEEDS.get(family, len(family))).save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    return getattr(transformers, model_class).from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tokenizers, tmp_path_factory) -> tuple[models.Model, torch.nn.Module, str]:  # noqa: F811
    """The app's model from its folder, and transformers' own of the same folder."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = make(request.param, folder, tokenizers["byte"])
    return sources.open_model(folder), hf, request.param


def seen(hf: torch.nn.Module, ids: list[int], family: str) -> tuple[dict, dict, object]:
    """transformers on the ids: per layer what its attention reads and its heads' outputs side by side (the input of
    the attention's output projection), caught by hooks; and its output (attentions, logits)."""
    caught, hooks = ({}, {}), []
    for layer, block in enumerate(hf.base_model.h if hasattr(hf.base_model, "h") else hf.base_model.layers):
        for name, into in zip(FAMILIES[family][4], caught, strict=True):

            def hook(module, args, kwargs, into=into, layer=layer) -> None:
                into[layer] = (args[0] if args else kwargs["hidden_states"])[0]

            hooks.append(block.get_submodule(name).register_forward_pre_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            out = hf(torch.tensor([ids]), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    return *caught, out


def test_the_spec_and_the_picker_line_are_transformers(pair):
    """BLOOM: ALiBi's slopes as transformers' build_alibi_tensor makes them (one per head, m_h · j on key j), no RoPE.
    GPT-NeoX: RoPE's frequencies of the turned dims as transformers' rotary embedding, no ALiBi."""
    model, hf, family = pair
    s, c = model.spec, hf.config
    assert s.model_type == c.model_type and s.vocab == c.vocab_size
    assert render("en", models.family_line(s)) == FAMILIES[family][3]
    caption = str(models.about(s))
    if s.model_type == "bloom":
        assert s.rope_base is None and s.rope_fraction is None and s.bias
        ones = torch.ones(1, 2, dtype=torch.long)
        theirs = transformers.models.bloom.modeling_bloom.build_alibi_tensor(ones, s.heads, torch.float32)
        assert s.alibi == tuple(theirs[:, 0, 1].tolist())  # key 1's bias: the slope itself
        assert len(set(s.alibi)) == s.heads
        assert "ALiBi（" in render("zh", models.family_line(s))
        assert "ALiBi" in caption and "learned" not in caption  # no learned positions
    else:
        assert s.alibi is None and s.bias == c.attention_bias and s.tied == c.tie_word_embeddings
        assert s.rope_fraction == c.rope_parameters["partial_rotary_factor"] < 1
        theta = rope_theta(s, rotary_dims(s.head_dim, s.rope_fraction))
        torch.testing.assert_close(theta, hf.base_model.rotary_emb.inv_freq.double(), rtol=1e-6, atol=0)  # float32
        assert s.family.parallel == c.use_parallel_residual
        assert "%" in render("zh", models.family_line(s))


def test_an_older_gpt_neox_config_reads_as_transformers_reads_it():
    """Pythia's config.json names RoPE's fraction and base rotary_pct and rotary_emb_base; another scaling, a
    fraction that turns an odd number of dims, or another activation is named."""
    config = {"model_type": "gpt_neox", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "vocab_size": 100, "rotary_pct": 0.5, "rotary_emb_base": 500}  # fmt: skip
    theirs = transformers.GPTNeoXConfig(**{k: v for k, v in config.items() if k != "model_type"})
    sizes = sources.family_of(config, Path("config.json")).sizes(config)
    assert (sizes["rope_fraction"], sizes["rope_base"]) == (0.5, 500.0)
    assert sizes["rope_fraction"] == theirs.rope_parameters["partial_rotary_factor"]
    assert sizes["rope_base"] == theirs.rope_parameters["rope_theta"]
    for wrong in ({"rotary_pct": 0.2}, {"hidden_act": "relu"}, {"rope_scaling": {"rope_type": "linear", "factor": 2}}):
        with pytest.raises(ValueError):
            sources.family_of(config, Path("config.json")).sizes({**config, **wrong})


def test_the_whole_models_weights_are_its_forward_pass(pair):
    """The whole-model view's weights of every head (attention/whole) are the forward pass's, ALiBi's bias in them."""
    model, _, _ = pair
    run = model.run(SENTENCE)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    assert torch.equal(whole.weights(model, run), own)


def test_every_head_of_every_layer_through_the_eight_steps_equals_transformers(pair):
    """Each head as a case with its own slope: its weights as transformers' output_attentions (BLOOM adds m_h · j,
    the core subtracts m_h (i − j): a row's constant, the same softmax), its output as transformers' head and as the
    model's own, within the one rule."""
    model, hf, family = pair
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, out = seen(hf, ids, family)
    own = model.run(SENTENCE)
    run = replace(own, inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    s, d = model.spec, model.spec.head_dim
    for layer in range(s.layers):
        whole_layer = models.layer_case(model, own, layer)  # every head at once: every slope, the fraction
        assert whole_layer.options.alibi == s.alibi and whole_layer.options.rope_fraction == s.rope_fraction
        trace = attend(whole_layer)
        heads = own.head_outputs[layer].transpose(0, 1).flatten(1)  # (n, h · d): side by side
        assert within(trace.outputs, heads, tolerance(whole_layer, trace.__getitem__, projected=True)), layer
        for head in range(s.heads):
            case = models.head_case(model, run, layer, head)
            assert case.options.alibi == (None if s.alibi is None else (s.alibi[head],))
            assert case.options.rope_fraction == s.rope_fraction
            assert (case.options.rope_base is None) == (s.alibi is not None)
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
    model, hf, family = pair
    forward_is_transformers(model, hf, lambda hf, ids: seen(hf, ids, family))


def test_without_its_attention_the_model_is_not_transformers(pair):
    """ALiBi and partial rotary matter on this sentence: the same model without ALiBi, or with RoPE on whole heads, is
    off transformers' logits by more than the rule."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    s = model.spec
    other = replace(s, alibi=tuple(0.0 for _ in s.alibi)) if s.alibi else replace(s, rope_fraction=None)
    plain = models.Model(other, model.weights, model.tokenizer)
    with torch.inference_mode():
        logits = plain.spec.family.forward(plain, torch.tensor(ids)).logits
        theirs = hf(torch.tensor([ids])).logits[0, -1]
    assert not within(logits[0], theirs, carried(theirs, chain_terms(model.spec, len(ids))))


def test_greedy_tokens_with_and_without_the_cache_are_transformers(pair):
    greedy_is_transformers(pair[0], pair[1])


def test_a_gpt_neox_file_naming_its_output_layer_either_way_opens(tokenizers, tmp_path):  # noqa: F811
    """Pythia's files, and transformers' save_pretrained, name the output layer embed_out (the tests above); a file
    written from the loaded model's own names calls it lm_head: both are read."""
    from safetensors.torch import load_file, save_file

    hf = make("gpt_neox", tmp_path, tokenizers["byte"])
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["lm_head.weight"] = tensors.pop("embed_out.weight")
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    model = sources.open_model(tmp_path)
    ids, _ = model.tokenize(SENTENCE)
    with torch.inference_mode():
        logits = model.spec.family.forward(model, torch.tensor(ids)).logits[0]
        theirs = hf(torch.tensor([ids])).logits[0, -1]
    assert within(logits, theirs, carried(theirs, chain_terms(model.spec, len(ids))))
