"""A model's files read into a Model: a folder in Hugging Face's layout (config.json, model.safetensors or its shards
with their index, tokenizer.json) or a GGUF file of llama.cpp's llama, qwen2, qwen3, gemma2, gemma3 or phi3
architecture; its spec made from its config by its family's adapter. A broken file is a CaseError naming the file and
the problem, never a traceback."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from ..base.case import CaseError
from ..base.i18n import clip, msg
from .bart import Bart
from .bert import Bert
from .bloom import Bloom
from .deepseek import DeepSeek
from .gemma import Gemma
from .gpt2 import Gpt2
from .gpt_oss import GptOss
from .llama import Llama
from .model import Model, Spec
from .neox import TANH_GELUS, GptNeox
from .phi3 import Phi3
from .t5 import T5

# config.json's model_type
SUPPORTED = ("llama", "mistral", "qwen2", "qwen3", "gpt2", "bert", "roberta", "smollm3", "gemma2", "gemma3_text")
SUPPORTED += ("bloom", "gpt_neox", "gpt_oss", "phi3", "olmo2", "deepseek_v2", "deepseek_v3")
SUPPORTED += ("bart", "mbart", "marian", "t5")  # encoder-decoders (seq2seq.py)
# a file saved from a model with a head names its body so
PREFIXES = ("model.", "transformer.", "bert.", "roberta.", "gpt_neox.")
RENAMED = {"embed_out.weight": "lm_head.weight"}  # GPT-NeoX's output layer in its files, as transformers names it
EXAMPLE = "The cat sat on the mat because it was tired"
# GGUF's names of a llama model's tensors (llama.cpp's converter), and Hugging Face's, which the adapter reads
GGUF_NAMES = {"token_embd": "embed_tokens", "output_norm": "norm", "output": "lm_head", "attn_norm": "input_layernorm",
              "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
              "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj",
              "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj", "attn_q_norm": "self_attn.q_norm",
              "attn_k_norm": "self_attn.k_norm"}  # fmt: skip
GEMMA_NAMES = {"ffn_norm": "pre_feedforward_layernorm", "post_attention_norm": "post_attention_layernorm",
               "post_ffw_norm": "post_feedforward_layernorm"}  # fmt: skip


@dataclass(frozen=True)
class GgufArchitecture:
    """How llama.cpp's converter writes one architecture's tensors, against Hugging Face's files."""

    model_type: str  # transformers' config model_type: the family whose adapter computes it
    names: dict = field(default_factory=dict)  # its tensor names unlike llama's (GGUF_NAMES), and Hugging Face's
    interleaved: bool = False  # q and k rows already in RoPE's interleaved pairs (llama.cpp permutes llama's alone)
    norm_shift: float = 0.0  # added to every norm weight (Gemma's 1: its RMSNorm scales by 1 + γ)


# llama.cpp's architectures read here (general.architecture), by its name
GGUF_ARCHITECTURES = {
    "llama": GgufArchitecture("llama", interleaved=True),
    "qwen2": GgufArchitecture("qwen2"),
    "qwen3": GgufArchitecture("qwen3"),
    "gemma2": GgufArchitecture("gemma2", GEMMA_NAMES, norm_shift=1.0),
    "gemma3": GgufArchitecture("gemma3_text", GEMMA_NAMES, norm_shift=1.0),
    "phi3": GgufArchitecture("phi3", {"attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"}),
}
# metadata keys (after "{architecture}.") read as transformers' config keys, where the file has them
GGUF_KEYS = {"block_count": "num_hidden_layers", "embedding_length": "hidden_size",
             "attention.head_count": "num_attention_heads", "attention.head_count_kv": "num_key_value_heads",
             "attention.key_length": "head_dim", "context_length": "max_position_embeddings",
             "attention.sliding_window": "sliding_window", "attn_logit_softcapping": "attn_logit_softcapping",
             "final_logit_softcapping": "final_logit_softcapping"}  # fmt: skip
