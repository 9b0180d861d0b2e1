"""Every family's adapter against transformers (the oracle): small random models of each family made here with
transformers and saved in Hugging Face's layout, and a random llama GGUF file (8-bit), each opened through the app's
own loader; every layer's every head's weights and outputs, the logits, the greedy tokens with and without the
cache; and a broken folder or file a message naming it."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from attention import attend, models
from attention.base.case import CaseError
from attention.base.tolerance import (
    heads_of,
    latent_error,
    normed_error,
    product_error,
    rounding,
    turned_error,
    within,
)
from attention.forward.compute import rope_theta, scale_factor, tolerance
from attention.models import sources
from attention.models.generate import _stop_ids, generate

transformers = pytest.importorskip("transformers")
# the random models' tokenizers come from the shipped ones: every family's test file is skipped without them
NEEDS_TOKENIZERS = pytest.mark.skipif(
    models.missing("smollm2") or models.missing("minilm"), reason="the shipped models' tokenizers (model packages)"
)
pytestmark = NEEDS_TOKENIZERS
SENTENCE = "The cat sat on the mat because it was tired"
SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64}
# family: (transformers' classes, config, tokenizer); sizes chosen so each path is taken: grouped-query attention,
# a head width that is not hidden / heads (Qwen3), a tied and an untied output layer, RoPE's scalings: Llama 3's (with
# an original length of 32 its 4 pairs' wavelengths 6, 30, 140 and 664 fall in all three of its bands), linear, YaRN
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32, "rope_theta": 500.0}  # fmt: skip
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rope_theta": 1e4}
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {**SMALL, "num_key_value_heads": 2, "rope_parameters": LLAMA3},
              "byte"),
    "mistral": ("MistralConfig", "MistralForCausalLM", {**SMALL, "num_key_value_heads": 1, "tie_word_embeddings": True,
                "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
                "byte"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {**SMALL, "num_key_value_heads": 2, "rope_parameters": YARN,
              "max_position_embeddings": 64}, "byte"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**SMALL, "num_key_value_heads": 2, "head_dim": 16}, "byte"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64}, "byte"),
    "bert": ("BertConfig", "BertModel", {**SMALL, "max_position_embeddings": 64}, "word"),
    "roberta": ("RobertaConfig", "RobertaModel", {**SMALL, "max_position_embeddings": 66, "pad_token_id": 1}, "byte"),
}  # fmt: skip
NEW_TOKENS = 6
VOCAB = 2048


def strings(reader, key: str) -> list[str]:
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def gguf_writer(path: Path, vocabulary: tuple[list[str], list[str]]):
    """A GGUF writer of the llama architecture, with the byte-level tokenizer's tokens and merges in the file."""
    from gguf import GGUFWriter

    writer = GGUFWriter(path, "llama")
    writer.add_token_list(vocabulary[0]), writer.add_token_merges(vocabulary[1])
    writer.add_tokenizer_model("gpt2"), writer.add_tokenizer_pre("smollm")
    return writer


def written(writer) -> None:
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()


@pytest.fixture(scope="module")
def vocabulary() -> tuple[list[str], list[str]]:
    """SmolLM2's first VOCAB tokens (its special tokens, the bytes, its first merges' results) and the merges that
    make them: a byte-level BPE tokenizer with a small embedding, quick to make and read."""
    reader = sources.gguf_reader(models.files("smollm2")["SmolLM2-135M-Instruct.Q4_1.gguf"])
    tokens = strings(reader, "tokenizer.ggml.tokens")[:VOCAB]
    kept = set(tokens)
    merges = [m for m in strings(reader, "tokenizer.ggml.merges") if {*m.split(" "), m.replace(" ", "")} <= kept]
    return tokens, merges


@pytest.fixture(scope="module")
def tokenizers(vocabulary, tmp_path_factory) -> dict[str, Path]:
    """tokenizer.json files from the shipped models: SmolLM2's byte-level BPE (cut to VOCAB tokens, rebuilt by the
    app's GGUF reader) and MiniLM's word pieces."""
    folder = tmp_path_factory.mktemp("tokenizers")
    written(gguf_writer(folder / "vocabulary.gguf", vocabulary))
    gguf = folder / "vocabulary.gguf"
    sources.gguf_tokenizer(sources.gguf_reader(gguf), gguf).save(str(folder / "byte.json"))
    shutil.copy(models.files("minilm")["tokenizer.json"], folder / "word.json")
    return {"byte": folder / "byte.json", "word": folder / "word.json"}


