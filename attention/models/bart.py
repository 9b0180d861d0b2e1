"""The BART family of encoder-decoders (BART, mBART, Marian): its spec from a config, its tensors, its encoder's and
decoder's forward passes in plain torch (learned or sinusoidal positions, token embeddings scaled or not, LayerNorm
after each block (BART, Marian) or before it with a final one (mBART)), and each attention's q, k, v weights with
their biases (the case's ones column)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .model import Edit, Pass, attend_heads, layer_norm, linear
from .seq2seq import Decoded, PairCache, Special, activation, checked, heads_of, merged, record, special_tokens, stacked

POSITION_OFFSET = 2  # BART's and mBART's learned positions start at row 2 of their table (fairseq's padding rows)
ATTENTIONS = {"encoder": "self_attn", "decoder": "self_attn", "cross": "encoder_attn"}  # each part's module
EPS = 1e-5  # every LayerNorm's epsilon (torch's default: the configs name none)


@dataclass(frozen=True)  # a value: equal to any other of its family with the same config
class Bart:
    """An encoder-decoder with biases on q, k and v, 1/√head_dim, and no position term in its attention: positions
    are added to the token embeddings (BART's and mBART's learned, Marian's sinusoids)."""

    kind: str = "bart"  # config.json's model_type: "bart", "mbart" or "marian"
    scale_embedding: bool = False  # the token embeddings times √d_model (Marian's, often mBART's)
    act: str = "gelu"  # the MLP's activation (Marian's: swish)
    shared: bool = True  # one token embedding for both stacks (Marian's may have two)
    special: Special = field(default_factory=lambda: Special(2, 2))

    @classmethod
    def of(cls, config: dict) -> Bart:
        shared = config.get("share_encoder_decoder_embeddings", True) is not False
        return cls(config["model_type"], config.get("scale_embedding") is True,
                   str(config.get("activation_function", "gelu")), shared, special_tokens(config))  # fmt: skip

    @property
    def pre_norm(self) -> bool:
        """mBART's: each block reads its input LayerNormed, and each stack ends with a LayerNorm."""
        return self.kind == "mbart"

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json."""
        activation(self.act)  # one not computed here: said before anything is read
        checked(self.special, config["vocab_size"])
        heads, width = config["encoder_attention_heads"], config["d_model"]
        if config.get("decoder_attention_heads", heads) != heads:
            raise ValueError("an encoder and a decoder with different numbers of heads")
        return dict(layers=config["encoder_layers"], heads=heads, kv_heads=heads, head_dim=width // heads, width=width,
                    causal=False, rope_base=None, norm_eps=EPS, tied=config.get("tie_word_embeddings", True),
                    vocab=config["vocab_size"], bias=True, decoder_layers=config["decoder_layers"])  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward passes read, by name, with the shape the spec gives each (None: any)."""
        d = s.width
        shapes = {"shared.weight": None} if self.shared else {f"{stack}.embed_tokens.weight": None
                                                               for stack in ("encoder", "decoder")}  # fmt: skip
        norms = ("layernorm_embedding",) * (self.kind != "marian") + ("layer_norm",) * self.pre_norm
        for stack, layers in (("encoder", s.layers), ("decoder", s.decoder_layers)):
            if self.kind != "marian":  # Marian's sinusoids are made here when its file has none
                shapes[f"{stack}.embed_positions.weight"] = None
            shapes |= {f"{stack}.{norm}.{part}": (d,) for norm in norms for part in ("weight", "bias")}
            for layer in range(layers):
                p = f"{stack}.layers.{layer}."
                attentions = ("self_attn", "encoder_attn") if stack == "decoder" else ("self_attn",)
                for name in attentions:
                    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                        shapes |= {p + f"{name}.{proj}.weight": (d, d), p + f"{name}.{proj}.bias": (d,)}
                    shapes |= {p + f"{name}_layer_norm.{part}": (d,) for part in ("weight", "bias")}
                shapes |= {p + f"final_layer_norm.{part}": (d,) for part in ("weight", "bias")}
                shapes |= {p + f"{fc}.{part}": None for fc in ("fc1", "fc2") for part in ("weight", "bias")}
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The file's tensors with each stack's token embedding, the output layer (the decoder's embedding unless
        the file has its own), the logits' bias (zeros where the file has none) and Marian's sinusoids named."""
        out = dict(tensors)
        for stack in ("encoder", "decoder"):
            out.setdefault(f"{stack}.embed_tokens.weight", tensors.get("shared.weight"))
            if self.kind == "marian":
                out.setdefault(f"{stack}.embed_positions.weight", sinusoids(MAX_POSITIONS, s.width))
        out.setdefault("lm_head.weight", out["decoder.embed_tokens.weight"])
        out.setdefault("final_logits_bias", torch.zeros(1, len(out["lm_head.weight"])))
        return out

    def norms(self, weights: dict, layer: int) -> None:
        """No q/k norm (Qwen3's alone)."""
        return None

    def projections(self, weights: dict, layer: int, part: str = "encoder") -> dict[str, tuple]:
        """A part's layer's q, k, v weights (out, in) and biases (out,): the encoder's self-attention (the one the
        one-sentence pages show), the decoder's, or its cross-attention."""
        p = f"{'encoder' if part == 'encoder' else 'decoder'}.layers.{layer}.{ATTENTIONS[part]}."
        return {name: (weights[p + f"{x}_proj.weight"], weights[p + f"{x}_proj.bias"])
                for name, x in (("w_query", "q"), ("w_key", "k"), ("w_value", "v"))}  # fmt: skip

    def case_options(self, weights: dict, part: str, head: int | None) -> dict:
        """Nothing beyond 1/√head_dim and the biases: no position term in any of its attentions."""
        return {}

    def forward(self, model, ids: torch.Tensor, cache: None = None, edit: Edit | None = None) -> Pass:
        """The encoder alone, over one sentence (what the one-sentence pages show); no logits."""
        return self.encode(model, ids, edit)[0]

    def encode(self, model, ids: torch.Tensor, edit: Edit | None = None) -> tuple[Pass, torch.Tensor]:
        """The source through the encoder: each layer's attention input (normalised as it reads it), its heads'
        outputs and weights; and the encoder's output (n, d), as every cross-attention reads it."""
        w, s = model.weights, model.spec
        h = embedded(self, w, s, "encoder", ids, 0)  # (n, d)
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"encoder.layers.{layer}."
            x = self.block_input(h, w, p + "self_attn_layer_norm")
            q, k, v = (heads_of(linear(x, w, p + f"self_attn.{c}_proj"), s.head_dim) for c in "qkv")  # (h, n, hd)
            out, weights = attend_heads(q, k, v, layer, None, causal=False)  # every source token sees every other
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            h = self.block_output(h, linear(merged(out), w, p + "self_attn.out_proj"), w, p + "self_attn_layer_norm")
            h = self.mlp(h, w, p)
        memory = layer_norm(h, w, "encoder.layer_norm", EPS) if self.pre_norm else h
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), None), memory

    def decode(self, model, memory: torch.Tensor, ids: torch.Tensor, cache: PairCache | None = None) -> Decoded:
        """The target tokens ids (at positions cache.own.length, … with the caches) through the decoder: each layer's
        causal self-attention, then its cross-attention over the encoder's output `memory`; every token's logits."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.own.length
        h = embedded(self, w, s, "decoder", ids, start)  # (m, d)
        own, cross = ([], [], []), ([], [], [])
        for layer in range(s.decoder_layers):
            p = f"decoder.layers.{layer}."
            x = self.block_input(h, w, p + "self_attn_layer_norm")
            q, k, v = (heads_of(linear(x, w, p + f"self_attn.{c}_proj"), s.head_dim) for c in "qkv")
            out, weights = attend_heads(q, k, v, layer, None if cache is None else cache.own, causal=True)
            record(own, x, out, weights)
            h = self.block_output(h, linear(merged(out), w, p + "self_attn.out_proj"), w, p + "self_attn_layer_norm")
            x = self.block_input(h, w, p + "encoder_attn_layer_norm")  # the queries' rows; keys from the source
            k, v = self.cross_kv(model, memory, layer) if cache is None else cache.cross[layer]
            q = heads_of(linear(x, w, p + "encoder_attn.q_proj"), s.head_dim)
            out, weights = attend_heads(q, k, v, layer, None, causal=False)  # (h, m, hd), (h, m, n_src)
            record(cross, x, out, weights)
            h = self.block_output(h, linear(merged(out), w, p + "encoder_attn.out_proj"), w,
                                  p + "encoder_attn_layer_norm")  # fmt: skip
            h = self.mlp(h, w, p)
        if cache is not None:
            cache.own.length = start + len(ids)
        h = layer_norm(h, w, "decoder.layer_norm", EPS) if self.pre_norm else h
        logits = h @ w["lm_head.weight"].T + w["final_logits_bias"][0]  # (m, vocabulary)
        return Decoded(stacked(own), stacked(cross), logits)

    def cross_kv(self, model, memory: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A decoder layer's cross-attention keys and values of the source (h, n_src, head_dim) each."""
        p, d = f"decoder.layers.{layer}.encoder_attn.", model.spec.head_dim
        return tuple(heads_of(linear(memory, model.weights, p + f"{c}_proj"), d) for c in "kv")

    def block_input(self, h: torch.Tensor, w: dict, norm: str) -> torch.Tensor:
        """What a block reads: mBART's LayerNormed residual stream, BART's and Marian's as it is."""
        return layer_norm(h, w, norm, EPS) if self.pre_norm else h

    def block_output(self, h: torch.Tensor, delta: torch.Tensor, w: dict, norm: str) -> torch.Tensor:
        """The residual stream after a block: mBART's plus its output, BART's and Marian's then LayerNormed."""
        return h + delta if self.pre_norm else layer_norm(h + delta, w, norm, EPS)

    def mlp(self, h: torch.Tensor, w: dict, p: str) -> torch.Tensor:
        """A layer's MLP block (fc1, the activation, fc2) with its norm."""
        inner = activation(self.act)(linear(self.block_input(h, w, p + "final_layer_norm"), w, p + "fc1"))
        return self.block_output(h, linear(inner, w, p + "fc2"), w, p + "final_layer_norm")


