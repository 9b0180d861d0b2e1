"""The Llama family (Llama, SmolLM2, Mistral, Qwen2 with biases on q, k and v, Qwen3 with q and k RMS-normed per
head): its spec from a config, its tensors, its forward pass in plain torch (RMSNorm, RoPE from the core,
grouped-query attention, SwiGLU), and where a layer's q, k, v weights lie."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..forward.compute import rope
from .model import Edit, KVCache, Pass, attend_heads, linear


@dataclass(frozen=True)  # a value: equal to any other of its family (a copied spec is the same spec)
class Llama:
    """A causal decoder with RoPE. Its q and k rows are kept as GGUF files hold them: each head's dims in the
    interleaved pairs (2p, 2p+1) the core's RoPE turns (Hugging Face's files pair p with p + d/2: reordered on load)."""

    qk_norm: bool = False  # Qwen3: each head's q and k RMS-normed before RoPE (not one of the eight steps)

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json."""
        heads = config["num_attention_heads"]
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}  # transformers 5, and 4's
        kind = rope.get("rope_type", rope.get("type", "default"))
        return dict(
            layers=config["num_hidden_layers"], heads=heads, kv_heads=config.get("num_key_value_heads") or heads,
            head_dim=config.get("head_dim") or config["hidden_size"] // heads, width=config["hidden_size"],
            causal=True, rope_base=float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
            rope_scaling=None if kind == "default" else (kind, float(rope.get("factor", 1.0))),
            norm_eps=config.get("rms_norm_eps", 1e-6), tied=config.get("tie_word_embeddings", False),
            vocab=config["vocab_size"], bias=config.get("attention_bias", config["model_type"] == "qwen2"),
        )  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward pass reads, by name, with the shape the spec gives each (None: any)."""
        q, kv, d = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.width
        shapes = {"embed_tokens.weight": (s.vocab, d), "norm.weight": (d,)}
        if not s.tied:
            shapes["lm_head.weight"] = (s.vocab, d)
        for layer in range(s.layers):
            p = f"layers.{layer}."
            shapes |= {p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,)}
            shapes |= {p + "self_attn.q_proj.weight": (q, d), p + "self_attn.k_proj.weight": (kv, d),
                       p + "self_attn.v_proj.weight": (kv, d), p + "self_attn.o_proj.weight": (d, q)}  # fmt: skip
            if s.bias:
                shapes |= {p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)}  # fmt: skip
            if self.qk_norm:
                shapes |= {p + "self_attn.q_norm.weight": (s.head_dim,), p + "self_attn.k_norm.weight": (s.head_dim,)}
            shapes |= {p + f"mlp.{name}.weight": None for name in ("gate_proj", "up_proj", "down_proj")}
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A Hugging Face file's tensors (checked against expected) as the forward pass reads them: q and k (their
        rows, biases and norms) reordered into interleaved pairs, as llama.cpp's converter does for GGUF files."""
        out = dict(tensors)
        for name, t in tensors.items():
            part = name.rsplit(".", 2)[-2] if name.startswith("layers.") else ""
            if part in ("q_proj", "k_proj", "q_norm", "k_norm"):
                heads = {"q_proj": s.heads, "k_proj": s.kv_heads}.get(part, 1)  # a norm's weight: one head's dims
                out[name] = interleaved(t, heads)
        return out

    def projections(self, weights: dict, layer: int) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        """The layer's q, k, v weights (out, in), and their biases (out,) where the model has them."""
        p = f"layers.{layer}.self_attn."
        return {name: (weights[p + f"{part}_proj.weight"], weights.get(p + f"{part}_proj.bias"))
                for name, part in (("w_query", "q"), ("w_key", "k"), ("w_value", "v"))}  # fmt: skip

    def forward(self, model, ids: torch.Tensor, cache: KVCache | None = None, edit: Edit | None = None) -> Pass:
        """The tokens ids (at positions cache.length, … with a cache: its keys and values appended) through every
        layer; the logits of the last one."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.length
        at = torch.arange(start, start + len(ids), device=ids.device)  # the tokens' positions
        turned_at = at if s.rope_scaling is None else at / s.rope_scaling[1]  # linear scaling: positions shrunk
        h = w["embed_tokens.weight"][ids]  # (m, d)
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"layers.{layer}."
            x = rms_norm(h, w[p + "input_layernorm.weight"], s.norm_eps)  # (m, d): what the attention reads
            q, k, v = (linear(x, w, p + f"self_attn.{part}_proj").unflatten(-1, (-1, s.head_dim)).transpose(0, 1)
                       for part in "qkv")  # (h, m, hd), (g, m, hd), (g, m, hd)  # fmt: skip
            if self.qk_norm:
                q = rms_norm(q, w[p + "self_attn.q_norm.weight"], s.norm_eps)
                k = rms_norm(k, w[p + "self_attn.k_norm.weight"], s.norm_eps)
            q, k = rope(q, turned_at, s.rope_base), rope(k, turned_at, s.rope_base)  # the core's RoPE
            out, weights = attend_heads(q, k, v, layer, cache, causal=True)  # (h, m, hd), (h, m, n)
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            h = h + out.transpose(0, 1).flatten(1) @ w[p + "self_attn.o_proj.weight"].T
            f = rms_norm(h, w[p + "post_attention_layernorm.weight"], s.norm_eps)
            gate, up = f @ w[p + "mlp.gate_proj.weight"].T, f @ w[p + "mlp.up_proj.weight"].T
            h = h + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T  # SwiGLU
        if cache is not None:
            cache.length = start + len(ids)
        last = rms_norm(h[-1:], w["norm.weight"], s.norm_eps)  # the next token is predicted from the last alone
        logits = last @ w["embed_tokens.weight" if s.tied else "lm_head.weight"].T  # (1, vocabulary)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), logits)


def interleaved(t: torch.Tensor, heads: int) -> torch.Tensor:
    """A head's dims p and p + d/2 (rows of a weight, or a bias's numbers) made neighbours 2p and 2p + 1."""
    return t.unflatten(0, (heads, 2, -1)).transpose(1, 2).flatten(0, 2)


def rms_norm(h: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight
