"""The Llama family (SmolLM2): its GGUF file read with gguf, its byte-level tokenizer, its forward pass in plain
torch (RMSNorm, RoPE from the core, grouped-query attention, SwiGLU), and where a layer's q, k, v weights lie."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ..forward.compute import rope
from .tokens import byte_level


@dataclass(frozen=True)  # a value: equal to any other of its family (a copied spec is the same spec)
class Llama:
    """A causal decoder with RoPE: its case has a causal mask and rope_base, no bias column."""

    bias = False  # q, k and v have no biases: x has no ones column
    readable = staticmethod(byte_level)

    def load(self, spec, paths: dict[str, Path]) -> tuple[dict[str, torch.Tensor], object]:
        """The GGUF file's tensors dequantized to float32, and its tokenizer rebuilt from the file's vocabulary."""
        from gguf import GGUFReader
        from gguf.quants import dequantize
        from tokenizers import Tokenizer, decoders, pre_tokenizers
        from tokenizers.models import BPE

        reader = GGUFReader(next(p for name, p in paths.items() if name.endswith(".gguf")))
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
        return weights, tokenizer

    def projections(self, weights: dict, layer: int) -> dict[str, tuple[torch.Tensor, None]]:
        """The layer's q, k, v weights (out, in), without biases."""
        parts = {"w_query": "q", "w_key": "k", "w_value": "v"}
        return {name: (weights[f"blk.{layer}.attn_{part}.weight"], None) for name, part in parts.items()}

    def forward(self, model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(each layer's normalised attention input (L, n, d), each head's output (L, h, n, 64), logits)."""
        w, s = model.weights, model.spec
        n, group = len(ids), s.heads // s.kv_heads
        positions = torch.arange(n, device=ids.device)
        causal = torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
        h = w["token_embd.weight"][ids]  # (n, d)
        inputs, head_outputs = [], []
        for layer in range(s.layers):
            p = f"blk.{layer}."
            x = _rms_norm(h, w[p + "attn_norm.weight"])  # (n, d): what the attention reads
            q, k, v = heads_of(s, w, p, x)  # (h, n, 64), (g, n, 64), (g, n, 64)
            q, k = rope(q, positions, s.rope_base), rope(k, positions, s.rope_base)  # the core's RoPE
            k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)  # query head i: kv head i // 3
            scores = (q @ k.mT / math.sqrt(s.head_dim)).masked_fill(~causal, float("-inf"))
            out = torch.softmax(scores, dim=-1) @ v  # (h, n, 64)
            inputs.append(x)
            head_outputs.append(out)
            h = after_heads(w, p, h, out)
        last = _rms_norm(h[-1:], w["output_norm.weight"])  # the next token is predicted from the last position alone
        logits = last @ w["token_embd.weight"].T  # (1, vocabulary): the embedding is tied to the output
        return torch.stack(inputs), torch.stack(head_outputs), logits


def heads_of(s, w: dict, p: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A layer's queries, keys and values of x (m, d), by head (before RoPE): (h, m, 64), (g, m, 64), (g, m, 64)."""
    q = (x @ w[p + "attn_q.weight"].T).unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)
    k = (x @ w[p + "attn_k.weight"].T).unflatten(-1, (s.kv_heads, s.head_dim)).transpose(0, 1)
    v = (x @ w[p + "attn_v.weight"].T).unflatten(-1, (s.kv_heads, s.head_dim)).transpose(0, 1)
    return q, k, v


def after_heads(w: dict, p: str, h: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The rest of a layer once its heads have attended: their outputs projected into the residual stream h, then
    the SwiGLU MLP added to it."""
    h = h + out.transpose(0, 1).flatten(1) @ w[p + "attn_output.weight"].T
    f = _rms_norm(h, w[p + "ffn_norm.weight"])
    gate, up = f @ w[p + "ffn_gate.weight"].T, f @ w[p + "ffn_up.weight"].T
    return h + (torch.nn.functional.silu(gate) * up) @ w[p + "ffn_down.weight"].T


def _rms_norm(h: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight
