"""The T5 family of encoder-decoders (T5, T5 v1.1, Flan-T5): its spec from a config, its tensors, its encoder's and
decoder's forward passes in plain torch (RMS layer norms without a mean or a bias, no position embeddings but a
learned bias on each self-attention score by the bucket of its distance, no 1/√d scale, a ReLU MLP or v1.1's gated
GELU), and each attention's q, k, v weights and options (the relative bias as the case option relative_bias)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..forward.compute import relative_buckets, rms_norm
from .model import Edit, KVCache, Pass, attend_heads
from .seq2seq import Decoded, PairCache, Special, activation, checked, heads_of, merged, record, special_tokens, stacked

MODULES = {"encoder": "layer.0.SelfAttention", "decoder": "layer.0.SelfAttention", "cross": "layer.1.EncDecAttention"}


@dataclass(frozen=True)  # a value: equal to any other of its family with the same config
class T5:
    """An encoder-decoder whose self-attentions add a learned bias by distance to their scores (the first layer's
    table, shared by every layer of its stack; both ways in the encoder, to earlier tokens alone in the decoder), and
    whose cross-attention has no position term at all."""

    act: str = "relu"  # the MLP's activation (v1.1's gated-gelu: gelu_new)
    gated: bool = False  # T5 v1.1's: the activation times a second projection of the same input (wi_0, wi_1)
    scale_output: bool = True  # T5 1.0's: the decoder's output times d_model^(−1/2) before the output layer
    max_distance: int = 128  # relative_attention_max_distance: past it, one bucket
    special: Special = field(default_factory=lambda: Special(0, 1))

    @classmethod
    def of(cls, config: dict) -> T5:
        kind, _, act = str(config.get("feed_forward_proj", "relu")).rpartition("-")
        act = "gelu_new" if config.get("feed_forward_proj") == "gated-gelu" else act  # as transformers reads it
        scale = config.get("scale_decoder_outputs", config.get("tie_word_embeddings", True) is not False)
        return cls(act, kind == "gated", bool(scale), config.get("relative_attention_max_distance", 128),
                   special_tokens(config))  # fmt: skip

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json."""
        activation(self.act)  # one not computed here: said before anything is read
        checked(self.special, config["vocab_size"])
        layers = config["num_layers"]
        return dict(layers=layers, heads=config["num_heads"], kv_heads=config["num_heads"], head_dim=config["d_kv"],
                    width=config["d_model"], causal=False, rope_base=None, scale=1.0,
                    norm_eps=config.get("layer_norm_epsilon", 1e-6), vocab=config["vocab_size"],
                    decoder_layers=config.get("num_decoder_layers") or layers,
                    relative_buckets=config.get("relative_attention_num_buckets", 32))  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward passes read, by name, with the shape the spec gives each (None: any)."""
        d, inner = s.width, s.heads * s.head_dim
        shapes = {"shared.weight": (s.vocab, d)}
        mlp = ("wi_0", "wi_1", "wo") if self.gated else ("wi", "wo")
        for stack, layers in (("encoder", s.layers), ("decoder", s.decoder_layers)):
            shapes[f"{stack}.final_layer_norm.weight"] = (d,)
            table = f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
            shapes[table] = (s.relative_buckets, s.heads)
            parts = ("encoder",) if stack == "encoder" else ("decoder", "cross")
            for layer in range(layers):
                p = f"{stack}.block.{layer}."
                for part in parts:
                    shapes |= {p + f"{MODULES[part]}.{x}.weight": (inner, d) for x in "qkv"}
                    shapes[p + f"{MODULES[part]}.o.weight"] = (d, inner)
                    shapes[p + f"{MODULES[part].rsplit('.', 1)[0]}.layer_norm.weight"] = (d,)
                ff = f"layer.{len(parts)}."
                shapes |= {p + ff + "layer_norm.weight": (d,)} | {p + ff + f"DenseReluDense.{x}.weight": None
                                                                    for x in mlp}  # fmt: skip
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The file's tensors, the output layer the token embedding unless the file has its own (v1.1's)."""
        return {"lm_head.weight": tensors["shared.weight"]} | tensors

    def norms(self, weights: dict, layer: int) -> None:
        """No q/k norm (Qwen3's alone)."""
        return None

    def projections(self, weights: dict, layer: int, part: str = "encoder") -> dict[str, tuple]:
        """A part's layer's q, k, v weights (out, in), no biases: the encoder's self-attention (the one the
        one-sentence pages show), the decoder's, or its cross-attention."""
        p = f"{'encoder' if part == 'encoder' else 'decoder'}.block.{layer}.{MODULES[part]}."
        return {name: (weights[p + f"{x}.weight"], None) for name, x in (("w_query", "q"), ("w_key", "k"),
                                                                          ("w_value", "v"))}  # fmt: skip

    def case_options(self, weights: dict, part: str, head: int | None) -> dict:
        """Scores not scaled; a self-attention's relative bias, the head's row of its stack's table (every head's
        with head None), both ways in the encoder; the cross-attention has none."""
        if part == "cross":
            return {"scale": "none"}
        table = self.table(weights, part).T  # (heads, buckets)
        rows = table if head is None else table[head : head + 1]
        return {"scale": "none", "relative_bias": tuple(map(tuple, rows.tolist())),
                "relative_max_distance": self.max_distance, "relative_bidirectional": part == "encoder"}  # fmt: skip

    def table(self, weights: dict, part: str) -> torch.Tensor:
        """The relative bias of a stack's self-attention: (buckets, heads), its first layer's, shared by all."""
        return weights[f"{'encoder' if part == 'encoder' else 'decoder'}.block.0.layer.0.SelfAttention."
                       "relative_attention_bias.weight"]  # fmt: skip

    def forward(self, model, ids: torch.Tensor, cache: None = None, edit: Edit | None = None) -> Pass:
        """The encoder alone, over one sentence (what the one-sentence pages show); no logits."""
        return self.encode(model, ids, edit)[0]

    def encode(self, model, ids: torch.Tensor, edit: Edit | None = None) -> tuple[Pass, torch.Tensor]:
        """The source through the encoder: each layer's attention input (RMS-normed), its heads' outputs and
        weights; and the encoder's output after its final norm (n, d), as every cross-attention reads it."""
        w, s = model.weights, model.spec
        h = w["shared.weight"][ids]  # (n, d): no position embedding, no scale
        bias = relative_bias(self.table(w, "encoder"), self.max_distance, True, 0, len(ids), len(ids))  # (h, n, n)
        kept = ([], [], [])
        for layer in range(s.layers):
            p = f"encoder.block.{layer}.layer."
            x = rms_norm(h, w[p + "0.layer_norm.weight"], s.norm_eps)
            q, k, v = (heads_of(x @ w[p + f"0.SelfAttention.{c}.weight"].T, s.head_dim) for c in "qkv")
            out, weights = biased_heads(q, k, v, layer, None, bias, causal=False)
            record(kept, x, out, weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            h = h + merged(out) @ w[p + "0.SelfAttention.o.weight"].T
            h = self.mlp(h, w, p + "1.", s.norm_eps)
        return stacked(kept), rms_norm(h, w["encoder.final_layer_norm.weight"], s.norm_eps)

    def decode(self, model, memory: torch.Tensor, ids: torch.Tensor, cache: PairCache | None = None) -> Decoded:
        """The target tokens ids (at positions cache.own.length, … with the caches) through the decoder: each layer's
        causal, biased self-attention, then its cross-attention over the encoder's output `memory`; every token's
        logits."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.own.length
        h = w["shared.weight"][ids]  # (m, d)
        bias = relative_bias(self.table(w, "decoder"), self.max_distance, False, start, len(ids), start + len(ids))
        own, cross = ([], [], []), ([], [], [])
        for layer in range(s.decoder_layers):
            p = f"decoder.block.{layer}.layer."
            x = rms_norm(h, w[p + "0.layer_norm.weight"], s.norm_eps)
            q, k, v = (heads_of(x @ w[p + f"0.SelfAttention.{c}.weight"].T, s.head_dim) for c in "qkv")
            out, weights = biased_heads(q, k, v, layer, None if cache is None else cache.own, bias, causal=True)
            record(own, x, out, weights)
            h = h + merged(out) @ w[p + "0.SelfAttention.o.weight"].T
            x = rms_norm(h, w[p + "1.layer_norm.weight"], s.norm_eps)  # the queries' rows; keys from the source
            k, v = self.cross_kv(model, memory, layer) if cache is None else cache.cross[layer]
            q = heads_of(x @ w[p + "1.EncDecAttention.q.weight"].T, s.head_dim)
            out, weights = attend_heads(q, k, v, layer, None, causal=False, scale=1.0)  # no bias, no scale
            record(cross, x, out, weights)
            h = h + merged(out) @ w[p + "1.EncDecAttention.o.weight"].T
            h = self.mlp(h, w, p + "2.", s.norm_eps)
        if cache is not None:
            cache.own.length = start + len(ids)
        h = rms_norm(h, w["decoder.final_layer_norm.weight"], s.norm_eps)
        if self.scale_output:  # T5 1.0's tied output layer
            h = h * s.width**-0.5
        return Decoded(stacked(own), stacked(cross), h @ w["lm_head.weight"].T)  # logits (m, vocabulary)

    def cross_kv(self, model, memory: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A decoder layer's cross-attention keys and values of the source (h, n_src, head_dim) each."""
        p, d = f"decoder.block.{layer}.layer.1.EncDecAttention.", model.spec.head_dim
        return tuple(heads_of(memory @ model.weights[p + f"{c}.weight"].T, d) for c in "kv")

    def mlp(self, h: torch.Tensor, w: dict, p: str, eps: float) -> torch.Tensor:
        """A layer's MLP block, after its RMS norm: ReLU (T5 1.0's) or the gated activation (v1.1's)."""
        f, act, mlp = rms_norm(h, w[p + "layer_norm.weight"], eps), activation(self.act), p + "DenseReluDense."
        inner = act(f @ w[mlp + "wi_0.weight"].T) * (f @ w[mlp + "wi_1.weight"].T) if self.gated else act(
            f @ w[mlp + "wi.weight"].T)  # fmt: skip
        return h + inner @ w[mlp + "wo.weight"].T


def relative_bias(table: torch.Tensor, max_distance: int, both_ways: bool, start: int, m: int, n: int) -> torch.Tensor:
    """A self-attention's bias (h, m, n) of queries at positions start … start + m − 1 on keys 0 … n − 1, from its
    table (buckets, heads): each head's learned number for the bucket of the distance j − i (every layer's)."""
    distance = torch.arange(n)[None, :] - torch.arange(start, start + m)[:, None]  # (m, n)
    buckets = relative_buckets(distance, len(table), max_distance, both_ways)
    return table[buckets.to(table.device)].permute(2, 0, 1)  # (h, m, n)


def biased_heads(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, cache: KVCache | None, bias: torch.Tensor,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Every head of a T5 self-attention layer: the new tokens' queries (h, m, d) against their keys and values and,
    with a cache, every earlier token's (appended to it first); scores not scaled, plus the bias (h, m, n). Returns
    outputs (h, m, d), weights (h, m, n)."""
    m = q.shape[1]
    start = 0 if cache is None else cache.length
    if cache is not None:
        cache.keys[layer, :, start : start + m], cache.values[layer, :, start : start + m] = k, v  # appended
        k, v = cache.keys[layer, :, : start + m], cache.values[layer, :, : start + m]
    scores = q @ k.mT + bias  # (h, m, n): T5 has no 1/√d
    if causal:  # new token i (at position start + i) sees the keys up to its own
        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril(diagonal=start)
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
