"""GGUF files of llama.cpp's qwen2, qwen3, gemma2, gemma3 and phi3 architectures against transformers' own GGUF loader
(the oracle): random tiny models made here with transformers, written in 8 bits (Q8_0) as llama.cpp's converter writes
them (its metadata keys, the gguf package's tensor names, Gemma's norms as 1 + γ, Phi-3's fused projections and
LongRoPE factors), opened through the app's loader; the spec, every head's case, the forward pass, the logits and the
greedy tokens with and without the cache; each convention of the converter matters; other architectures refused."""

import json
import math
import shutil
from dataclasses import fields, replace
from pathlib import Path

import pytest
import torch

from attention import attend, models
from attention.base.i18n import render
from attention.base.tolerance import within
from attention.forward.compute import tolerance
from attention.models import offered, sources
from attention.models.generate import generate
from tests.test_families import (  # noqa: F401 (vocabulary and tokenizers: the fixtures the tokenizers come from)
    NEEDS_TOKENIZERS,
    NEW_TOKENS,
    SENTENCE,
    SMALL,
    carried,
    chain_terms,
    message,
    randomized,
    seen,
    their_tokens,
    tokenizers,
    vocabulary,
    weights_tolerance,
    written,
)

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
pytestmark = NEEDS_TOKENIZERS
WINDOW = 3  # the sentence has 11 tokens: most queries see fewer keys than causal attention would let them
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rope_theta": 1e4}
# Gemma: query_pre_attn_scalar = head_dim, which llama.cpp assumes (its files do not say); tokens 1 and 2 the
# vocabulary's own; Gemma 3 with six layers, so that one is global (llama.cpp's pattern: five local, one global)
GEMMA = {**SMALL, "num_key_value_heads": 2, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": WINDOW,
         "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}  # fmt: skip
GEMMA3_ROPE = {"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 100.0},
               "sliding_attention": {"rope_type": "default", "rope_theta": 10.0}}  # fmt: skip
# Phi-4-mini's way: RoPE on half of each head, LongRoPE's short factors and attention factor, a sliding window
LONGROPE = {"rope_type": "longrope", "rope_theta": 1e4, "partial_rotary_factor": 0.5,
            "short_factor": [1.0, 1.5, 3.0, 8.0], "long_factor": [2.0, 4.0, 8.0, 16.0]}  # fmt: skip
PHI3 = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 96, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "rope_parameters": LONGROPE,
        "original_max_position_embeddings": 64, "max_position_embeddings": 256, "sliding_window": WINDOW}  # fmt: skip
# llama.cpp's architecture: (transformers' classes, config, the picker's line in English)
FAMILIES = {
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {**SMALL, "num_key_value_heads": 2, "rope_parameters": YARN,
              "max_position_embeddings": 64}, "qwen2"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**SMALL, "num_key_value_heads": 2, "head_dim": 16}, "qwen3"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {**GEMMA, "attn_logit_softcapping": 5.0,
               "final_logit_softcapping": 3.0}, "gemma2 · sliding 3 on layers 1 · softcap 5"),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {**GEMMA, "num_hidden_layers": 6,
               "rope_parameters": GEMMA3_ROPE}, "gemma3_text · sliding 3 on every layer but each 6th"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", PHI3, "phi3 · RoPE on 50% of each head · sliding 3 on every layer"),
}  # fmt: skip
# a convention of llama.cpp's converter per architecture, undone wrongly: the model is then off transformers
WRONG = {"qwen2": {"interleaved": True}, "qwen3": {"interleaved": True}, "gemma2": {"norm_shift": 0.0},
         "gemma3": {"norm_shift": 0.0}, "phi3": {"norm_shift": 1.0}}  # fmt: skip


def make(arch: str, folder: Path, tokenizer: Path) -> torch.nn.Module:
    """A random model of the architecture with transformers, saved with safetensors and the tokenizer into folder."""
    config_class, model_class, sizes, _ = FAMILIES[arch]
    vocab = json.loads(tokenizer.read_text())["model"]["vocab"]
    config = getattr(transformers, config_class)(vocab_size=len(vocab), **sizes)
    model = getattr(transformers, model_class)(config)
    randomized(model, seed=len(arch)).save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    return getattr(transformers, model_class).from_pretrained(folder, attn_implementation="eager").eval()


