"""The Gemma family (Gemma 2, Gemma 3's text model): Llama's layout with every RMSNorm scaling by (1 + γ), a norm
before and after the attention and the feed-forward, embeddings scaled by √d_model, scores scaled by
query_pre_attn_scalar^(−1/2) and (Gemma 2) softcapped, a sliding window on the layers layer_types marks, a GeGLU MLP
and (Gemma 2) softcapped logits; Gemma 3 adds q/k norms, its local layers' own RoPE base and its global layers'
scaled RoPE."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from ..forward.compute import rms_norm, rope, rope_theta
from .llama import Llama, scaled_rope
from .model import Edit, KVCache, Pass, attend_heads, linear

NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")
EVERY_OTHER = {"gemma2": 2, "gemma3_text": 6}  # without layer_types: every k-th layer global, the others sliding


@dataclass(frozen=True)
class Gemma(Llama):
    """Gemma 2 (qk_norm False) or Gemma 3's text model (qk_norm True); q and k rows kept in interleaved pairs."""

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json, as transformers' Gemma2Config / Gemma3TextConfig
        read it (their defaults where a key is absent)."""
        if config.get("use_bidirectional_attention"):  # EmbeddingGemma: an encoder
            raise ValueError("bidirectional attention (use_bidirectional_attention)")
        if config.get("hidden_activation", "gelu_pytorch_tanh") not in ("gelu_pytorch_tanh", "gelu_tanh"):
            raise ValueError(f"hidden_activation {config['hidden_activation']}")
        global_rope, local_base = _rope_parameters(config)
        sizes = super().sizes({**config, "rope_parameters": global_rope, "sliding_window": None})
        head_dim = config.get("head_dim", 256)
        frequencies, attention = scaled_rope(global_rope.get("rope_type", "default"), global_rope,
                                             sizes["rope_base"], head_dim, config)  # fmt: skip
        gemma2 = config["model_type"] == "gemma2"
        return sizes | dict(
            head_dim=head_dim, rope_frequencies=frequencies, rope_attention=attention,
            bias=config.get("attention_bias", False), tied=config.get("tie_word_embeddings", True),
            windows=_windows(config), scale=float(config.get("query_pre_attn_scalar", 256)) ** -0.5,
            softcap=config.get("attn_logit_softcapping", 50.0 if gemma2 else None),
            logit_softcap=config.get("final_logit_softcapping", 30.0 if gemma2 else None),
            local_rope_base=local_base,
        )  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """Llama's tensors and the norms after the attention and before and after the feed-forward."""
        shapes = super().expected(s)
        for layer in range(s.layers):
            shapes |= {f"layers.{layer}.{norm}.weight": (s.width,) for norm in NORMS}
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Llama's reordering of q and k, and every norm's weight γ stored as the factor 1 + γ it scales by."""
        out = super().weights(s, tensors)
        return {name: 1 + t if name.endswith("norm.weight") else t for name, t in out.items()}

    def forward(self, model, ids: torch.Tensor, cache: KVCache | None = None, edit: Edit | None = None) -> Pass:
        """The tokens ids (at positions cache.length, … with a cache: its keys and values appended) through every
        layer; the logits of the last one, softcapped where the model caps them."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.length
        at = torch.arange(start, start + len(ids), device=ids.device)  # the tokens' positions
        theta = rope_theta(s, s.head_dim)  # (head_dim/2,): the global layers' frequencies, scaled as the config says
        if s.local_rope_base is not None:  # Gemma 3's local layers: their own base, unscaled
            local = rope_theta(replace(s, rope_base=s.local_rope_base, rope_frequencies=None), s.head_dim)
        else:
            local = theta
        h = w["embed_tokens.weight"][ids] * torch.tensor(math.sqrt(s.width))  # (m, d): scaled by √d_model
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"layers.{layer}."
            x = rms_norm(h, w[p + "input_layernorm.weight"], s.norm_eps)  # (m, d): what the attention reads
            q, k, v = (linear(x, w, p + f"self_attn.{part}_proj").unflatten(-1, (-1, s.head_dim)).transpose(0, 1)
                       for part in "qkv")  # (h, m, hd), (g, m, hd), (g, m, hd)  # fmt: skip
            if (norms := self.norms(w, layer)) is not None:  # Gemma 3's q/k norm, before RoPE
                q, k = rms_norm(q, norms[0], s.norm_eps), rms_norm(k, norms[1], s.norm_eps)
            window = s.windows[layer] if s.windows else None  # a sliding (local) layer's window
            turn = local if window is not None else theta
            q, k = rope(q, at, turn), rope(k, at, turn)
            if s.rope_attention != 1.0 and window is None:  # YaRN's factor on a global layer's cos and sin
                q, k = q * s.rope_attention, k * s.rope_attention
            out, weights = attend_heads(q, k, v, layer, cache, causal=True, window=window, scale=s.scale,
                                        softcap=s.softcap)  # (h, m, hd), (h, m, n)  # fmt: skip
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            attended = out.transpose(0, 1).flatten(1) @ w[p + "self_attn.o_proj.weight"].T  # (m, d)
            h = h + rms_norm(attended, w[p + "post_attention_layernorm.weight"], s.norm_eps)
            f = rms_norm(h, w[p + "pre_feedforward_layernorm.weight"], s.norm_eps)
            gate, up = f @ w[p + "mlp.gate_proj.weight"].T, f @ w[p + "mlp.up_proj.weight"].T
            fed = (torch.nn.functional.gelu(gate, approximate="tanh") * up) @ w[p + "mlp.down_proj.weight"].T  # GeGLU
            h = h + rms_norm(fed, w[p + "post_feedforward_layernorm.weight"], s.norm_eps)
        if cache is not None:
            cache.length = start + len(ids)
        last = rms_norm(h[-1:], w["norm.weight"], s.norm_eps)  # the next token is predicted from the last alone
        logits = last @ w["embed_tokens.weight" if s.tied else "lm_head.weight"].T  # (1, vocabulary)
        if s.logit_softcap is not None:  # Gemma 2's cap on the logits
            logits = s.logit_softcap * torch.tanh(logits / s.logit_softcap)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), logits)