def randomized(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Weights far from transformers' small initialisation (sharp attention, logits far apart), from a seed."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            norm = "norm" in name.lower() or ".ln_" in name or name.startswith("ln_f")
            p.copy_(1 + 0.2 * noise if norm and name.endswith("weight") else 0.3 * noise)
    return model.eval()


def make(family: str, folder: Path, tokenizer: Path, entry: tuple | None = None) -> torch.nn.Module:
    """A random model of the family with transformers (its classes and config from FAMILIES, or `entry`: another
    file's), saved with safetensors and the tokenizer into folder."""
    config_class, model_class, sizes = entry or FAMILIES[family][:3]
    vocab = json.loads(tokenizer.read_text())["model"]["vocab"]
    config = getattr(transformers, config_class)(vocab_size=len(vocab), **sizes)
    model = getattr(transformers, model_class)(config)
    randomized(model, seed=len(family)).save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    return getattr(transformers, model_class).from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tokenizers, tmp_path_factory) -> tuple[models.Model, torch.nn.Module, Path]:
    """The app's model from its folder, and transformers' own of the same folder."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = make(request.param, folder, tokenizers[FAMILIES[request.param][3]])
    return sources.open_model(folder), hf, folder


def seen(hf: torch.nn.Module, ids: list[int]) -> tuple[dict, dict, object]:
    """transformers on the ids: per layer what its attention reads and its heads' outputs side by side (the input of
    the attention's output projection), caught by hooks; and its output (attentions, logits)."""
    body = getattr(hf, "model", None) or getattr(hf, "transformer", None) or hf
    blocks = getattr(body, "layers", None) or getattr(body, "h", None) or body.encoder.layer
    attention = {"self_attn": "self_attn.o_proj", "attn": "attn.c_proj", "attention": "attention.output.dense"}
    names = next(
        (n if n != "attention" else "attention.self", out) for n, out in attention.items() if hasattr(blocks[0], n)
    )
    caught, hooks = ({}, {}), []
    for layer, block in enumerate(blocks):
        for name, into in zip(names, caught, strict=True):

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


def weights_tolerance(case, trace) -> torch.Tensor:
    """How far another float computation of step 5's weights may be from the trace's, by the one rule: a score s_ij
    is off by σ_ij (its sum of d products, q's and k's projections, RoPE's turn), which moves weight w_ij by at
    most w_ij (σ_ij + Σ_k w_ik σ_ik)."""
    dtype, m = torch.float32, abs(scale_factor(case))
    x, q, k = (trace[name].double() for name in ("x", "queries", "keys"))
    x_kv = trace["x_kv"].double() if case.cross else x  # cross-attention's keys: from the other sentence's rows
    o = case.options
    e_q = heads_of(product_error(x, trace["w_query"], dtype), 1, q.shape[-1])[0]  # (n, d)
    latent = None  # DeepSeek's MLA: keys read the latent, which has its own error
    if o.w_latent is not None:
        latent = (trace["w_latent"], trace["latent_unnormed" if o.latent_norm else "latent"], o.latent_norm, o.norm_eps)
    read, e_read = latent_error(x_kv, latent, dtype)
    w_key = trace["w_key"].double()
    e_k = heads_of(product_error(read, w_key, dtype) + e_read @ w_key.abs(), 1, k.shape[-1])[0]
    if o.q_norm is not None:  # Qwen3's norm, then RoPE
        e_q = normed_error(e_q, trace["queries_unnormed"], o.q_norm, o.norm_eps, dtype)
        e_k = normed_error(e_k, trace["keys_unnormed"], o.k_norm, o.norm_eps, dtype)
    if o.rope_base is not None:
        e_q, e_k = turned_error(e_q, q, dtype), turned_error(e_k, k, dtype)
    sigma = m * (rounding(q.shape[-1], dtype) * (q.abs() @ k.abs().T) + e_q @ k.abs().T + q.abs() @ e_k.T)
    sigma = sigma + 4 * torch.finfo(dtype).eps
    w = trace["weights"].double()
    return w * (sigma + (w * sigma).sum(-1, keepdim=True)) + 16 * torch.finfo(dtype).tiny


