"""The GPT-2 family: its spec from a config, its tensors (the fused c_attn split into q, k and v), its forward pass in
plain torch (learned positions, pre-LayerNorm, GELU), and its q, k, v weights with their biases."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .model import Edit, KVCache, Pass, attend_heads, layer_norm, linear


@dataclass(frozen=True)  # a value: equal to any other of its family (a copied spec is the same spec)
class Gpt2:
    """A causal decoder with learned positions added to the input: no RoPE; biases everywhere (the ones column)."""

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json."""
        if config.get("scale_attn_by_inverse_layer_idx") or config.get("scale_attn_weights") is False:
            raise ValueError("a scale other than 1/√head_dim")
        heads, width = config["n_head"], config["n_embd"]
        return dict(layers=config["n_layer"], heads=heads, kv_heads=heads, head_dim=width // heads, width=width,
                    causal=True, rope_base=None, norm_eps=config.get("layer_norm_epsilon", 1e-5),
                    tied=config.get("tie_word_embeddings", True), vocab=config["vocab_size"], bias=True)  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward pass reads, by name, with the shape the spec gives each (None: any). Conv1D
        stores a weight as (in, out)."""
        d = s.width
        shapes = {"wte.weight": (s.vocab, d), "wpe.weight": None, "ln_f.weight": (d,), "ln_f.bias": (d,)}
        if not s.tied:
            shapes["lm_head.weight"] = (s.vocab, d)
        for layer in range(s.layers):
            p = f"h.{layer}."
            shapes |= {p + "attn.c_attn.weight": (d, 3 * d), p + "attn.c_attn.bias": (3 * d,),
                       p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,)}  # fmt: skip
            shapes |= {p + f"{norm}.{part}": (d,) for norm in ("ln_1", "ln_2") for part in ("weight", "bias")}
            shapes |= {p + f"mlp.{name}.{part}": None for name in ("c_fc", "c_proj") for part in ("weight", "bias")}
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Conv1D's (in, out) weights as (out, in), as every other layer here; c_attn as attn.q, attn.k, attn.v."""
        out = {}
        for name, t in tensors.items():
            if ".attn.c_attn." in name:
                for part, third in zip("qkv", t.chunk(3, dim=-1), strict=True):  # the out columns: q's, k's, v's
                    out[name.replace("c_attn", part)] = third.T if t.dim() == 2 else third
            else:
                conv = name.startswith("h.") and name.endswith(".weight") and t.dim() == 2
                out[name] = t.T.contiguous() if conv else t
        return out

    def norms(self, weights: dict, layer: int) -> None:
        """No q/k norm (Qwen3's alone)."""
        return None

    def projections(self, weights: dict, layer: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The layer's q, k, v weights (out, in) and biases (out,)."""
        p = f"h.{layer}.attn."
        return {name: (weights[p + f"{part}.weight"], weights[p + f"{part}.bias"])
                for name, part in (("w_query", "q"), ("w_key", "k"), ("w_value", "v"))}  # fmt: skip

    def forward(self, model, ids: torch.Tensor, cache: KVCache | None = None, edit: Edit | None = None) -> Pass:
        """The tokens ids (at positions cache.length, … with a cache: its keys and values appended) through every
        layer; the logits of the last one."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.length
        h = w["wte.weight"][ids] + w["wpe.weight"][start : start + len(ids)]  # (m, d): a token and its position
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"h.{layer}."
            x = layer_norm(h, w, p + "ln_1", s.norm_eps)  # (m, d): what the attention reads
            q, k, v = (linear(x, w, p + f"attn.{part}").unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)
                       for part in "qkv")  # (h, m, hd) each  # fmt: skip
            out, weights = attend_heads(q, k, v, layer, cache, causal=True)  # (h, m, hd), (h, m, n)
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            h = h + linear(out.transpose(0, 1).flatten(1), w, p + "attn.c_proj")
            inner = torch.nn.functional.gelu(linear(layer_norm(h, w, p + "ln_2", s.norm_eps), w, p + "mlp.c_fc"),
                                             approximate="tanh")  # GPT-2's "gelu_new"  # fmt: skip
            h = h + linear(inner, w, p + "mlp.c_proj")
        if cache is not None:
            cache.length = start + len(ids)
        last = layer_norm(h[-1:], w, "ln_f", s.norm_eps)
        logits = last @ w["wte.weight" if s.tied else "lm_head.weight"].T  # (1, vocabulary)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), logits)
