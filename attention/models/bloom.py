"""The BLOOM family: its spec from a config (ALiBi's slopes as transformers makes them), its tensors (the fused
query_key_value split into q, k and v), its forward pass in plain torch (LayerNorms, ALiBi, GELU), its biases."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .model import Edit, KVCache, Pass, attend_heads, layer_norm, linear


@dataclass(frozen=True)  # a value: equal to any other of its family (a copied spec is the same spec)
class Bloom:
    """A causal decoder without positions in its input or RoPE: ALiBi's linear bias on each head's scores instead."""

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json (n_head, n_layer: BLOOM's own names)."""
        if config.get("apply_residual_connection_post_layernorm"):
            raise ValueError("apply_residual_connection_post_layernorm (a residual from the normed input)")
        heads, width = config.get("n_head", config.get("num_attention_heads")), config["hidden_size"]
        layers = config.get("n_layer", config.get("num_hidden_layers"))
        return dict(layers=layers, heads=heads, kv_heads=heads, head_dim=width // heads, width=width, causal=True,
                    rope_base=None, norm_eps=config.get("layer_norm_epsilon", 1e-5),
                    tied=config.get("tie_word_embeddings", True), vocab=config["vocab_size"], bias=True,
                    alibi=alibi_slopes(heads))  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward pass reads, by name, with the shape the spec gives each (None: any)."""
        d = s.width
        shapes = {"word_embeddings.weight": (s.vocab, d)}
        shapes |= {
            f"{norm}.{part}": (d,) for norm in ("word_embeddings_layernorm", "ln_f") for part in ("weight", "bias")
        }
        if not s.tied:
            shapes["lm_head.weight"] = (s.vocab, d)
        for layer in range(s.layers):
            p = f"h.{layer}."
            shapes |= {p + "self_attention.query_key_value.weight": (3 * d, d),
                       p + "self_attention.query_key_value.bias": (3 * d,),
                       p + "self_attention.dense.weight": (d, d), p + "self_attention.dense.bias": (d,)}  # fmt: skip
            shapes |= {p + f"{norm}.{part}": (d,) for norm in ("input_layernorm", "post_attention_layernorm")
                       for part in ("weight", "bias")}  # fmt: skip
            shapes |= {p + f"mlp.{name}.{part}": None for name in ("dense_h_to_4h", "dense_4h_to_h")
                       for part in ("weight", "bias")}  # fmt: skip
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """query_key_value as self_attention.query, .key, .value: its rows (and bias) hold each head's q, k and v in
        turn, head by head (BLOOM's layout: (heads, 3, head_dim))."""
        return split_fused(s, tensors)

    def norms(self, weights: dict, layer: int) -> None:
        """No q/k norm (Qwen3's alone)."""
        return None

    def projections(self, weights: dict, layer: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The layer's q, k, v weights (out, in) and biases (out,)."""
        p = f"h.{layer}.self_attention."
        return {name: (weights[p + f"{part}.weight"], weights[p + f"{part}.bias"])
                for name, part in (("w_query", "query"), ("w_key", "key"), ("w_value", "value"))}  # fmt: skip

    def forward(self, model, ids: torch.Tensor, cache: KVCache | None = None, edit: Edit | None = None) -> Pass:
        """The tokens ids (at positions cache.length, … with a cache: its keys and values appended) through every
        layer; the logits of the last one."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.length
        slopes = torch.tensor(s.alibi, device=ids.device)  # (h,): ALiBi's, one per head
        h = layer_norm(w["word_embeddings.weight"][ids], w, "word_embeddings_layernorm", s.norm_eps)  # (m, d)
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"h.{layer}."
            x = layer_norm(h, w, p + "input_layernorm", s.norm_eps)  # (m, d): what the attention reads
            q, k, v = (linear(x, w, p + f"self_attention.{part}").unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)
                       for part in ("query", "key", "value"))  # (h, m, hd) each  # fmt: skip
            out, weights = attend_heads(q, k, v, layer, cache, causal=True, slopes=slopes)  # (h, m, hd), (h, m, n)
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            h = h + linear(out.transpose(0, 1).flatten(1), w, p + "self_attention.dense")
            f = layer_norm(h, w, p + "post_attention_layernorm", s.norm_eps)
            inner = torch.nn.functional.gelu(linear(f, w, p + "mlp.dense_h_to_4h"), approximate="tanh")  # BLOOM's GELU
            h = h + linear(inner, w, p + "mlp.dense_4h_to_h")
        if cache is not None:
            cache.length = start + len(ids)
        last = layer_norm(h[-1:], w, "ln_f", s.norm_eps)  # the next token is predicted from the last alone
        logits = last @ w["word_embeddings.weight" if s.tied else "lm_head.weight"].T  # (1, vocabulary)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), logits)


def alibi_slopes(heads: int) -> tuple[float, ...]:
    """ALiBi's slope m_h of each head as transformers' build_alibi_tensor makes them (in float32): 2^(−8k/n) for
    k = 1 … n, n the largest power of 2 up to heads; the heads past it take every other slope of 2n's."""
    n = 2 ** math.floor(math.log2(heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(n) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + n, dtype=torch.int32))
    if n != heads:
        extra = torch.tensor(2 ** (-(2 ** -(math.log2(2 * n) - 3))), dtype=torch.float32)
        slopes = torch.cat([slopes, torch.pow(extra, torch.arange(1, 1 + 2 * min(n, heads - n), 2, dtype=torch.int32))])
    return tuple(slopes.tolist())


def split_fused(s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each query_key_value weight (and bias) as query, key and value: its rows hold each head's q, k and v in turn,
    head by head ((heads, 3, head_dim): BLOOM's and GPT-NeoX's layout)."""
    out = {}
    for name, t in tensors.items():
        if ".query_key_value." in name:
            thirds = t.unflatten(0, (s.heads, 3, s.head_dim))  # (h, 3, hd, d?): head by head, q k v
            for i, part in enumerate(("query", "key", "value")):
                out[name.replace("query_key_value", part)] = thirds[:, i].flatten(0, 1).contiguous()  # (h·hd, d?)
        else:
            out[name] = t
    return out
