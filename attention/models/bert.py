"""The BERT family (BERT, all-MiniLM-L6-v2, RoBERTa): its spec from a config, its tensors, its forward pass in plain
torch (post-LayerNorm encoder, GELU), and its q, k, v weights with their biases (the case's ones column)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .model import Edit, Pass, attend_heads, layer_norm, linear


@dataclass(frozen=True)  # a value: equal to any other of its family (a copied spec is the same spec)
class Bert:
    """An encoder without a mask or RoPE: its biases are the weights' last row, for x's last column of ones."""

    first_position: int = 0  # RoBERTa counts positions from its padding token's id + 1 (2)

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json."""
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"position_embedding_type {config['position_embedding_type']!r} (only 'absolute')")
        heads, width = config["num_attention_heads"], config["hidden_size"]
        return dict(layers=config["num_hidden_layers"], heads=heads, kv_heads=heads, head_dim=width // heads,
                    width=width, causal=False, rope_base=None, norm_eps=config.get("layer_norm_eps", 1e-12),
                    vocab=config["vocab_size"], bias=True)  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward pass reads, by name, with the shape the spec gives each (None: any)."""
        d, e = s.width, "embeddings."
        shapes = {e + "word_embeddings.weight": (s.vocab, d), e + "LayerNorm.weight": (d,), e + "LayerNorm.bias": (d,)}
        shapes |= {e + f"{kind}_embeddings.weight": None for kind in ("position", "token_type")}
        for layer in range(s.layers):
            p = f"encoder.layer.{layer}."
            for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                         "attention.output.dense"):  # fmt: skip
                shapes |= {p + name + ".weight": (d, d), p + name + ".bias": (d,)}
            for name in ("attention.output.LayerNorm", "output.LayerNorm"):
                shapes |= {p + name + ".weight": (d,), p + name + ".bias": (d,)}
            for name in ("intermediate.dense", "output.dense"):
                shapes |= {p + name + ".weight": None, p + name + ".bias": None}
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return tensors  # read as stored

    def norms(self, weights: dict, layer: int) -> None:
        """No q/k norm (Qwen3's alone)."""
        return None

    def projections(self, weights: dict, layer: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The layer's q, k, v weights (out, in) and biases (out,)."""
        out = {}
        for name, part in (("w_query", "query"), ("w_key", "key"), ("w_value", "value")):
            p = f"encoder.layer.{layer}.attention.self.{part}."
            out[name] = (weights[p + "weight"], weights[p + "bias"])
        return out

    def forward(self, model, ids: torch.Tensor, cache: None = None, edit: Edit | None = None) -> Pass:
        """Each layer's input, already layer-normed; no logits (an encoder predicts no next token)."""
        w, s = model.weights, model.spec
        n, e, eps = len(ids), "embeddings.", s.norm_eps
        h = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][self.first_position :][:n]
        h = layer_norm(h + w[e + "token_type_embeddings.weight"][0], w, e + "LayerNorm", eps)  # (n, d)
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"encoder.layer.{layer}."
            q, k, v = (linear(h, w, p + f"attention.self.{name}").unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)
                       for name in ("query", "key", "value"))  # (h, n, hd) each  # fmt: skip
            out, weights = attend_heads(q, k, v, layer, None, causal=False)  # no mask: one sentence, every token
            inputs.append(h), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            h = layer_norm(h + linear(out.transpose(0, 1).flatten(1), w, p + "attention.output.dense"), w,
                           p + "attention.output.LayerNorm", eps)  # fmt: skip
            inner = torch.nn.functional.gelu(linear(h, w, p + "intermediate.dense"))
            h = layer_norm(h + linear(inner, w, p + "output.dense"), w, p + "output.LayerNorm", eps)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), None)