def carried(reference: torch.Tensor, terms: int) -> torch.Tensor:
    """The one rule, √K · eps · Σ|terms|, for a number at the end of a chain of K terms summed in all (a whole
    model's), with the largest |number| of the reference as its Σ|terms| (every sum on the way is of that size)."""
    return rounding(terms, torch.float32) * reference.abs().max().double() * torch.ones_like(reference.double())


def chain_terms(spec, n: int) -> int:
    """The terms a model sums on the way to its last layer's output: per layer its projections, scores, weighted
    sum, output projection and MLP (4 d wide)."""
    return (spec.layers + 1) * (3 * spec.width + 2 * spec.head_dim + n + 4 * spec.width)


def test_every_family_is_one_of_the_supported_ones():
    # SmolLM3's: tests/test_families_2026.py; Gemma 2's and 3's: tests/test_families_gemma.py; BLOOM's and
    # GPT-NeoX's: tests/test_families_bloom_neox.py; gpt-oss's: tests/test_families_gpt_oss.py; Phi-3's:
    # tests/test_families_phi3.py; OLMo 2's: tests/test_families_olmo2.py; DeepSeek's: tests/test_families_deepseek.py;
    # the encoder-decoders' (BART, mBART, Marian, T5): tests/test_encoder_decoder.py
    others = ("smollm3", "gemma2", "gemma3_text", "bloom", "gpt_neox", "gpt_oss", "phi3", "olmo2", "deepseek_v2",
              "deepseek_v3")  # fmt: skip
    others += ("bart", "mbart", "marian", "t5")
    assert (*FAMILIES, *others) == sources.SUPPORTED


def test_every_head_of_every_layer_through_the_eight_steps_equals_transformers(pair):
    """The layer's input as transformers computes it, through each head's eight steps: its weights as
    transformers' output_attentions, its output as transformers' head, each number within the one rule."""
    model, hf, _ = pair
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, out = seen(hf, ids)
    run = replace(model.run(SENTENCE), inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    d, s = model.spec.head_dim, model.spec
    for layer in range(s.layers):
        for head in range(s.heads):
            case = models.head_case(model, run, layer, head)
            assert (case.options.q_norm is not None) == getattr(s.family, "qk_norm", False)  # Qwen3's step 3a
            trace = attend(case)
            expected = hf_heads[layer][:, head * d : (head + 1) * d]
            assert within(trace.outputs, expected, tolerance(case, trace.__getitem__, projected=True)), (layer, head)
            assert within(trace["weights"], out.attentions[layer][0, head], weights_tolerance(case, trace))
            assert (case.options.mask == "causal") == s.causal


def test_the_forward_pass_equals_transformers_layer_by_layer_and_in_its_logits(pair):
    forward_is_transformers(pair[0], pair[1])


def forward_is_transformers(model: models.Model, hf, caught=seen, weights: bool = True) -> None:
    """The model's forward pass on the sentence against transformers', layer by layer (what each attention reads,
    its heads' outputs side by side, its weights unless `weights` is False) and in the last logits (an encoder
    has none), each within the one rule; `caught`: how transformers' layers are hooked (seen, or a family's own)."""
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, out = caught(hf, ids)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(ids))
    terms = chain_terms(model.spec, len(ids))
    for layer in range(model.spec.layers):
        heads = own.head_outputs[layer].transpose(0, 1).flatten(1)  # (n, h · d): side by side, as transformers'
        assert within(own.inputs[layer], hf_x[layer], carried(hf_x[layer], terms)), layer
        assert within(heads, hf_heads[layer], carried(hf_heads[layer], terms)), layer
        if weights:
            assert within(own.weights[layer], out.attentions[layer][0], carried(torch.ones(1), terms)), layer
    if model.spec.causal:
        assert within(own.logits[0], out.logits[0, -1], carried(out.logits[0, -1], terms))
    else:
        assert own.logits is None