def metadata(writer, arch: str, config: dict) -> None:
    """The metadata llama.cpp's converter writes for the architecture from a config.json."""
    rope = config.get("rope_parameters") or {}
    full = rope.get("full_attention", rope)
    writer.add_block_count(config["num_hidden_layers"]), writer.add_embedding_length(config["hidden_size"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_feed_forward_length(config["intermediate_size"]), writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"]), writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(full["rope_theta"])
    if arch == "phi3":  # Phi3MiniModel: the turned dims, the original length, 0 for no window, LongRoPE's factor
        turned = int(rope["partial_rotary_factor"] * config["hidden_size"]) // config["num_attention_heads"]
        writer.add_rope_dimension_count(turned), writer.add_sliding_window(config.get("sliding_window") or 0)
        old = config["original_max_position_embeddings"]
        writer.add_rope_scaling_orig_ctx_len(old)
        factor = config["max_position_embeddings"] / old
        writer.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(factor) / math.log(old)))
        return
    if "head_dim" in config:
        writer.add_key_length(config["head_dim"]), writer.add_value_length(config["head_dim"])
    if full.get("rope_type") == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR), writer.add_rope_scaling_factor(full["factor"])
    elif full.get("rope_type") == "yarn":
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN), writer.add_rope_scaling_factor(full["factor"])
        writer.add_rope_scaling_orig_ctx_len(full["original_max_position_embeddings"])
    if "sliding_attention" in rope:
        writer.add_rope_freq_base_swa(rope["sliding_attention"]["rope_theta"])
    if arch.startswith("gemma"):
        writer.add_sliding_window(config["sliding_window"])
    if arch == "gemma2":
        writer.add_attn_logit_softcapping(config["attn_logit_softcapping"])
        writer.add_final_logit_softcapping(config["final_logit_softcapping"])


def write_gguf(arch: str, hf: torch.nn.Module, folder: Path, tokens) -> Path:
    """hf's weights as llama.cpp's converter writes them, 2-D ones in 8 bits: the gguf package's names, Gemma's norms
    + 1, no permutation of q and k (llama's alone has one), Phi-3's LongRoPE factors as tensors."""
    from gguf.quants import quantize

    q8, path = gguf.GGMLQuantizationType.Q8_0, folder / f"tiny-{arch}.Q8_0.gguf"
    writer = gguf.GGUFWriter(path, arch)
    writer.add_token_list(tokens[0]), writer.add_token_merges(tokens[1])
    writer.add_tokenizer_model("gpt2"), writer.add_tokenizer_pre("smollm")
    config = json.loads((folder / "config.json").read_text())
    metadata(writer, arch, config)
    kind = next(k for k, name in gguf.MODEL_ARCH_NAMES.items() if name == arch)
    names = gguf.get_tensor_name_map(kind, config["num_hidden_layers"])
    if arch == "phi3":
        for kind in ("long", "short"):
            writer.add_tensor(f"rope_factors_{kind}.weight", torch.tensor(LONGROPE[f"{kind}_factor"]).numpy())
    for name, t in hf.state_dict().items():
        if name == "lm_head.weight" and (arch.startswith("gemma") or config.get("tie_word_embeddings")):
            continue  # tied: the converter skips it
        array = (t + 1 if arch.startswith("gemma") and name.endswith("norm.weight") else t).numpy()
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if array.ndim == 2:
            packed = quantize(array, q8)
            writer.add_tensor(gguf_name, packed, raw_shape=packed.shape, raw_dtype=q8)
        else:
            writer.add_tensor(gguf_name, array)
    written(writer)
    return path