# RoPE's metadata as the keys of transformers' rope_parameters (llama.cpp's scaling types: none, linear, yarn, longrope)
GGUF_ROPE = {"rope.freq_base": "rope_theta", "rope.scaling.type": "rope_type", "rope.scaling.factor": "factor",
             "rope.scaling.original_context_length": "original_max_position_embeddings",
             "rope.scaling.yarn_attn_factor": "attention_factor", "rope.scaling.attn_factor": "attention_factor",
             "rope.scaling.yarn_beta_fast": "beta_fast", "rope.scaling.yarn_beta_slow": "beta_slow"}  # fmt: skip
GEMMA_27B_LAYERS = {"gemma2": 46, "gemma3": 62}  # llama.cpp scales their 27B's scores by (width / heads)^(-1/2)


def family_of(config: dict, where: Path):
    """The adapter for a config's model_type; CaseError naming it and the supported ones."""
    kind = config.get("model_type")
    if kind not in SUPPORTED:
        found = kind or ", ".join(config.get("architectures", [])) or "?"
        raise CaseError(str(where), msg("error.model_architecture", found=found, supported=", ".join(SUPPORTED)))
    if kind in ("bert", "roberta"):  # RoBERTa counts positions from its padding token + 1
        pad = config.get("pad_token_id")
        return Bert(first_position=(pad if isinstance(pad, int) else 1) + 1 if kind == "roberta" else 0)
    if kind in ("gemma2", "gemma3_text"):  # Gemma 3's text model: q/k norms
        return Gemma(qk_norm=kind == "gemma3_text")
    if kind == "bloom":
        return Bloom()
    if kind in ("bart", "mbart", "marian", "t5"):  # encoder-decoders: their special tokens, activation, norms
        return (T5 if kind == "t5" else Bart).of(config)  # its sizes say what its config lacks
    if kind == "phi3":
        return Phi3()
    if kind == "gpt_neox":
        return GptNeox(config.get("use_parallel_residual", True), config.get("hidden_act") in TANH_GELUS)
    if kind == "gpt_oss":  # its experts' routing and SwiGLU's numbers, as GptOssConfig's defaults
        experts, alpha, limit = (
            config.get(key, d)
            for key, d in (("num_local_experts", 128), ("swiglu_alpha", 1.702), ("swiglu_limit", 7.0))
        )
        return GptOss(experts=experts, top_k=config.get("num_experts_per_tok", 4), alpha=alpha, limit=limit)
    if kind in ("deepseek_v2", "deepseek_v3"):  # multi-head latent attention; its experts' routing
        return DeepSeek.of(config)
    if kind == "olmo2":  # Llama with q/k norms over the width, and norms after the attention and the MLP
        return Llama(qk_norm=True, norm_width=True, post_norms=True)
    return Gpt2() if kind == "gpt2" else Llama(qk_norm=kind == "qwen3")


def spec_of(config: dict, where: Path, name: str, files: tuple[str, ...], quantized: str | None = None) -> Spec:
    """A model's spec from its config (Hugging Face's keys), made by its family's adapter."""
    family = family_of(config, where)
    try:
        sizes = family.sizes(config)
    except KeyError as e:
        raise CaseError(str(where), msg("error.model_config", key=str(e))) from None
    except CaseError as e:  # the family's own words for what it does not compute (DeepSeek's low-rank queries)
        raise CaseError(str(where), e.problem) from None
    except ValueError as e:
        raise CaseError(str(where), msg("error.model_unsupported", detail=clip(str(e)))) from None
    except (TypeError, ZeroDivisionError, AttributeError) as e:  # a number that is not one, a head count of 0
        raise CaseError(str(where), msg("error.model_unreadable", detail=clip(str(e)))) from None
    for key in ("layers", "heads", "kv_heads", "head_dim", "width", "vocab"):
        if not isinstance(sizes[key], int) or isinstance(sizes[key], bool) or sizes[key] < 1:
            raise CaseError(str(where), msg("error.model_unreadable", detail=f"{key} is {sizes[key]!r}, not a count"))
    readers = ("gguf" if where.suffix == ".gguf" else "safetensors", "tokenizers")
    return Spec(name, name, "", "", files, readers, **sizes, quantized=quantized,
                default=(EXAMPLE, 1, 1), family=family, model_type=config["model_type"])  # fmt: skip


