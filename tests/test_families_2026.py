"""Today's attention in real families against transformers (the oracle): random tiny Mistral and Qwen2 models with a
sliding window of 3 (on every layer, past max_window_layers) and SmolLM3 models with NoPE layers, made here with
transformers and opened through the app's own loader; every head's case (its window, its RoPE or none), the forward
pass, the logits and the greedy tokens with and without the cache; the picker's line saying the family's attention."""

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
from attention.models.llama import nope_layers, sliding_windows
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
SMOL = {**SMALL, "num_hidden_layers": 4, "pad_token_id": None, "bos_token_id": 1, "eos_token_id": 2}  # in its vocab
WINDOW = 3  # the sentence has 11 tokens: most queries see fewer keys than causal attention would let them
# name: (transformers' classes, config, the picker's line in English)
FAMILIES = {
    "mistral": ("MistralConfig", "MistralForCausalLM", {**SMALL, "num_key_value_heads": 2, "sliding_window": WINDOW},
                "mistral · sliding 3 on every layer"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {**SMALL, "num_key_value_heads": 2, "use_sliding_window": True,
              "sliding_window": WINDOW, "max_window_layers": 1}, "qwen2 · sliding 3 on layers 2"),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {**SMOL, "num_key_value_heads": 2, "no_rope_layer_interval": 2},
                "smollm3 · NoPE on layers 2, 4"),
    "smollm3-sliding": ("SmolLM3Config", "SmolLM3ForCausalLM", {**SMOL, "no_rope_layer_interval": 4,
                        "use_sliding_window": True, "sliding_window": WINDOW},
                        "smollm3 · sliding 3 on every 4th layer · NoPE on every 4th layer"),
}  # fmt: skip


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


def their_windows(hf: torch.nn.Module) -> tuple[int | None, ...]:
    """Each layer's window as transformers' model applies it: Mistral's config's on every layer, the others' on the
    layers their attention holds one."""
    c, layers = hf.config, hf.model.layers
    if c.model_type == "mistral":
        return tuple(c.sliding_window for _ in layers)
    return tuple(layer.self_attn.sliding_window for layer in layers)


def test_the_windows_and_nope_layers_are_transformers(pair):
    model, hf, family = pair
    s = model.spec
    assert (s.windows or (None,) * s.layers) == their_windows(hf)
    use_rope = [getattr(layer.self_attn, "use_rope", True) for layer in hf.model.layers]
    assert s.no_rope == tuple(i for i, turned in enumerate(use_rope) if not turned)
    assert (len(s.no_rope) > 0) == family.startswith("smollm3")
    assert render("en", models.family_line(s)) == FAMILIES[family][3]
    assert "层" in render("zh", models.family_line(s))


def test_qwens_default_layer_types_are_transformers():
    """Without layer_types in the file: Qwen2's windows from max_window_layers on, SmolLM3's NoPE layers, as
    transformers' configs make them; no window without use_sliding_window."""
    for kind, extra in (("qwen2", {"max_window_layers": 2}), ("smollm3", {"no_rope_layer_interval": 3})):
        config = {"model_type": kind, "num_hidden_layers": 6, "use_sliding_window": True, "sliding_window": 5, **extra}
        theirs = getattr(transformers, FAMILIES[kind][0])(**config)
        expected = tuple(5 if t == "sliding_attention" else None for t in theirs.layer_types)
        assert sliding_windows(config) == expected and any(expected)
        assert sliding_windows({**config, "use_sliding_window": False}) is None
    assert nope_layers(config) == tuple(i for i, turned in enumerate(theirs.no_rope_layers) if not turned) == (2, 5)


def test_every_head_of_every_layer_through_the_eight_steps_equals_transformers(pair):
    """Each head as a case, its window and its RoPE (or none) the layer's: its weights as transformers'
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
            assert case.options.window == (s.windows[layer] if s.windows else None)
            assert (case.options.rope_base is None) == (layer in s.no_rope)
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


def test_without_its_windows_or_with_rope_everywhere_the_model_is_not_transformers(pair):
    """The windows and the NoPE layers matter on this sentence: the same model with plain causal attention and RoPE
    on every layer is off transformers' logits by more than the rule."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    plain = models.Model(replace(model.spec, windows=None, no_rope=()), model.weights, model.tokenizer)
    with torch.inference_mode():
        logits = plain.spec.family.forward(plain, torch.tensor(ids)).logits
        theirs = hf(torch.tensor([ids])).logits[0, -1]
    assert not within(logits[0], theirs, carried(theirs, chain_terms(model.spec, len(ids))))


def test_greedy_tokens_with_and_without_the_cache_are_transformers(pair):
    greedy_is_transformers(pair[0], pair[1])


def test_the_whole_models_weights_are_its_forward_pass(pair):
    """The whole-model view's weights of every head (attention/whole) are the forward pass's: its windows and NoPE
    layers in them (its shortcut from the recorded inputs knows neither, so the pass runs again)."""
    from attention.whole import compute as whole

    model, _, _ = pair
    run = model.run(SENTENCE)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(run.ids)).weights
    assert torch.equal(whole.weights(model, run), own)