def test_greedy_tokens_with_and_without_the_cache_are_transformers(pair):
    if not pair[0].spec.causal:
        pytest.skip("an encoder generates nothing")
    greedy_is_transformers(pair[0], pair[1])


def greedy_is_transformers(model: models.Model, hf) -> None:
    """The model's greedy tokens after the sentence, with the cache and without, are transformers' own."""
    ids, _ = model.tokenize(SENTENCE)
    cached, uncached = (generate(model, SENTENCE, NEW_TOKENS, cached=c) for c in (True, False))
    assert cached.new_ids == uncached.new_ids == their_tokens(hf, model, ids)
    assert len(set(cached.new_ids)) > 1  # the random model says something, not one token again and again


def their_tokens(hf: torch.nn.Module, model: models.Model, ids: list[int]) -> tuple[int, ...]:
    """transformers' greedy generate, stopping where the app stops."""
    with torch.inference_mode():
        made = hf.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                           eos_token_id=sorted(_stop_ids(model)) or None, pad_token_id=0)  # fmt: skip
    return tuple(made[0, len(ids) :].tolist())


def test_the_spec_comes_from_the_config(pair):
    model, hf, folder = pair
    s, c = model.spec, hf.config
    assert (s.layers, s.width, s.heads) == (c.num_hidden_layers, c.hidden_size, c.num_attention_heads)
    assert s.kv_heads == getattr(c, "num_key_value_heads", c.num_attention_heads)
    assert s.head_dim == (getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads)
    assert s.rope_base == (None if c.model_type in ("gpt2", "bert", "roberta") else c.rope_parameters["rope_theta"])
    assert s.name == folder.name and s.vocab == c.vocab_size
    if s.rope_base is not None:  # RoPE's frequencies, scaled or not, and YaRN's factor: transformers' own
        rotary = hf.base_model.rotary_emb
        torch.testing.assert_close(rope_theta(s, s.head_dim), rotary.inv_freq.double(), rtol=1e-6, atol=0)  # float32
        assert s.rope_attention == pytest.approx(rotary.attention_scaling)
        assert s.rope_scaling == (c.rope_parameters["rope_type"] if s.rope_frequencies is not None else None)
        assert (s.rope_scaling or "RoPE.") in str(models.about(s))  # the caption names its scaling


# A llama GGUF file ------------------------------------------------------------------------------------------------


def gguf_rows(t: torch.Tensor, heads: int) -> np.ndarray:
    """Hugging Face's q or k rows as llama.cpp's converter writes them: each head's dims p and p + d/2 paired."""
    return t.unflatten(0, (heads, 2, -1)).transpose(1, 2).flatten(0, 2).numpy()


