"""The Phi-3 family (Phi-3, Phi-3.5, Phi-4-mini): Llama's forward pass with its q, k, v fused in one qkv_proj and its
SwiGLU's gate and up in one gate_up_proj (split on load), RoPE on each head's first partial_rotary_factor of dims
(Phi-4-mini's 0.75), LongRoPE's per-pair divisors and attention factor, a sliding window on every layer where the
config gives one."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..base.case import rotary_dims
from .llama import Llama
from .model import MAX_SENTENCE_TOKENS
from .neox import interleaved_first

LONGROPE = ("longrope", "su", "yarn")  # transformers' Phi3Config reads its older files' "su" and "yarn" as longrope
SPLIT = tuple(f"{name}_proj.weight" for name in ("q", "k", "v", "gate", "up"))  # Llama's, fused in Phi-3's files


@dataclass(frozen=True)
class Phi3(Llama):
    """Llama with fused projections; q's and k's turned dims kept in interleaved pairs, as Llama's whole heads."""

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json, as transformers' Phi3Config reads it (its defaults
        where a key is absent)."""
        if config.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {config['hidden_act']!r}")
        rope = dict(config.get("rope_scaling") or config.get("rope_parameters") or {})  # Phi3Config: scaling first
        kind = rope.get("rope_type", rope.get("type", "default"))
        kind = "longrope" if kind in LONGROPE else kind
        if kind not in ("default", "longrope"):
            raise ValueError(f"RoPE scaling {kind}")
        fraction = float(rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0)))
        base = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
        sizes = super().sizes({**config, "rope_parameters": {"rope_theta": base}, "rope_scaling": None})
        d_rot = rotary_dims(sizes["head_dim"], fraction)
        if d_rot < 2 or d_rot % 2:
            raise ValueError(f"RoPE on {d_rot} of a head's {sizes['head_dim']} dims (partial_rotary_factor {fraction})")
        frequencies, attention = longrope(rope, base, d_rot, config) if kind == "longrope" else (None, 1.0)
        return sizes | dict(
            bias=False, tied=config.get("tie_word_embeddings", False), norm_eps=config.get("rms_norm_eps", 1e-5),
            rope_fraction=None if fraction == 1 else fraction, rope_frequencies=frequencies, rope_attention=attention,
            rope_scaling=None if frequencies is None else kind, windows=_windows(config),
        )  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """Llama's tensors, with q, k and v in one qkv_proj and the gate and up projections in one gate_up_proj."""
        shapes = {name: shape for name, shape in super().expected(s).items() if not name.endswith(SPLIT)}
        for layer in range(s.layers):
            p = f"layers.{layer}."
            fused = (s.heads + 2 * s.kv_heads) * s.head_dim
            shapes |= {p + "self_attn.qkv_proj.weight": (fused, s.width), p + "mlp.gate_up_proj.weight": None}
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """qkv_proj as q_proj, k_proj, v_proj (its rows: every q head, then every k head, then every v head), q's
        and k's turned dims in interleaved pairs; gate_up_proj as gate_proj (its first half of rows) and up_proj."""
        q, kv, d_rot = s.heads * s.head_dim, s.kv_heads * s.head_dim, rotary_dims(s.head_dim, s.rope_fraction)
        out = {}
        for name, t in tensors.items():
            if name.endswith("qkv_proj.weight"):
                wq, wk, wv = t.split((q, kv, kv))  # (q, d), (kv, d), (kv, d)
                wq, wk = interleaved_first(wq, s.heads, d_rot), interleaved_first(wk, s.kv_heads, d_rot)
                for part, w in zip("qkv", (wq, wk, wv), strict=True):
                    out[name.replace("qkv_proj", f"{part}_proj")] = w.contiguous()
            elif name.endswith("gate_up_proj.weight"):
                gate, up = t.chunk(2)  # transformers' chunk(2, dim=-1) of the output: the gate first
                out[name.replace("gate_up_proj", "gate_proj")] = gate.contiguous()
                out[name.replace("gate_up_proj", "up_proj")] = up.contiguous()
            else:
                out[name] = t
        return out


def longrope(rope: dict, base: float, d_rot: int, config: dict) -> tuple[tuple[float, ...], float]:
    """LongRoPE's frequencies θ_p = base^(−2p/d_rot) / short_factor_p and its attention factor on cos and sin, as
    transformers' _compute_longrope_parameters makes them for a sentence within original_max_position_embeddings (its
    long_factor takes over past that length: refused when a sentence here could reach it)."""
    # Phi3Config's own original_max_position_embeddings (default 4096) overrides the one in rope_parameters
    old = config.get("original_max_position_embeddings", rope.get("original_max_position_embeddings", 4096))
    if old < MAX_SENTENCE_TOKENS:
        raise ValueError(f"longrope's long_factor past {old} tokens (original_max_position_embeddings)")
    short = rope["short_factor"]
    if len(short) != d_rot // 2 or not all(isinstance(f, int | float) and f > 0 for f in short):
        raise ValueError(f"longrope's short_factor: {len(short)} numbers for {d_rot // 2} pairs")
    theta = base ** (-torch.arange(0, d_rot, 2, dtype=torch.float64) / d_rot) / torch.tensor(short, dtype=torch.float64)
    factor = rope.get("factor")
    if factor is None:  # Phi-3's files: the ratio of the two lengths
        factor = config.get("max_position_embeddings", 4096) / old
    attention = rope.get("attention_factor")
    if attention is None:  # the paper's: √(1 + ln(factor) / ln(original length)) for a longer context
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(old))
    return tuple(theta.tolist()), float(attention)


def _windows(config: dict) -> tuple[int, ...] | None:
    """sliding_window on every layer (transformers' Phi-3 masks each with it); None without one, or with one no
    shorter than max_position_embeddings (Phi-4-mini's 262144 of 131072: it never leaves a key out)."""
    window, layers = config.get("sliding_window"), config["num_hidden_layers"]
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise TypeError(f"sliding_window {window!r}")
    if window >= config.get("max_position_embeddings", 4096):
        return None
    return (window,) * layers
