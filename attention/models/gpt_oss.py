"""The gpt-oss family: Llama's layout with biases on q, k, v and o, a learned sink logit per head in each softmax's
denominator, a sliding window on the layers layer_types marks, YaRN RoPE, and a mixture-of-experts feed-forward
(a router's top-k, each expert a clamped SwiGLU over interleaved gate and up columns), as transformers' GptOss computes
them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..forward.compute import rms_norm, rope, rope_theta
from .llama import Llama
from .model import Edit, KVCache, Pass, attend_heads, linear

# transformers' GptOssConfig without rope_parameters: YaRN × 32 over an original 4,096 positions, base 150,000
YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 4096}  # fmt: skip
BASE = 150_000.0


@dataclass(frozen=True)  # a value: equal to any other of its family with the same experts
class GptOss(Llama):
    """gpt-oss: q and k rows kept in interleaved pairs (as Llama's); its experts' routing and SwiGLU's numbers."""

    experts: int = 128  # num_local_experts: each layer's feed-forward networks
    top_k: int = 4  # num_experts_per_tok: the experts each token is sent to
    alpha: float = 1.702  # swiglu_alpha: the sigmoid's gain in gate · σ(α · gate)
    limit: float = 7.0  # swiglu_limit: gate clamped from above, up on both sides, at it

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json, as transformers' GptOssConfig reads it (its defaults
        where a key is absent)."""
        if config.get("quantization_config"):  # the released checkpoints' experts in MXFP4 blocks and scales
            raise ValueError(f"quantized weights ({config['quantization_config'].get('quant_method', '?')})")
        if not 1 <= self.top_k <= self.experts:
            raise ValueError(f"{self.top_k} experts per token of {self.experts}")
        rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or YARN)
        rope.setdefault("rope_theta", config.get("rope_theta", BASE))
        sizes = super().sizes({**config, "rope_parameters": rope, "head_dim": config.get("head_dim", 64)})
        return sizes | dict(
            bias=config.get("attention_bias", True), tied=config.get("tie_word_embeddings", False),
            norm_eps=config.get("rms_norm_eps", 1e-5), windows=_windows(config), sinks=True,
        )  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """Llama's tensors without its MLP; the output projection's bias, the sinks, the router and the experts."""
        shapes = {name: shape for name, shape in super().expected(s).items() if ".mlp." not in name}
        e, d = self.experts, s.width
        for layer in range(s.layers):
            p = f"layers.{layer}."
            shapes |= {p + "self_attn.sinks": (s.heads,), p + "mlp.router.weight": (e, d), p + "mlp.router.bias": (e,)}
            shapes |= {p + f"mlp.experts.{name}": None for name in ("gate_up_proj", "gate_up_proj_bias", "down_proj")}
            shapes[p + "mlp.experts.down_proj_bias"] = (e, d)
            if s.bias:
                shapes[p + "self_attn.o_proj.bias"] = (d,)
        return shapes

    def sinks(self, weights: dict, layer: int) -> torch.Tensor:
        """The layer's sink logit s_h of each head (heads,)."""
        return weights[f"layers.{layer}.self_attn.sinks"]

    def forward(self, model, ids: torch.Tensor, cache: KVCache | None = None, edit: Edit | None = None) -> Pass:
        """The tokens ids (at positions cache.length, … with a cache: its keys and values appended) through every
        layer; the logits of the last one."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.length
        at = torch.arange(start, start + len(ids), device=ids.device)  # the tokens' positions
        theta = rope_theta(s, s.head_dim)  # (head_dim/2,): YaRN's frequencies
        h = w["embed_tokens.weight"][ids]  # (m, d)
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"layers.{layer}."
            x = rms_norm(h, w[p + "input_layernorm.weight"], s.norm_eps)  # (m, d): what the attention reads
            q, k, v = (linear(x, w, p + f"self_attn.{part}_proj").unflatten(-1, (-1, s.head_dim)).transpose(0, 1)
                       for part in "qkv")  # (h, m, hd), (g, m, hd), (g, m, hd)  # fmt: skip
            q, k = rope(q, at, theta) * s.rope_attention, rope(k, at, theta) * s.rope_attention  # YaRN's factor
            window = s.windows[layer] if s.windows else None  # a sliding layer's window
            out, weights = attend_heads(q, k, v, layer, cache, causal=True, window=window,
                                        sinks=self.sinks(w, layer))  # (h, m, hd), (h, m, n)  # fmt: skip
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            h = h + linear(out.transpose(0, 1).flatten(1), w, p + "self_attn.o_proj")
            h = h + self.mixture(rms_norm(h, w[p + "post_attention_layernorm.weight"], s.norm_eps), w, p)
        if cache is not None:
            cache.length = start + len(ids)
        last = rms_norm(h[-1:], w["norm.weight"], s.norm_eps)  # the next token is predicted from the last alone
        logits = last @ w["embed_tokens.weight" if s.tied else "lm_head.weight"].T  # (1, vocabulary)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), logits)

    def mixture(self, f: torch.Tensor, w: dict, p: str) -> torch.Tensor:
        """The layer's mixture of experts on f (m, d), as transformers' GptOssMLP: each token's top-k router logits
        softmaxed into its experts' weights; each chosen expert's gate_up columns interleaved (gate 2i, up 2i + 1),
        gate clamped from above and up on both sides at the limit, (up + 1) · gate · σ(α · gate), projected down;
        the experts' outputs summed by their weights."""
        logits = linear(f, w, p + "mlp.router")  # (m, experts)
        top, chosen = torch.topk(logits, self.top_k, dim=-1)  # (m, k), (m, k)
        routed = torch.softmax(top, dim=1)  # (m, k): over the chosen experts' logits alone
        out = torch.zeros_like(f)  # (m, d)
        e = p + "mlp.experts."
        for expert in chosen.unique().tolist():
            token, slot = torch.where(chosen == expert)  # the tokens sent to it, and where it is in their top-k
            gate_up = f[token] @ w[e + "gate_up_proj"][expert] + w[e + "gate_up_proj_bias"][expert]  # (t, 2 inner)
            gate, up = gate_up[..., ::2].clamp(max=self.limit), gate_up[..., 1::2].clamp(-self.limit, self.limit)
            fed = ((up + 1) * gate * torch.sigmoid(gate * self.alpha)) @ w[e + "down_proj"][expert]  # (t, d)
            out.index_add_(0, token, (fed + w[e + "down_proj_bias"][expert]) * routed[token, slot, None])
        return out


def _windows(config: dict) -> tuple[int | None, ...] | None:
    """Each layer's sliding window as transformers reads the config: on the layers layer_types calls
    "sliding_attention", by default the odd ones counted from 1. None: no layer has one."""
    layers, window = config["num_hidden_layers"], config.get("sliding_window", 128)
    types = config.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                          for i in range(layers)]  # fmt: skip
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 or len(types) != layers:
        raise TypeError(f"sliding_window {window!r} over {len(types)} layer_types for {layers} layers")
    windows = tuple(window if t == "sliding_attention" else None for t in types)
    return windows if any(w is not None for w in windows) else None