def embedded(family: Bart, w: dict, s, stack: str, ids: torch.Tensor, start: int) -> torch.Tensor:
    """A stack's token embeddings (times √d_model with scale_embedding) plus their positions' (from `start`),
    LayerNormed (BART's, mBART's)."""
    at = torch.arange(start, start + len(ids), device=ids.device) + POSITION_OFFSET * (family.kind != "marian")
    scale = math.sqrt(s.width) if family.scale_embedding else 1.0
    h = w[f"{stack}.embed_tokens.weight"][ids] * scale + w[f"{stack}.embed_positions.weight"][at]
    return h if family.kind == "marian" else layer_norm(h, w, f"{stack}.layernorm_embedding", EPS)


MAX_POSITIONS = 1024  # Marian's sinusoids made here: as many as a sentence of a case could need


def sinusoids(positions: int, d: int) -> torch.Tensor:
    """Marian's position embeddings (positions, d): sin(t / 10000^(2k/d)) in the first half of the dims, cos in the
    second, in float64 then float32, as transformers' MarianSinusoidalPositionalEmbedding makes them."""
    t = torch.arange(positions, dtype=torch.float64)[:, None]
    angles = t / 10000 ** (2 * (torch.arange(d, dtype=torch.float64) // 2) / d)  # (positions, d): pairs share one
    half = (d + 1) // 2
    return torch.cat([angles[:, 0::2].sin()[:, :half], angles[:, 1::2].cos()], dim=1).float()
