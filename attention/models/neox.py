"""The GPT-NeoX family (Pythia): its spec from a config, its tensors (the fused query_key_value split into q, k and v,
the turned dims of q and k reordered into RoPE's interleaved pairs), its forward pass in plain torch (LayerNorms,
RoPE on the first rotary_pct of each head, the parallel residual, GELU), its biases."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base.case import rotary_dims
from ..forward.compute import rope, rope_theta
from .bloom import split_fused
from .model import Edit, KVCache, Pass, attend_heads, layer_norm, linear

TANH_GELUS = ("gelu_new", "gelu_fast", "gelu_pytorch_tanh")  # transformers' tanh approximations of GELU


@dataclass(frozen=True)  # a value: equal to any other of its family (a copied spec is the same spec)
class GptNeox:
    """A causal decoder with partial RoPE: each head's first d_rot dims turned, kept (as llama.py keeps whole heads)
    in the interleaved pairs (2p, 2p+1) the core turns (Hugging Face's files pair p with p + d_rot/2)."""

    parallel: bool = True  # use_parallel_residual: the attention and the MLP both read the layer's input
    tanh_gelu: bool = False  # hidden_act a tanh approximation of GELU (Pythia's is the exact "gelu")

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json (rotary_pct and rotary_emb_base: its older names)."""
        if config.get("hidden_act", "gelu") not in ("gelu", *TANH_GELUS):
            raise ValueError(f"hidden_act {config['hidden_act']!r}")
        heads, width = config["num_attention_heads"], config["hidden_size"]
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise ValueError(f"RoPE scaling {rope.get('rope_type', rope.get('type'))}")
        fraction = float(rope.get("partial_rotary_factor", config.get("rotary_pct", 0.25)))
        d_rot = rotary_dims(width // heads, fraction)
        if d_rot < 2 or d_rot % 2:
            raise ValueError(f"RoPE on {d_rot} of a head's {width // heads} dims (rotary_pct {fraction})")
        base = float(rope.get("rope_theta", config.get("rotary_emb_base", 10000.0)))
        return dict(layers=config["num_hidden_layers"], heads=heads, kv_heads=heads, head_dim=width // heads,
                    width=width, causal=True, rope_base=base, norm_eps=config.get("layer_norm_eps", 1e-5),
                    tied=config.get("tie_word_embeddings", False), vocab=config["vocab_size"],
                    bias=config.get("attention_bias", True),
                    rope_fraction=None if fraction == 1 else fraction)  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward pass reads, by name, with the shape the spec gives each (None: any)."""
        d = s.width
        shapes = {"embed_in.weight": (s.vocab, d), "final_layer_norm.weight": (d,), "final_layer_norm.bias": (d,)}
        if not s.tied:
            shapes["lm_head.weight"] = (s.vocab, d)
        for layer in range(s.layers):
            p = f"layers.{layer}."
            shapes |= {p + "attention.query_key_value.weight": (3 * d, d), p + "attention.dense.weight": (d, d)}
            if s.bias:
                shapes |= {p + "attention.query_key_value.bias": (3 * d,), p + "attention.dense.bias": (d,)}
            shapes |= {p + f"{norm}.{part}": (d,) for norm in ("input_layernorm", "post_attention_layernorm")
                       for part in ("weight", "bias")}  # fmt: skip
            shapes |= {p + f"mlp.{name}.{part}": None for name in ("dense_h_to_4h", "dense_4h_to_h")
                       for part in ("weight", "bias")}  # fmt: skip
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """query_key_value as attention.query, .key, .value (BLOOM's layout), q's and k's turned dims interleaved."""
        out = split_fused(s, tensors)
        d_rot = rotary_dims(s.head_dim, s.rope_fraction)
        for name, t in out.items():
            if ".attention.query." in name or ".attention.key." in name:
                out[name] = interleaved_first(t, s.heads, d_rot)
        return out

    def norms(self, weights: dict, layer: int) -> None:
        """No q/k norm (Qwen3's alone)."""
        return None

    def projections(self, weights: dict, layer: int) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        """The layer's q, k, v weights (out, in) and their biases (out,) where the model has them."""
        p = f"layers.{layer}.attention."
        return {name: (weights[p + f"{part}.weight"], weights.get(p + f"{part}.bias"))
                for name, part in (("w_query", "query"), ("w_key", "key"), ("w_value", "value"))}  # fmt: skip

    def forward(self, model, ids: torch.Tensor, cache: KVCache | None = None, edit: Edit | None = None) -> Pass:
        """The tokens ids (at positions cache.length, … with a cache: its keys and values appended) through every
        layer; the logits of the last one."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.length
        at = torch.arange(start, start + len(ids), device=ids.device)  # the tokens' positions
        theta = rope_theta(s, rotary_dims(s.head_dim, s.rope_fraction))  # (d_rot/2,): the turned pairs' frequencies
        h = w["embed_in.weight"][ids]  # (m, d)
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"layers.{layer}."
            x = layer_norm(h, w, p + "input_layernorm", s.norm_eps)  # (m, d): what the attention reads
            q, k, v = (linear(x, w, p + f"attention.{part}").unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)
                       for part in ("query", "key", "value"))  # (h, m, hd) each  # fmt: skip
            q, k = rope(q, at, theta), rope(k, at, theta)  # the first d_rot dims turned, the rest as they are
            out, weights = attend_heads(q, k, v, layer, cache, causal=True)  # (h, m, hd), (h, m, n)
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            attention = linear(out.transpose(0, 1).flatten(1), w, p + "attention.dense")  # (m, d)
            # the parallel residual: the MLP reads the layer's input, beside the attention; else the attention's sum
            f = layer_norm(h if self.parallel else h + attention, w, p + "post_attention_layernorm", s.norm_eps)
            inner = linear(f, w, p + "mlp.dense_h_to_4h")
            inner = torch.nn.functional.gelu(inner, approximate="tanh" if self.tanh_gelu else "none")
            h = h + attention + linear(inner, w, p + "mlp.dense_4h_to_h")
        if cache is not None:
            cache.length = start + len(ids)
        last = layer_norm(h[-1:], w, "final_layer_norm", s.norm_eps)  # the next token is predicted from the last alone
        logits = last @ w["embed_in.weight" if s.tied else "lm_head.weight"].T  # (1, vocabulary)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), logits)


def interleaved_first(t: torch.Tensor, heads: int, d_rot: int) -> torch.Tensor:
    """Each head's first d_rot rows (of a weight, or numbers of a bias): dims p and p + d_rot/2 made neighbours 2p
    and 2p + 1, as transformers' rotate_half pairs them and the core's RoPE turns them; the rest as they are."""
    per_head = t.unflatten(0, (heads, -1))  # (h, hd, d?)
    turned = per_head[:, :d_rot].unflatten(1, (2, d_rot // 2)).transpose(1, 2).flatten(1, 2)  # (h, d_rot, d?)
    return torch.cat((turned, per_head[:, d_rot:]), dim=1).flatten(0, 1)