def spec_at(path: Path) -> Spec:
    """The spec of a model on disk, a folder or a .gguf file, from its config alone (no weights read)."""
    path = Path(path)
    if path.suffix == ".gguf":
        return gguf_spec(gguf_reader(path), path)
    config_file = path / "config.json"
    if not config_file.is_file():
        raise CaseError(str(path), msg("error.model_absent", file="config.json"))
    config = _read(config_file, lambda: json.loads(config_file.read_text()))
    if not isinstance(config, dict):
        raise CaseError(str(config_file), msg("error.model_unreadable", detail="not a JSON object"))
    family_of(config, config_file)  # its architecture first: the message that matters most
    return spec_of(config, config_file, path.name, tuple(str(p) for p in _weight_files(path)))


def open_model(path: Path, progress=None) -> Model:
    """A model on disk (a folder in Hugging Face's layout, or a .gguf file) read into float32 tensors."""
    return load(spec_at(path), Path(path), progress)


def load(spec: Spec, path: Path, progress=None) -> Model:
    """The model's files (a .gguf file, or a folder) read for its spec: tensors checked against it, float32;
    progress(read, total) told after each tensor (a big model takes a while: the page shows how far it is)."""
    if path.suffix == ".gguf":
        reader = gguf_reader(path)
        tensors, tokenizer = _gguf_tensors(reader, path, progress), gguf_tokenizer(reader, path)
        files = (path,)
        ready = GGUF_ARCHITECTURES[_field(reader, "general.architecture")].interleaved
    else:
        files = _weight_files(path)
        names = {file: _read(file, lambda f=file: _safetensors_names(f)) for file in files}
        total, tensors = sum(len(n) for n in names.values()), {}
        for file in files:
            done = len(tensors)
            tensors |= _read(file, lambda f=file, done=done: _safetensors(f, names[f], done, total, progress))
        tensors = {_unprefixed(name): t for name, t in tensors.items()}
        tokenizer, ready = _tokenizer(path), False
    weights = _checked(spec, tensors, files[0] if len(files) == 1 else path)
    if not ready:  # a llama GGUF file's tensors are already as the forward pass reads them; others as Hugging Face's
        weights = spec.family.weights(spec, weights)
    if tokenizer.get_vocab_size() > spec.vocab:  # a token id past the embedding's rows would fail in the model
        where = path if path.suffix == ".gguf" else path / "tokenizer.json"
        raise CaseError(str(where), msg("error.model_vocab", tokens=tokenizer.get_vocab_size(), vocab=spec.vocab))
    return Model(spec, weights, tokenizer)


def _checked(spec: Spec, tensors: dict[str, torch.Tensor], where: Path) -> dict[str, torch.Tensor]:
    """The tensors, with each one the family reads present in the shape its config gives."""
    for name, shape in spec.family.expected(spec).items():
        if name not in tensors:
            raise CaseError(str(where), msg("error.model_tensor_missing", tensor=name))
        if shape is not None and tuple(tensors[name].shape) != shape:
            got = tuple(tensors[name].shape)
            raise CaseError(str(where), msg("error.model_tensor_shape", tensor=name, shape=got, expected=shape))
    return tensors


def _read(file: Path, read):
    """read(), its failure (a truncated or broken file) a CaseError naming the file."""
    try:
        return read()
    except CaseError:
        raise
    except Exception as e:  # whatever the reader's own error is: a message, never a traceback
        raise CaseError(str(file), msg("error.model_unreadable", detail=clip(str(e) or type(e).__name__))) from None