@pytest.fixture(scope="module", params=list(FAMILIES))
def trio(request, vocabulary, tokenizers, tmp_path_factory):  # noqa: F811
    """The app's model from the GGUF file, transformers' from the same file (with the config it was made from: its
    GGUF reader skips keys such as softcaps and LongRoPE), the app's from the Hugging Face folder, and the arch."""
    arch, folder = request.param, tmp_path_factory.mktemp(request.param)
    hf = make(arch, folder, tokenizers["byte"])
    path = write_gguf(arch, hf, folder, vocabulary)
    theirs = getattr(transformers, FAMILIES[arch][1]).from_pretrained(
        folder, gguf_file=path.name, config=hf.config, attn_implementation="eager", dtype=torch.float32
    )
    return sources.open_model(path), theirs.eval(), sources.open_model(folder), arch


def close(a, b) -> bool:
    """Two spec values equal, floats within float32's rounding (a GGUF file holds its numbers in float32)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=2 * torch.finfo(torch.float32).eps)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_the_spec_from_the_file_is_the_one_from_its_config_json_and_transformers(trio):
    model, hf, folder_model, arch = trio
    s, made = model.spec, folder_model.spec
    assert s.quantized == "Q8_0" and s.model_type == made.model_type == hf.config.model_type
    kept = {"name", "title", "files", "readers", "quantized", "default"}
    for f in fields(s):
        if f.name not in kept:
            assert close(getattr(s, f.name), getattr(made, f.name)), f.name
    theirs = (getattr(layer.self_attn, "sliding_window", hf.config.sliding_window) for layer in hf.model.layers)
    assert (s.windows or (None,) * s.layers) == tuple(theirs)
    if s.scale is not None:
        assert s.scale == hf.model.layers[0].self_attn.scaling
    assert render("en", models.family_line(s)) == FAMILIES[arch][3]
    offer = offered._offer(f"local:{arch}.gguf", Path(s.files[0]))  # the picker, before the file is read
    assert (offer.problem, offer.family, offer.layers) == (None, s.model_type, s.layers)


def test_every_head_of_every_layer_through_the_eight_steps_equals_transformers(trio):
    """Each head as a case on transformers' inputs: its output as transformers' head, its weights as transformers'
    output_attentions, within the one rule."""
    model, hf, _, _ = trio
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
            assert within(trace["weights"], out.attentions[layer][0, head], weights_tolerance(case, trace))


def test_the_forward_pass_equals_transformers_layer_by_layer_and_in_its_logits(trio):
    model, hf, _, _ = trio
    ids, _ = model.tokenize(SENTENCE)
    hf_x, hf_heads, out = seen(hf, ids)
    with torch.inference_mode():
        own = model.spec.family.forward(model, torch.tensor(ids))
    terms = chain_terms(model.spec, len(ids))
    for layer in range(model.spec.layers):
        heads = own.head_outputs[layer].transpose(0, 1).flatten(1)  # (n, h · d): side by side, as transformers'
        assert within(own.inputs[layer], hf_x[layer], carried(hf_x[layer], terms)), layer
        assert within(heads, hf_heads[layer], carried(hf_heads[layer], terms)), layer
    assert within(own.logits[0], out.logits[0, -1], carried(out.logits[0, -1], terms))


def test_greedy_tokens_with_and_without_the_cache_are_transformers(trio):
    model, hf, _, _ = trio
    ids, _ = model.tokenize(SENTENCE)
    cached, uncached = (generate(model, SENTENCE, NEW_TOKENS, cached=c) for c in (True, False))
    assert cached.new_ids == uncached.new_ids == their_tokens(hf, model, ids)
    assert len(set(cached.new_ids)) > 1  # the random model says something, not one token again and again


def test_each_convention_of_the_converter_matters(trio, monkeypatch):
    """Read with llama.cpp's conventions mistaken (q and k taken as permuted, as llama's are; Gemma's norms' + 1 kept;
    Phi-3's norms taken as Gemma's), the file's model is off transformers' logits by more than the rule."""
    model, hf, _, arch = trio
    wrong = replace(sources.GGUF_ARCHITECTURES[arch], **WRONG[arch])
    monkeypatch.setitem(sources.GGUF_ARCHITECTURES, arch, wrong)
    broken = sources.open_model(Path(model.spec.files[0]))
    ids, _ = model.tokenize(SENTENCE)
    with torch.inference_mode():
        theirs = hf(torch.tensor([ids])).logits[0, -1]
        logits = broken.spec.family.forward(broken, torch.tensor(ids)).logits[0]
    assert not within(logits, theirs, carried(theirs, chain_terms(model.spec, len(ids))))


def gguf_of(path: Path, arch: str, keys: dict) -> dict:
    """The config the app reads from a file of the architecture holding only the given metadata."""
    writer = gguf.GGUFWriter(path, arch)
    for key, value in keys.items():
        getattr(writer, f"add_{key}")(value)
    written(writer)
    return sources.gguf_config(sources.gguf_reader(path))


def test_gemma_s_score_scale_is_llama_cpp_s_where_the_file_does_not_say_it(tmp_path):
    """query_pre_attn_scalar is no GGUF key: head_dim, but width / heads for the 27B models (Gemma 2's 46 layers,
    Gemma 3's 62), as llama.cpp takes it; attention.scale where a file has one."""
    sizes = {"embedding_length": 4608, "head_count": 32, "key_length": 128}
    assert gguf_of(tmp_path / "a.gguf", "gemma2", {"block_count": 46, **sizes})["query_pre_attn_scalar"] == 144
    assert gguf_of(tmp_path / "b.gguf", "gemma3", {"block_count": 62, **sizes})["query_pre_attn_scalar"] == 144
    assert gguf_of(tmp_path / "c.gguf", "gemma2", {"block_count": 42, **sizes})["query_pre_attn_scalar"] == 128
    scaled = {"block_count": 4, "attention_scale": 0.25, "sliding_window_pattern": 2, **sizes}
    config = gguf_of(tmp_path / "d.gguf", "gemma3", scaled)
    assert config["query_pre_attn_scalar"] == 16 and config["sliding_window_pattern"] == 2


def test_a_gguf_file_of_an_architecture_it_does_not_read_is_named_with_the_ones_it_reads(tmp_path):
    path = tmp_path / "falcon.gguf"
    writer = gguf.GGUFWriter(path, "falcon")
    writer.add_block_count(1)
    written(writer)
    assert message(path) == (
        f"{path}: is GGUF falcon, not an architecture this app computes "
        "(it computes: GGUF llama, qwen2, qwen3, gemma2, gemma3, phi3)"
    )


def test_a_gemma_sentencepiece_vocabulary_puts_no_space_in_front_as_transformers(tmp_path):
    """Gemma's GGUF files say add_space_prefix false: no ▁ put before the sentence, as transformers' Gemma reader."""
    pieces = ["▁", "▁the", "▁cat", "at", "he", "▁t", "▁c", "▁s", "ir", "ed", "▁m", "▁w", "as", "▁b", "ca", "use"]
    letters = sorted(set("".join(pieces)) - {"▁"})
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *letters, *pieces]
    scores = [0.0] * 259 + [-100.0 - i for i in range(len(letters))] + [-float(i) for i in range(len(pieces))]
    writer = gguf.GGUFWriter(tmp_path / "gemma.gguf", "gemma2")
    writer.add_tokenizer_model("llama"), writer.add_token_list(tokens), writer.add_token_scores(scores)
    writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * (len(tokens) - 259)), writer.add_add_space_prefix(False)
    writer.add_bos_token_id(1), writer.add_eos_token_id(2), writer.add_unk_token_id(0)
    written(writer)
    ours = sources.gguf_tokenizer(sources.gguf_reader(tmp_path / "gemma.gguf"), tmp_path / "gemma.gguf")
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="gemma.gguf")
    for sentence in (SENTENCE, "the  cat\nZ é", " the cat"):
        ids = ours.encode(sentence).ids
        assert ids == theirs(sentence)["input_ids"] and ids[0] == 1, sentence
        assert ours.decode(ids) == sentence
    assert ours.encode("the cat").tokens == ["<s>", "t", "he", "▁cat"]  # not "▁the": no space in front
