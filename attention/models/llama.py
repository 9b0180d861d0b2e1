"""The Llama family (Llama, SmolLM2, Mistral and Qwen2 with their sliding windows, Qwen2's biases on q, k and v, Qwen3
with q and k RMS-normed per head, SmolLM3 with NoPE layers, OLMo 2 with q and k RMS-normed over the width and its
norms after the attention and the MLP): its spec from a config, its tensors, its forward pass in
plain torch (RMSNorm, RoPE from the core, grouped-query attention, SwiGLU), and where a layer's q, k, v weights lie."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..base.case import rotary_dims
from ..forward.compute import rms_norm, rope, rope_theta
from .model import Edit, KVCache, Pass, attend_heads, linear


@dataclass(frozen=True)  # a value: equal to any other of its family (a copied spec is the same spec)
class Llama:
    """A causal decoder with RoPE. Its q and k rows are kept as GGUF files hold them: each head's dims in the
    interleaved pairs (2p, 2p+1) the core's RoPE turns (Hugging Face's files pair p with p + d/2: reordered on load)."""

    qk_norm: bool = False  # Qwen3: each head's q and k RMS-normed before RoPE (the case's step 3a)
    norm_width: bool = False  # OLMo 2: q and k RMS-normed over the width (every head's dims at once: norm_width)
    post_norms: bool = False  # OLMo 2: the attention's and the MLP's outputs RMS-normed, their inputs not

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json."""
        heads = config["num_attention_heads"]
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}  # transformers 5, and 4's
        kind = rope.get("rope_type", rope.get("type", "default"))
        head_dim = config.get("head_dim") or config["hidden_size"] // heads
        base = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
        frequencies, attention = scaled_rope(kind, rope, base, head_dim, config)
        return dict(
            layers=config["num_hidden_layers"], heads=heads, kv_heads=config.get("num_key_value_heads") or heads,
            head_dim=head_dim, width=config["hidden_size"], causal=True, rope_base=base,
            rope_scaling=None if frequencies is None else kind, rope_frequencies=frequencies, rope_attention=attention,
            norm_eps=config.get("rms_norm_eps", 1e-6), tied=config.get("tie_word_embeddings", False),
            vocab=config["vocab_size"], bias=config.get("attention_bias", config["model_type"] == "qwen2"),
            windows=sliding_windows(config), no_rope=nope_layers(config), norm_width=self.norm_width,
        )  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward pass reads, by name, with the shape the spec gives each (None: any)."""
        q, kv, d = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.width
        shapes = {"embed_tokens.weight": (s.vocab, d), "norm.weight": (d,)}
        if not s.tied:
            shapes["lm_head.weight"] = (s.vocab, d)
        for layer in range(s.layers):
            p = f"layers.{layer}."
            norms = ("post_attention", "post_feedforward") if self.post_norms else ("input", "post_attention")
            shapes |= {p + f"{norm}_layernorm.weight": (d,) for norm in norms}
            shapes |= {p + "self_attn.q_proj.weight": (q, d), p + "self_attn.k_proj.weight": (kv, d),
                       p + "self_attn.v_proj.weight": (kv, d), p + "self_attn.o_proj.weight": (d, q)}  # fmt: skip
            if s.bias:
                shapes |= {p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)}  # fmt: skip
            if self.qk_norm:  # a head's dims, or the width's (every head's)
                widths = (q, kv) if self.norm_width else (s.head_dim, s.head_dim)
                shapes |= {p + "self_attn.q_norm.weight": (widths[0],), p + "self_attn.k_norm.weight": (widths[1],)}
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
                if self.norm_width and part.endswith("norm"):  # OLMo 2's: every head's dims, the whole width
                    heads = s.heads if part == "q_norm" else s.kv_heads
                out[name] = interleaved(t, heads)
        return out

    def projections(self, weights: dict, layer: int) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        """The layer's q, k, v weights (out, in), and their biases (out,) where the model has them."""
        p = f"layers.{layer}.self_attn."
        return {name: (weights[p + f"{part}_proj.weight"], weights.get(p + f"{part}_proj.bias"))
                for name, part in (("w_query", "q"), ("w_key", "k"), ("w_value", "v"))}  # fmt: skip

    def norms(self, weights: dict, layer: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Qwen3's q/k norm weights γ_Q and γ_K of the layer (head_dim,) each (OLMo 2's: (heads · head_dim,) and
        (kv_heads · head_dim,), over the width), in q's and k's interleaved order."""
        p = f"layers.{layer}.self_attn."
        return (weights[p + "q_norm.weight"], weights[p + "k_norm.weight"]) if self.qk_norm else None

    def forward(self, model, ids: torch.Tensor, cache: KVCache | None = None, edit: Edit | None = None) -> Pass:
        """The tokens ids (at positions cache.length, … with a cache: its keys and values appended) through every
        layer; the logits of the last one."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.length
        at = torch.arange(start, start + len(ids), device=ids.device)  # the tokens' positions
        d_rot = rotary_dims(s.head_dim, s.rope_fraction)  # the dims RoPE turns: all, or partial rotary's first
        theta = rope_theta(s, d_rot)  # (d_rot/2,): each turned pair's frequency, scaled as the config says
        gain = torch.ones(s.head_dim, device=ids.device)  # YaRN's, LongRoPE's factor on cos and sin: the turned dims'
        gain[:d_rot] = s.rope_attention
        h = w["embed_tokens.weight"][ids]  # (m, d)
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"layers.{layer}."
            # (m, d): what the attention reads (OLMo 2's: the residual stream as it is)
            x = h if self.post_norms else rms_norm(h, w[p + "input_layernorm.weight"], s.norm_eps)
            q, k, v = (linear(x, w, p + f"self_attn.{part}_proj").unflatten(-1, (-1, s.head_dim)).transpose(0, 1)
                       for part in "qkv")  # (h, m, hd), (g, m, hd), (g, m, hd)  # fmt: skip
            if (norms := self.norms(w, layer)) is not None:
                q, k = rms_norm(q, norms[0], s.norm_eps), rms_norm(k, norms[1], s.norm_eps)
            if layer not in s.no_rope:  # the core's RoPE (a NoPE layer's q and k stay as they are)
                q, k = rope(q, at, theta), rope(k, at, theta)
            if s.rope_attention != 1.0 and layer not in s.no_rope:  # q and k's turned dims grow by the factor
                q, k = q * gain, k * gain
            window = s.windows[layer] if s.windows else None  # Mistral's, Qwen2's sliding window
            out, weights = attend_heads(q, k, v, layer, cache, causal=True, window=window)  # (h, m, hd), (h, m, n)
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            attended = out.transpose(0, 1).flatten(1) @ w[p + "self_attn.o_proj.weight"].T
            h = h + self.post_norm(attended, w, p + "post_attention_layernorm", s.norm_eps)
            f = h if self.post_norms else rms_norm(h, w[p + "post_attention_layernorm.weight"], s.norm_eps)
            gate, up = f @ w[p + "mlp.gate_proj.weight"].T, f @ w[p + "mlp.up_proj.weight"].T
            fed = (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T  # SwiGLU
            h = h + self.post_norm(fed, w, p + "post_feedforward_layernorm", s.norm_eps)
        if cache is not None:
            cache.length = start + len(ids)
        last = rms_norm(h[-1:], w["norm.weight"], s.norm_eps)  # the next token is predicted from the last alone
        logits = last @ w["embed_tokens.weight" if s.tied else "lm_head.weight"].T  # (1, vocabulary)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), logits)

    def post_norm(self, m: torch.Tensor, w: dict, name: str, eps: float) -> torch.Tensor:
        """A block's output as the residual stream takes it: OLMo 2's RMS-normed, the others' as it is."""
        return rms_norm(m, w[name + ".weight"], eps) if self.post_norms else m


def sliding_windows(config: dict) -> tuple[int | None, ...] | None:
    """Each layer's sliding window as transformers reads the config: Mistral's on every layer; Qwen2's, Qwen3's and
    SmolLM3's only with use_sliding_window, on the layers its layer_types call "sliding_attention" (by default Qwen's
    from max_window_layers on, SmolLM3's NoPE layers). None: no layer has one."""
    kind, layers, window = config["model_type"], config["num_hidden_layers"], config.get("sliding_window")
    if kind not in ("mistral", "qwen2", "qwen3", "smollm3") or window is None:  # Llama's config has none
        return None
    if kind != "mistral" and not config.get("use_sliding_window", False):
        return None
    if kind == "mistral":  # its layer_types, if any, are not read (transformers warns so)
        types = ["sliding_attention"] * layers
    else:
        types = config.get("layer_types")
    if types is None and kind == "smollm3":
        nope = set(nope_layers(config))
        types = ["sliding_attention" if i in nope else "full_attention" for i in range(layers)]
    elif types is None:
        first = config.get("max_window_layers", 28)
        types = ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 or len(types) != layers:
        raise TypeError(f"sliding_window {window!r} over {len(types)} layer_types for {layers} layers")
    windows = tuple(window if t == "sliding_attention" else None for t in types)
    return windows if any(w is not None for w in windows) else None


def nope_layers(config: dict) -> tuple[int, ...]:
    """SmolLM3's layers without RoPE (0-based): those its no_rope_layers mark 0 (1: turned), by default every
    no_rope_layer_interval-th layer; no other family has any."""
    if config["model_type"] != "smollm3":
        return ()
    marks = config.get("no_rope_layers")
    if marks is None:
        interval = config.get("no_rope_layer_interval", 4)
        marks = [int((i + 1) % interval != 0) for i in range(config["num_hidden_layers"])]
    return tuple(i for i, turned in enumerate(marks) if not turned)


def scaled_rope(kind: str, rope: dict, base: float, d: int, config: dict) -> tuple[tuple[float, ...] | None, float]:
    """RoPE's frequencies θ_p when the config scales them (None: the paper's base^(−2p/d)), and YaRN's factor on cos
    and sin, as transformers' modeling_rope_utils computes them (here in float64). "dynamic" changes nothing until a
    sentence passes max_position_embeddings, which a sentence here never does."""
    if kind in ("default", "dynamic"):
        return None, 1.0
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError("RoPE on part of a head (partial_rotary_factor)")
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    factor = float(rope["factor"]) if rope.get("factor") is not None else None
    attention = 1.0
    if kind == "linear":  # every position shrunk by the factor: every frequency likewise
        theta = theta / factor
    elif kind == "llama3":  # long wavelengths slowed by the factor, short ones kept, the ones between blended
        old = rope["original_max_position_embeddings"]
        low, high = old / rope["low_freq_factor"], old / rope["high_freq_factor"]  # wavelengths
        wavelength = 2 * math.pi / theta
        smooth = (old / wavelength - rope["low_freq_factor"]) / (rope["high_freq_factor"] - rope["low_freq_factor"])
        blended = (1 - smooth) * theta / factor + smooth * theta
        theta = torch.where(wavelength > low, theta / factor, torch.where(wavelength < high, theta, blended))
    elif kind == "yarn":  # NTK-by-parts: the pairs between two wavelengths ramped from kept to slowed
        old = rope["original_max_position_embeddings"]
        factor = factor or config["max_position_embeddings"] / old
        attention = rope.get("attention_factor")
        if attention is None:
            mscale = lambda m: 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0  # noqa: E731
            m, m_all = rope.get("mscale"), rope.get("mscale_all_dim")
            attention = mscale(m) / mscale(m_all) if m and m_all else mscale(1)
        fast, slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1
        dim_of = lambda turns: d * math.log(old / (turns * 2 * math.pi)) / (2 * math.log(base))  # noqa: E731
        low, high = dim_of(fast), dim_of(slow)
        if rope.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / ((high - low) or 0.001)).clamp(0, 1)
        theta = theta / factor * ramp + theta * (1 - ramp)
    else:
        raise ValueError(f"RoPE scaling {kind}")
    return tuple(theta.tolist()), float(attention)


def interleaved(t: torch.Tensor, heads: int) -> torch.Tensor:
    """A head's dims p and p + d/2 (rows of a weight, or a bias's numbers) made neighbours 2p and 2p + 1."""
    return t.unflatten(0, (heads, 2, -1)).transpose(1, 2).flatten(0, 2)