def _rope_parameters(config: dict) -> tuple[dict, float | None]:
    """The global layers' RoPE parameters (Llama's keys) and Gemma 3's local layers' base (None for Gemma 2): from
    transformers 5's rope_parameters (Gemma 3's one per layer type) or 4's rope_theta, rope_scaling and
    rope_local_base_freq."""
    rope = dict(config.get("rope_parameters") or {})
    if config["model_type"] == "gemma2":
        return (rope or {"rope_theta": config.get("rope_theta", 10000.0)}), None
    local = dict(rope.get("sliding_attention") or {})
    if local.get("rope_type", "default") != "default":
        raise ValueError(f"RoPE scaling {local['rope_type']} on the local layers")
    global_rope = dict(rope.get("full_attention") or config.get("rope_scaling") or {})
    global_rope.setdefault("rope_theta", config.get("rope_theta", 1_000_000.0))
    return global_rope, float(local.get("rope_theta", config.get("rope_local_base_freq", 10_000.0)))


def _windows(config: dict) -> tuple[int | None, ...] | None:
    """Each layer's sliding window as transformers reads the config: on the layers layer_types calls
    "sliding_attention", by default every layer but each k-th (Gemma 2: the odd ones counted from 1; Gemma 3: five of
    every six, sliding_window_pattern). None: no layer has one."""
    layers, window = config["num_hidden_layers"], config.get("sliding_window", 4096)
    types = config.get("layer_types")
    if types is None:
        k = config.get("sliding_window_pattern", EVERY_OTHER[config["model_type"]])
        types = ["sliding_attention" if (i + 1) % k else "full_attention" for i in range(layers)]
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 or len(types) != layers:
        raise TypeError(f"sliding_window {window!r} over {len(types)} layer_types for {layers} layers")
    windows = tuple(window if t == "sliding_attention" else None for t in types)
    return windows if any(w is not None for w in windows) else None
