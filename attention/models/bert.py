"""The BERT family (all-MiniLM-L6-v2): its safetensors file, its word-piece tokenizer, its forward pass in plain
torch (post-LayerNorm encoder, GELU), and its q, k, v weights with their biases (the case's ones column)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from .tokens import word_piece


@dataclass(frozen=True)  # a value: equal to any other of its family (a copied spec is the same spec)
class Bert:
    """An encoder without a mask or RoPE: its biases are the weights' last row, for x's last column of ones."""

    bias = True
    readable = staticmethod(word_piece)

    def load(self, spec, paths: dict[str, Path]) -> tuple[dict[str, torch.Tensor], object]:
        """The fp32 weights (their "bert." prefix dropped), and the tokenizer without its padding and truncation."""
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        config = json.loads(paths["config.json"].read_text())
        if (config["num_hidden_layers"], config["hidden_size"]) != (spec.layers, spec.width):
            raise ValueError(f"unexpected {spec.title} config: {config}")
        weights = {k.removeprefix("bert."): w.float() for k, w in load_file(paths["model.safetensors"]).items()}
        tokenizer = Tokenizer.from_file(str(paths["tokenizer.json"]))
        tokenizer.no_padding()  # its file pads every sentence to 128 tokens
        tokenizer.no_truncation()  # the length limit is ours: a message, not a silent cut
        return weights, tokenizer

    def projections(self, weights: dict, layer: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The layer's q, k, v weights (out, in) and biases (out,)."""
        out = {}
        for name, part in (("w_query", "query"), ("w_key", "key"), ("w_value", "value")):
            p = f"encoder.layer.{layer}.attention.self.{part}."
            out[name] = (weights[p + "weight"], weights[p + "bias"])
        return out

    def forward(self, model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        """(each layer's input (L, n, d), already layer-normed, each head's output (L, h, n, 32), no logits)."""
        w, s = model.weights, model.spec
        n, e = len(ids), "embeddings."
        h = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][:n]
        h = _layer_norm(h + w[e + "token_type_embeddings.weight"][0], w, e + "LayerNorm")  # (n, d)
        inputs, head_outputs = [], []
        for layer in range(s.layers):
            p = f"encoder.layer.{layer}."
            q, k, v = (
                _linear(h, w, p + f"attention.self.{name}").unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)
                for name in ("query", "key", "value")
            )  # (h, n, 32) each
            out = torch.softmax(q @ k.mT / math.sqrt(s.head_dim), dim=-1) @ v  # (h, n, 32): no mask, one sentence
            inputs.append(h)
            head_outputs.append(out)
            h = _layer_norm(h + _linear(out.transpose(0, 1).flatten(1), w, p + "attention.output.dense"), w,
                            p + "attention.output.LayerNorm")  # fmt: skip
            inner = torch.nn.functional.gelu(_linear(h, w, p + "intermediate.dense"))
            h = _layer_norm(h + _linear(inner, w, p + "output.dense"), w, p + "output.LayerNorm")
        return torch.stack(inputs), torch.stack(head_outputs), None


def _layer_norm(h: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    return torch.nn.functional.layer_norm(h, h.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], eps=1e-12)


def _linear(x: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]