@pytest.fixture(scope="module")
def gguf_pair(vocabulary, tokenizers, tmp_path_factory) -> tuple[models.Model, torch.nn.Module, Path]:
    """A random llama model written as an 8-bit (Q8_0) GGUF file with the gguf package's writer, and transformers'
    model holding the same 8-bit weights (quantized and dequantized again)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    folder = tmp_path_factory.mktemp("gguf")
    hf = make("llama", folder, tokenizers["byte"])
    c, q8 = hf.config, GGMLQuantizationType.Q8_0
    path = folder / "tiny-llama.Q8_0.gguf"
    writer = gguf_writer(path, vocabulary)
    writer.add_block_count(c.num_hidden_layers), writer.add_context_length(64)
    writer.add_embedding_length(c.hidden_size), writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads), writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_rope_freq_base(c.rope_parameters["rope_theta"]), writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    d, inv_freq = c.hidden_size // c.num_attention_heads, hf.model.rotary_emb.inv_freq.double()
    paper = c.rope_parameters["rope_theta"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    writer.add_tensor("rope_freqs.weight", (paper / inv_freq).float().numpy())  # Llama 3's scaling, as llama.cpp's
    gguf_names = {hf_name: gguf for gguf, hf_name in sources.GGUF_NAMES.items()}
    state = hf.state_dict()
    with torch.no_grad():
        for name, t in state.items():
            short = name.removeprefix("model.").removesuffix(".weight")
            if short.startswith("layers."):
                _, layer, part = short.split(".", 2)
                gguf_name = f"blk.{layer}.{gguf_names[part]}.weight"
            else:
                gguf_name = f"{gguf_names[short]}.weight"
            heads = {"q_proj": c.num_attention_heads, "k_proj": c.num_key_value_heads}.get(short.rsplit(".", 1)[-1])
            array = gguf_rows(t, heads) if heads else t.numpy()
            if array.ndim == 2:  # 8-bit: transformers gets the weights the file really holds
                packed = quantize(array, q8)
                writer.add_tensor(gguf_name, packed, raw_shape=packed.shape, raw_dtype=q8)
                t.copy_(torch.tensor(dequantize(packed, q8).reshape(t.shape[0], -1)))
                if heads:  # back into Hugging Face's order of rows
                    t.copy_(t.unflatten(0, (heads, -1, 2)).transpose(1, 2).flatten(0, 2))
            else:
                writer.add_tensor(gguf_name, array)
    written(writer)
    hf.load_state_dict(state)
    return sources.open_model(path), hf, path


def test_a_llama_gguf_file_8_bit_equals_transformers_on_its_weights(gguf_pair):
    model, hf, path = gguf_pair
    assert model.spec.quantized == "Q8_0" and model.spec.name == path.stem and not model.spec.tied
    assert model.spec.rope_scaling == "llama3"  # its rope_freqs tensor
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, out = seen(hf, ids)
    run = replace(model.run(SENTENCE), inputs=torch.stack([hf_x[layer] for layer in range(model.spec.layers)]))
    d = model.spec.head_dim
    for layer in range(model.spec.layers):
        for head in range(model.spec.heads):
            case = models.head_case(model, run, layer, head)
            trace = attend(case)
            expected = hf_heads[layer][:, head * d : (head + 1) * d]
            assert within(trace.outputs, expected, tolerance(case, trace.__getitem__, projected=True)), (layer, head)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(ids))
    assert within(own.logits[0], out.logits[0, -1], carried(out.logits[0, -1], chain_terms(model.spec, len(ids))))
    cached, uncached = (generate(model, SENTENCE, NEW_TOKENS, cached=c) for c in (True, False))
    assert cached.new_ids == uncached.new_ids == their_tokens(hf, model, ids)


def test_a_sentencepiece_vocabulary_in_a_gguf_file_cuts_as_transformers_cuts_it(tmp_path):
    """Llama 2's and Mistral's GGUF files hold SentencePiece's pieces and scores, not merges: the app rebuilds the
    tokenizer as transformers does (its <s>, its ▁ for a space, bytes for what no piece covers)."""
    from gguf import GGUFWriter

    pieces = ["▁", "▁the", "▁cat", "at", "he", "▁t", "▁c", "▁s", "ir", "ed", "▁m", "▁w", "as", "▁b", "ca", "use"]
    letters = sorted(set("".join(pieces)) - {"▁"})
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *letters, *pieces]
    scores = [0.0] * 259 + [-100.0 - i for i in range(len(letters))] + [-float(i) for i in range(len(pieces))]
    writer = GGUFWriter(tmp_path / "spm.gguf", "llama")
    writer.add_tokenizer_model("llama"), writer.add_token_list(tokens), writer.add_token_scores(scores)
    writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * (len(tokens) - 259))
    writer.add_bos_token_id(1), writer.add_eos_token_id(2), writer.add_unk_token_id(0)
    writer.add_tensor("token_embd.weight", np.zeros((len(tokens), 8), np.float32))
    written(writer)
    ours = sources.gguf_tokenizer(sources.gguf_reader(tmp_path / "spm.gguf"), tmp_path / "spm.gguf")
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="spm.gguf")
    for sentence in (SENTENCE, "the  cat\nZ é", "Thermal"):
        ids = ours.encode(sentence).ids
        assert ids == theirs(sentence)["input_ids"] and ids[0] == 1, sentence
        assert ours.decode(ids) == sentence
    assert models.Model(None, {}, ours).readable("▁cat") == "␣cat"


# Broken inputs: a message naming the file and the problem ----------------------------------------------------------


@pytest.fixture
def folder(tokenizers, tmp_path_factory, pair) -> Path:
    """A copy of a good folder (the first family's), to break."""
    copy = tmp_path_factory.mktemp("broken") / "model"
    shutil.copytree(pair[2], copy)
    return copy


def message(path: Path) -> str:
    with pytest.raises(CaseError) as e:
        sources.open_model(path)
    assert "Traceback" not in str(e.value) and len(str(e.value)) < 300
    return str(e.value)


@pytest.mark.parametrize("pair", ["llama"], indirect=True)
def test_broken_folders_say_which_file_and_what(folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "tokenizer.json").rename(folder / "kept.json")
    assert message(folder) == f"{folder}: has no tokenizer.json"
    (folder / "kept.json").rename(folder / "tokenizer.json")
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[: len(weights) // 2])  # truncated
    assert message(folder).startswith(f"{folder / 'model.safetensors'}: cannot be read: ")
    (folder / "model.safetensors").unlink()
    assert message(folder) == f"{folder}: has no model.safetensors"  # a config without weights
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 48}))  # weights not of this config
    assert message(folder) == (
        f"{folder / 'model.safetensors'}: holds embed_tokens.weight as (2048, 32), not (2048, 48) as the config says"
    )
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    assert message(folder) == (
        f"{folder / 'model.safetensors'}: has no tensor layers.2.input_layernorm.weight, which the config calls for"
    )
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "mamba", "architectures": ["MambaModel"]}))
    assert message(folder) == (
        f"{folder / 'config.json'}: is mamba, not an architecture this app computes "
        "(it computes: llama, mistral, qwen2, qwen3, gpt2, bert, roberta, smollm3, gemma2, gemma3_text, bloom, "
        "gpt_neox, gpt_oss, phi3, olmo2, deepseek_v2, deepseek_v3, bart, mbart, marian, t5)"
    )
    (folder / "config.json").write_text(json.dumps({**config, "num_attention_heads": "four"}))
    assert message(folder).startswith(f"{folder / 'config.json'}: cannot be read: ")
    (folder / "config.json").write_text("{not json")
    assert message(folder).startswith(f"{folder / 'config.json'}: cannot be read: ")
    (folder / "config.json").unlink()
    assert message(folder) == f"{folder}: has no config.json"


@pytest.mark.parametrize("pair", ["llama"], indirect=True)
def test_a_sharded_folder_opens_and_a_missing_shard_is_named(pair, tmp_path):
    model, hf, _ = pair
    hf.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="100KB")
    shutil.copy(pair[2] / "tokenizer.json", tmp_path)
    shards = sorted(tmp_path.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and not (tmp_path / "model.safetensors").exists()
    opened = sources.open_model(tmp_path)
    assert all(torch.equal(opened.weights[name], w) for name, w in model.weights.items())
    shards[-1].unlink()
    assert message(tmp_path) == f"{shards[-1]}: is missing: model.safetensors.index.json lists it"


def test_a_gguf_file_of_another_architecture_or_truncated_is_named(tmp_path, gguf_pair):
    from gguf import GGUFWriter

    path = tmp_path / "other.gguf"
    writer = GGUFWriter(path, "gpt2")
    writer.add_block_count(1)
    written(writer)
    assert message(path) == (
        f"{path}: is GGUF gpt2, not an architecture this app computes "
        "(it computes: GGUF llama, qwen2, qwen3, gemma2, gemma3, phi3)"
    )
    good = gguf_pair[2].read_bytes()
    path.write_bytes(good[: len(good) // 2])
    assert message(path).startswith(f"{path}: cannot be read: ")


def test_a_rope_scaling_it_does_not_compute_is_named(tmp_path):
    rope = {"rope_type": "longrope", "rope_theta": 5e5, "factor": 8.0}
    config = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 4,
              "vocab_size": 10, "rope_parameters": rope}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert (
        message(tmp_path)
        == f"{tmp_path / 'config.json'}: asks for RoPE scaling longrope, which this app does not compute"
    )