def _weight_files(folder: Path) -> tuple[Path, ...]:
    """model.safetensors, or the shards its index lists (model-0000k-of-0000n.safetensors)."""
    single, index = folder / "model.safetensors", folder / "model.safetensors.index.json"
    if single.is_file():
        return (single,)
    if not index.is_file():
        raise CaseError(str(folder), msg("error.model_absent", file="model.safetensors"))
    shards = _read(index, lambda: sorted(set(json.loads(index.read_text())["weight_map"].values())))
    for shard in shards:
        if not (folder / shard).is_file():
            raise CaseError(str(folder / shard), msg("error.model_shard", index=index.name))
    return tuple(folder / shard for shard in shards)


def _safetensors_names(file: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(file, "pt") as f:
        return list(f.keys())


def _safetensors(file: Path, names: list[str], done: int, total: int, progress) -> dict[str, torch.Tensor]:
    """The file's tensors in float32 (bf16 and fp16 computed in float32), progress told after each."""
    from safetensors import safe_open

    tensors = {}
    with safe_open(file, "pt") as f:
        for name in names:
            tensors[name] = f.get_tensor(name).float()
            if progress is not None:
                progress(done + len(tensors), total)
    return tensors


def _unprefixed(name: str) -> str:
    name = next((name.removeprefix(p) for p in PREFIXES if name.startswith(p)), name)
    return RENAMED.get(name, name)


def _tokenizer(folder: Path):
    """tokenizer.json, without padding and truncation (the length limit is ours: a message, not a silent cut)."""
    from tokenizers import Tokenizer

    file = folder / "tokenizer.json"
    if not file.is_file():
        raise CaseError(str(folder), msg("error.model_absent", file="tokenizer.json"))
    tokenizer = _read(file, lambda: Tokenizer.from_file(str(file)))
    tokenizer.no_padding()  # MiniLM's file pads every sentence to 128 tokens
    tokenizer.no_truncation()
    return tokenizer


# GGUF ------------------------------------------------------------------------------------------------------------


def gguf_reader(path: Path):
    """The file's reader, once its architecture is one read here (GGUF_ARCHITECTURES)."""
    from gguf import GGUFReader

    if not path.is_file():
        raise CaseError(str(path), msg("error.model_absent", file=path.name))
    reader = _read(path, lambda: GGUFReader(path))
    found = _field(reader, "general.architecture", "?")
    if found not in GGUF_ARCHITECTURES:
        supported = "GGUF " + ", ".join(GGUF_ARCHITECTURES)
        raise CaseError(str(path), msg("error.model_architecture", found=f"GGUF {found}", supported=supported))
    return reader


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def gguf_spec(reader, path: Path) -> Spec:
    """The spec from a GGUF file's metadata, as Hugging Face's config keys; its quantization: its weights' type."""
    kinds = Counter(t.tensor_type.name for t in reader.tensors if len(t.shape) == 2)
    quantized = kinds.most_common(1)[0][0] if kinds else None
    spec = spec_of(gguf_config(reader), path, path.stem, (str(path),), None if quantized == "F32" else quantized)
    divisors = _gguf_vector(reader, "rope_freqs.weight")
    if divisors is None:
        return spec
    # Llama 3's scaled RoPE as llama.cpp writes it: each pair's frequency base^(−2p/d) divided by its number here
    d = spec.head_dim
    theta = spec.rope_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    theta = theta / torch.tensor(divisors, dtype=torch.float64)
    return replace(spec, rope_scaling="llama3", rope_frequencies=tuple(theta.tolist()))


def gguf_config(reader) -> dict:
    """A GGUF file's metadata as the config transformers has for its family (as llama.cpp's converter wrote it from
    that config): the keys GGUF_KEYS and GGUF_ROPE name, and what llama.cpp tells from the tensors or by itself."""
    arch = _field(reader, "general.architecture")
    get = lambda key, default=None: _field(reader, f"{arch}.{key}", default)  # noqa: E731
    names = {t.name for t in reader.tensors}
    config = {hf: get(key) for key, hf in GGUF_KEYS.items()}
    config |= {"model_type": GGUF_ARCHITECTURES[arch].model_type, "tie_word_embeddings": "output.weight" not in names,
               "rms_norm_eps": get("attention.layer_norm_rms_epsilon", 1e-5),
               "attention_bias": "blk.0.attn_q.bias" in names}  # fmt: skip
    if "tokenizer.ggml.tokens" in reader.fields:
        config["vocab_size"] = len(reader.fields["tokenizer.ggml.tokens"].data)
    heads, width = config["num_attention_heads"], config["hidden_size"]
    head_dim = config["head_dim"] or (width // heads if isinstance(width, int) and isinstance(heads, int) else None)
    rope = {hf: get(key) for key, hf in GGUF_ROPE.items()} | {"rope_type": _rope_type(get("rope.scaling.type"))}
    turned = get("rope.dimension_count")
    if turned and head_dim and turned != head_dim:  # Phi-4-mini's RoPE on part of each head
        rope["partial_rotary_factor"] = turned / head_dim
    short, long = _gguf_vector(reader, "rope_factors_short.weight"), _gguf_vector(reader, "rope_factors_long.weight")
    if short is not None:  # Phi-3's LongRoPE: its factors as tensors (llama.cpp writes no scaling type for it)
        rope |= {"rope_type": "longrope", "short_factor": short, "long_factor": long}
        config["original_max_position_embeddings"] = rope["original_max_position_embeddings"]
    if arch == "phi3" and config["sliding_window"] == 0:  # llama.cpp's "none" for Phi-3
        config["sliding_window"] = None
    if arch.startswith("gemma"):
        config["query_pre_attn_scalar"] = _gemma_scalar(get("attention.scale"), arch, config, head_dim)
    if arch == "gemma3":  # the local layers' own RoPE (llama.cpp's default base 10000), and which layers are local
        rope = {"full_attention": rope, "sliding_attention": {"rope_theta": get("rope.freq_base_swa", 10000.0)}}
        pattern = get("attention.sliding_window_pattern")
        if isinstance(pattern, list):  # one flag a layer: true where it slides
            config["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
        elif pattern is not None:
            config["sliding_window_pattern"] = pattern
    config["rope_parameters"] = {k: v for k, v in rope.items() if v is not None}
    return {k: v for k, v in config.items() if v is not None}  # a missing one: the adapter's default, or named


def _rope_type(kind: str | None) -> str:
    """llama.cpp's RoPE scaling type as transformers' rope_type."""
    return "default" if kind in (None, "none") else kind


def _gemma_scalar(scale: float | None, arch: str, config: dict, head_dim: int | None) -> float | None:
    """Gemma's query_pre_attn_scalar, which llama.cpp's converter does not write: from attention.scale where a file
    has it, else as llama.cpp takes it: head_dim, but width / heads for the 27B models (told by their layers)."""
    if scale:
        return scale**-2
    if config["num_hidden_layers"] == GEMMA_27B_LAYERS[arch]:
        return config["hidden_size"] / config["num_attention_heads"]
    return head_dim


def _gguf_vector(reader, name: str) -> list[float] | None:
    """A small tensor of numbers the file holds beside the weights (RoPE's factors), as a list; None without it."""
    from gguf.quants import dequantize

    found = next((t for t in reader.tensors if t.name == name), None)
    return None if found is None else dequantize(found.data, found.tensor_type).flatten().tolist()


def _gguf_tensors(reader, path: Path, progress=None) -> dict[str, torch.Tensor]:
    """Every tensor dequantized to float32, under Hugging Face's names (Gemma's norms as Hugging Face's γ again);
    progress told after each."""
    from gguf.quants import dequantize

    arch = GGUF_ARCHITECTURES[_field(reader, "general.architecture")]
    names = GGUF_NAMES | arch.names
    tensors, total = {}, len(reader.tensors)
    for t in reader.tensors:  # GGUF lists a shape innermost first: an (out, in) weight is [in, out]
        shape = tuple(reversed([int(s) for s in t.shape]))
        array = _read(path, lambda t=t, shape=shape: dequantize(t.data, t.tensor_type).reshape(shape))
        block, _, rest = t.name.partition(".")
        if block == "blk":  # blk.3.attn_q.weight → layers.3.self_attn.q_proj.weight
            layer, part, kind = rest.split(".", 2)
            name = f"layers.{layer}.{names.get(part, part)}.{kind}"
        else:
            name = f"{names.get(block, block)}.{rest}"
        tensors[name] = torch.tensor(array, dtype=torch.float32)  # a copy: the file is mapped read-only
        if arch.norm_shift and name.endswith("norm.weight"):  # in float32, as transformers' GGUF loader takes it off
            tensors[name] -= arch.norm_shift
        if progress is not None:
            progress(len(tensors), total)
    return tensors


def gguf_tokenizer(reader, path: Path):
    """The tokenizer rebuilt from the file's vocabulary: GPT-2's byte-level BPE (SmolLM2's: digits one by one), or
    SentencePiece's (Llama 2's, Mistral's: ▁ for a space, bytes as <0x..> tokens, <s> first; Gemma's without a ▁ put
    in front), as transformers does."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    kind = _field(reader, "tokenizer.ggml.model")
    if kind not in ("gpt2", "llama") or "tokenizer.ggml.tokens" not in reader.fields:
        raise CaseError(str(path), msg("error.model_unsupported", detail=f"GGUF tokenizer {kind!r}"))
    tokens = _field(reader, "tokenizer.ggml.tokens")
    vocab = {token: i for i, token in enumerate(tokens)}
    if kind == "gpt2":
        merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges", [])]
        tokenizer = Tokenizer(BPE(vocab, merges))
        split = [pre_tokenizers.ByteLevel(add_prefix_space=False)]  # GPT-2's byte-level split (no space in front)
        if _field(reader, "tokenizer.ggml.pre") == "smollm":  # SmolLM2's own: digits one by one first
            split.insert(0, pre_tokenizers.Digits(individual_digits=True))
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(split)
        tokenizer.decoder = decoders.ByteLevel()
        return tokenizer
    unknown = tokens[_field(reader, "tokenizer.ggml.unknown_token_id", 0)]
    merges = _sentence_piece_merges(vocab, _field(reader, "tokenizer.ggml.scores", [0.0] * len(tokens)))
    tokenizer = Tokenizer(BPE(vocab, merges, unk_token=unknown, fuse_unk=True, byte_fallback=True))
    prefix = bool(_field(reader, "tokenizer.ggml.add_space_prefix", True))  # Gemma's files: no ▁ put in front
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁")] * prefix + [normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                           *[decoders.Strip(" ", 1, 0)] * prefix])  # fmt: skip
    kinds = _field(reader, "tokenizer.ggml.token_type", [])
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t, k in zip(tokens, kinds, strict=False) if k == 3])
    if _field(reader, "tokenizer.ggml.add_bos_token", True):  # SentencePiece models read <s> first
        bos = tokens[_field(reader, "tokenizer.ggml.bos_token_id", 1)]
        tokenizer.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, vocab[bos])])
    return tokenizer


def _sentence_piece_merges(vocab: dict[str, int], scores: list[float]) -> list[tuple[str, str]]:
    """SentencePiece's pieces as BPE merges: each piece from any two pieces that make it, the best-scored first."""
    merges = []
    for piece, score in zip(vocab, scores, strict=True):
        pairs = [(piece[:i], piece[i:]) for i in range(1, len(piece)) if piece[:i] in vocab and piece[i:] in vocab]
        merges += [(score, *pair) for pair in sorted(pairs, key=lambda pair: (vocab[pair[0]], vocab[pair[1]]))]
    merges.sort(key=lambda m: (m[0], len(m[1]), len(m[2])), reverse=True)
    return [(left, right) for _, left, right in merges]
