"""The DeepSeek V2/V3 family (DeepSeek-V2-Lite, Moonlight): multi-head latent attention (MLA: keys and values made from
a latent c = RMSNorm(x W_DKV) of kv_lora_rank numbers a token, plus one decoupled rotary key shared by every head),
YaRN RoPE with its mscale in the scores' scale, and a mixture of experts (shared and routed experts; V2's softmax
top-k, V3's sigmoid with group-limited routing and its correction bias) after first_k_dense_replace dense layers, as
transformers' DeepseekV2 and DeepseekV3 compute them. Each head is a case through the core's MLA options."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..base.case import CaseError, rotary_dims
from ..base.i18n import msg
from ..forward.compute import rms_norm, rope, rope_theta
from .llama import interleaved, scaled_rope
from .model import Edit, KVCache, Pass, linear

LATENT_EPS = 1e-6  # kv_a_layernorm's ε: DeepseekV2/V3RMSNorm's default (the config's rms_norm_eps is not read for it)
# transformers' DeepseekV2Config's and DeepseekV3Config's defaults where a file has no such key
DEFAULTS = {
    "deepseek_v2": {"n_routed_experts": 64, "n_shared_experts": 2, "routed_scaling_factor": 1.0,
                    "topk_method": "greedy", "first_k_dense_replace": 0, "n_group": None, "topk_group": None,
                    "norm_topk_prob": False},
    "deepseek_v3": {"n_routed_experts": 256, "n_shared_experts": 1, "routed_scaling_factor": 2.5,
                    "topk_method": None, "first_k_dense_replace": 3, "n_group": 8, "topk_group": 4,
                    "norm_topk_prob": True},
}  # fmt: skip
TOP_K = {"deepseek_v2": None, "deepseek_v3": 8}  # num_experts_per_tok (V2's has no default: a file must give it)
MLA = {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}
MLP = ("gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)  # a value: equal to any other with the same numbers
class Routing:
    """A DeepSeek mixture of experts: how many, how a token's are chosen and weighed, as transformers' DeepseekV2 and
    DeepseekV3 routers and MoE blocks compute them."""

    version: int = 3  # 2: softmax scores, greedy or group-limited top-k; 3: sigmoid, its correction bias, groups
    experts: int = 256  # n_routed_experts
    top_k: int = 8  # num_experts_per_tok
    shared: int = 1  # n_shared_experts: one MLP of their width, on every token
    groups: int | None = 8  # n_group: the routed experts in groups; a token's experts from its top_groups best
    top_groups: int | None = 4  # topk_group
    limited: bool = True  # V2's topk_method "group_limited_greedy" (V3 always limits to groups)
    normalized: bool = True  # norm_topk_prob (V3's alone: transformers' V2 router does not read it)
    scale: float = 2.5  # routed_scaling_factor: the routed experts' weights times it
    dense: int = 3  # first_k_dense_replace: the first layers' feed-forward is one dense MLP

    @classmethod
    def of(cls, config: dict) -> Routing:
        """The routing from a config, as transformers' config class reads it (checked by check)."""
        kind = config.get("model_type")
        get = lambda key: config.get(key, DEFAULTS[kind][key])  # noqa: E731
        return cls(
            version=2 if kind == "deepseek_v2" else 3, experts=get("n_routed_experts"),
            top_k=config.get("num_experts_per_tok", TOP_K[kind]), shared=get("n_shared_experts"),
            groups=get("n_group"), top_groups=get("topk_group"),
            limited=kind == "deepseek_v3" or get("topk_method") == "group_limited_greedy",
            normalized=kind == "deepseek_v3" and bool(get("norm_topk_prob")), scale=get("routed_scaling_factor"),
            dense=get("first_k_dense_replace"),
        )  # fmt: skip

    def check(self) -> None:
        """The experts' numbers as whole numbers that transformers' router can run: a token's top-k of the
        experts, in groups that split them evenly (V3's take each group's best two)."""
        whole = (self.experts, self.top_k, self.shared, self.dense)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in whole) or not _number(self.scale):
            raise TypeError(f"n_routed_experts {self.experts}, num_experts_per_tok {self.top_k}")
        if not 1 <= self.top_k <= self.experts:
            raise ValueError(f"{self.top_k} experts per token of {self.experts}")
        if self.limited:
            groups, top = self.groups, self.top_groups
            if not (isinstance(groups, int) and isinstance(top, int) and 1 <= top <= groups) or self.experts % groups:
                raise ValueError(f"{self.experts} experts in {groups} groups, the best {top} of them")
            if self.version == 3 and self.experts // groups < 2:
                raise ValueError(f"{self.experts} experts in {groups} groups: fewer than 2 a group")

    def expected(self, p: str, d: int) -> dict[str, tuple[int, ...] | None]:
        """A MoE layer's tensors (under p, "layers.3."): the router, its correction bias (V3), every expert's MLP,
        the shared experts' MLP."""
        shapes = {p + "mlp.gate.weight": (self.experts, d)}
        if self.version == 3:
            shapes[p + "mlp.gate.e_score_correction_bias"] = (self.experts,)
        shapes |= {p + f"mlp.experts.{e}.{name}.weight": None for e in range(self.experts) for name in MLP}
        if self.shared:
            shapes |= {p + f"mlp.shared_experts.{name}.weight": None for name in MLP}
        return shapes

    def mixture(self, f: torch.Tensor, w: dict, p: str) -> torch.Tensor:
        """The layer's mixture of experts on f (m, d), as transformers' DeepseekV2Moe / DeepseekV3MoE: each token's
        chosen experts (route), each a SwiGLU MLP, their outputs summed by their weights; then the shared experts'
        MLP on every token added."""
        weights, chosen = self.route(f @ w[p + "mlp.gate.weight"].T, w, p)  # (m, k), (m, k)
        out = torch.zeros_like(f)  # (m, d)
        for expert in chosen.unique().tolist():  # in the experts' order, as transformers adds them
            token, slot = torch.where(chosen == expert)  # the tokens sent to it, and where it is in their top-k
            fed = mlp(f[token], w, p + f"mlp.experts.{expert}.")  # (t, d)
            out.index_add_(0, token, fed * weights[token, slot, None])
        return (out + mlp(f, w, p + "mlp.shared_experts.")) if self.shared else out

    def route(self, logits: torch.Tensor, w: dict, p: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Each token's experts (m, k) and their weights (m, k) from the router's logits (m, experts). V2: softmax
        scores, the top k (group-limited: within the top_groups groups of highest best score). V3: sigmoid scores,
        chosen by score + e_score_correction_bias within the top_groups groups of highest two-best sum, weighted by
        their scores alone (normalised to sum 1 with norm_topk_prob). Then times routed_scaling_factor."""
        m = len(logits)
        if self.version == 2:
            scores = choice = torch.softmax(logits, dim=-1)
            grouped = choice.view(m, self.groups, -1).max(dim=-1).values if self.limited else None
        else:
            scores = torch.sigmoid(logits)
            choice = scores + w[p + "mlp.gate.e_score_correction_bias"]
            grouped = choice.view(m, self.groups, -1).topk(2, dim=-1)[0].sum(dim=-1)  # (m, groups)
        if grouped is not None:  # the experts outside a token's best groups cannot be chosen
            best = torch.topk(grouped, k=self.top_groups, dim=-1, sorted=False)[1]
            kept = torch.zeros_like(grouped, dtype=torch.bool).scatter_(1, best, True)  # (m, groups)
            kept = kept[:, :, None].expand(m, self.groups, self.experts // self.groups).reshape(m, self.experts)
            choice = choice.masked_fill(~kept, 0.0 if self.version == 2 else float("-inf"))
        chosen = torch.topk(choice, k=self.top_k, dim=-1, sorted=False)[1]  # (m, k)
        weights = choice.gather(1, chosen) if self.version == 2 else scores.gather(1, chosen)
        if self.normalized:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return weights * self.scale, chosen


@dataclass(frozen=True)  # a value: equal to any other of its family with the same layout and experts
class DeepSeek:
    """A DeepSeek V2 or V3 decoder. Each head's query rows are kept rotary part first (the core turns a head's first
    dims), and the rotary dims of q and of the latent's rotary key in the interleaved pairs (2p, 2p + 1) the core
    turns: V2's complex RoPE and V3's rope_interleave pair them so; V3 without it pairs p with p + d_rot/2 (reordered
    on load)."""

    pairs: bool = True  # rope_interleave: the rotary dims in pairs (2p, 2p + 1) (V2's always), else in halves
    routing: Routing = Routing()  # its experts

    @classmethod
    def of(cls, config: dict) -> DeepSeek:
        """The family from a config, as transformers' config class reads it (checked by sizes)."""
        pairs = config.get("model_type") == "deepseek_v2" or bool(config.get("rope_interleave", True))
        return cls(pairs, Routing.of(config))

    def sizes(self, config: dict) -> dict:
        """The spec's numbers from a Hugging Face config.json; low-rank queries (q_lora_rank), quantized weights,
        biases and a routing that transformers cannot run are refused before any weight is read."""
        mla = {key: config.get(key, default) for key, default in MLA.items()}
        if mla["q_lora_rank"] is not None:  # said in the family's own words (sources.spec_of names the config)
            raise CaseError("config.json", msg("error.model_low_rank_queries", rank=mla["q_lora_rank"]))
        if config.get("quantization_config"):  # DeepSeek-V3's released weights: FP8 blocks and their scales
            raise ValueError(f"quantized weights ({config['quantization_config'].get('quant_method', '?')})")
        if config.get("attention_bias"):  # no released DeepSeek has them
            raise ValueError("biases on the attention's projections (attention_bias)")
        if config.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {config['hidden_act']}")
        if self.routing.version == 2 and config.get("topk_method", "greedy") not in ("greedy", "group_limited_greedy"):
            raise ValueError(f"topk_method {config['topk_method']}")
        self.routing.check()
        nope, d_rot, rank = mla["qk_nope_head_dim"], mla["qk_rope_head_dim"], mla["kv_lora_rank"]
        if d_rot < 2 or d_rot % 2 or nope < 0 or rank < 1 or mla["v_head_dim"] < 1:
            raise TypeError(f"qk_rope_head_dim {d_rot}, qk_nope_head_dim {nope}, kv_lora_rank {rank}")
        heads, head_dim = config["num_attention_heads"], nope + d_rot
        return dict(
            layers=config["num_hidden_layers"], heads=heads, kv_heads=heads, head_dim=head_dim,
            width=config["hidden_size"], causal=True, norm_eps=config.get("rms_norm_eps", 1e-6),
            tied=config.get("tie_word_embeddings", False), vocab=config["vocab_size"], bias=False,
            rope_fraction=rope_fraction(d_rot, head_dim), **rotary(config, d_rot, head_dim), latent=rank,
            value_dim=mla["v_head_dim"], experts=(self.routing.experts, self.routing.top_k),
        )  # fmt: skip

    def expected(self, s) -> dict[str, tuple[int, ...] | None]:
        """The tensors the forward pass reads, by name, with the shape the spec gives each (None: any)."""
        d, h, d_rot = s.width, s.heads, rotary_dims(s.head_dim, s.rope_fraction)
        shapes = {"embed_tokens.weight": (s.vocab, d), "norm.weight": (d,)}
        if not s.tied:
            shapes["lm_head.weight"] = (s.vocab, d)
        for layer in range(s.layers):
            p = f"layers.{layer}."
            shapes |= {p + f"{norm}.weight": (d,) for norm in ("input_layernorm", "post_attention_layernorm")}
            shapes |= {p + "self_attn.q_proj.weight": (h * s.head_dim, d),
                       p + "self_attn.kv_a_proj_with_mqa.weight": (s.latent + d_rot, d),
                       p + "self_attn.kv_a_layernorm.weight": (s.latent,),
                       p + "self_attn.kv_b_proj.weight": (h * (s.head_dim - d_rot + s.value_dim), s.latent),
                       p + "self_attn.o_proj.weight": (d, h * s.value_dim)}  # fmt: skip
            if layer < self.routing.dense:
                shapes |= {p + f"mlp.{name}.weight": None for name in MLP}
            else:
                shapes |= self.routing.expected(p, d)
        return shapes

    def weights(self, s, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The file's tensors as the forward pass reads them: each head's query rows rotary part first, the rotary
        rows of q and of kv_a_proj_with_mqa in interleaved pairs; layers past num_hidden_layers (V3's multi-token
        prediction module, which transformers does not run either) left out."""
        d_rot = rotary_dims(s.head_dim, s.rope_fraction)
        out = {}
        for name, t in tensors.items():
            layer = name.split(".")[1] if name.startswith("layers.") else ""
            if layer.isdigit() and int(layer) >= s.layers:
                continue
            if name.endswith("self_attn.q_proj.weight"):
                heads = t.unflatten(0, (s.heads, s.head_dim))  # (h, nope + d_rot, d): the rotary part last
                turned = heads[:, s.head_dim - d_rot :].flatten(0, 1)  # (h · d_rot, d)
                turned = (turned if self.pairs else interleaved(turned, s.heads)).unflatten(0, (s.heads, d_rot))
                t = torch.cat([turned, heads[:, : s.head_dim - d_rot]], dim=1).flatten(0, 1)  # rotary first
            elif name.endswith("self_attn.kv_a_proj_with_mqa.weight") and not self.pairs:
                t = torch.cat([t[: s.latent], interleaved(t[s.latent :], 1)])
            out[name] = t.contiguous()
        return out

    def norms(self, weights: dict, layer: int) -> None:
        """No q/k norm (the latent's norm is the case's latent_norm)."""
        return None

    def latent_heads(self, weights: dict, s, layer: int, head: int | None = None) -> dict[str, torch.Tensor]:
        """One head's (or with head None every head's, side by side) W_Q (d_in, d_head), W_UK (d_c + d_rot, d_head)
        and W_UV (d_c + d_rot, d_v) of a layer (0-based), as tests/test_latent.py's deepseek_case lays them out:
        W_UK's compressed rows (kv_b_proj's key part) reach a head's unturned dims, and an identity block copies the
        latent's rotary key into its turned dims; W_UV reads the compressed part alone."""
        p, d_rot = f"layers.{layer}.self_attn.", rotary_dims(s.head_dim, s.rope_fraction)
        nope, rank, chosen = s.head_dim - d_rot, s.latent, slice(None) if head is None else slice(head, head + 1)
        w_q = weights[p + "q_proj.weight"].unflatten(0, (s.heads, s.head_dim))[chosen]  # (k, d_head, d_in)
        w_kv = weights[p + "kv_b_proj.weight"].unflatten(0, (s.heads, nope + s.value_dim))[chosen]  # (k, ·, d_c)
        k = len(w_q)
        w_key = w_q.new_zeros(rank + d_rot, k, s.head_dim)
        w_key[:rank, :, d_rot:] = w_kv[:, :nope].permute(2, 0, 1)  # (d_c, k, nope)
        w_key[rank:, :, :d_rot] = torch.eye(d_rot, dtype=w_q.dtype, device=w_q.device)[:, None]  # the rotary key
        w_value = torch.cat([w_kv[:, nope:].permute(2, 0, 1).flatten(1), w_q.new_zeros(d_rot, k * s.value_dim)])
        return {"w_query": w_q.flatten(0, 1).T, "w_key": w_key.flatten(1), "w_value": w_value}

    def latent_options(self, weights: dict, s, layer: int) -> dict:
        """The layer's W_DKV (d_in, d_c + d_rot: the compressed part, then the rotary key) and the latent's norm
        (γ of the compressed part, its ε), as the case's options."""
        p = f"layers.{layer}.self_attn."
        w_latent = weights[p + "kv_a_proj_with_mqa.weight"].T.detach().cpu().numpy().tolist()
        norm = weights[p + "kv_a_layernorm.weight"].tolist()
        return {"w_latent": tuple(map(tuple, w_latent)), "latent_norm": tuple(norm), "norm_eps": LATENT_EPS}

    def forward(self, model, ids: torch.Tensor, cache: KVCache | None = None, edit: Edit | None = None) -> Pass:
        """The tokens ids (at positions cache.length, … with a cache: their latents appended) through every layer;
        the logits of the last one."""
        w, s = model.weights, model.spec
        start = 0 if cache is None else cache.length
        at = torch.arange(start, start + len(ids), device=ids.device)  # the tokens' positions
        theta = rope_theta(s, rotary_dims(s.head_dim, s.rope_fraction))  # (d_rot/2,): YaRN's, or the paper's
        h = w["embed_tokens.weight"][ids]  # (m, d)
        inputs, head_outputs, every = [], [], []
        for layer in range(s.layers):
            p = f"layers.{layer}."
            x = rms_norm(h, w[p + "input_layernorm.weight"], s.norm_eps)  # (m, d): what the attention reads
            out, weights = latent_attention(model, layer, x, at, theta, cache)  # (h, m, d_v), (h, m, n)
            inputs.append(x), head_outputs.append(out), every.append(weights)
            if edit is not None:  # heads switched off or patched: before the output projection mixes them
                out = edit(layer, out)
            h = h + out.transpose(0, 1).flatten(1) @ w[p + "self_attn.o_proj.weight"].T
            f = rms_norm(h, w[p + "post_attention_layernorm.weight"], s.norm_eps)
            h = h + (mlp(f, w, p + "mlp.") if layer < self.routing.dense else self.routing.mixture(f, w, p))
        if cache is not None:
            cache.length = start + len(ids)
        last = rms_norm(h[-1:], w["norm.weight"], s.norm_eps)  # the next token is predicted from the last alone
        logits = last @ w["embed_tokens.weight" if s.tied else "lm_head.weight"].T  # (1, vocabulary)
        return Pass(torch.stack(inputs), torch.stack(head_outputs), torch.stack(every), logits)


def latent_attention(model, layer: int, x, at, theta, cache: KVCache | None) -> tuple[torch.Tensor, torch.Tensor]:
    """One layer's multi-head latent attention on x (m, d): the new tokens' latents c = RMSNorm(x W_DKV) and
    rotary keys (appended to the cache, which keeps nothing else), every head's keys and values made from every
    latent so far by kv_b_proj, its rotary key beside; causal. Returns outputs (h, m, d_v), weights (h, m, n)."""
    w, s, p = model.weights, model.spec, f"layers.{layer}.self_attn."
    d_rot, rank, m = 2 * len(theta), s.latent, len(x)
    q = linear(x, w, p + "q_proj").unflatten(-1, (s.heads, s.head_dim)).transpose(0, 1)  # (h, m, d_head)
    compressed = linear(x, w, p + "kv_a_proj_with_mqa")  # (m, d_c + d_rot)
    c = rms_norm(compressed[:, :rank], w[p + "kv_a_layernorm.weight"], LATENT_EPS)  # (m, d_c)
    q, k_rot = rope(q, at, theta), rope(compressed[:, rank:], at, theta)  # (h, m, d_head), (m, d_rot)
    if s.rope_attention != 1.0:  # YaRN's factor on cos and sin: the turned dims of q and k grow by it
        q, k_rot = torch.cat([q[..., :d_rot] * s.rope_attention, q[..., d_rot:]], -1), k_rot * s.rope_attention
    start = 0 if cache is None else cache.length
    n = start + m
    if cache is not None:  # the latent and the rotary key appended: all that a token leaves
        cache.keys[layer, 0, start:n], cache.values[layer, 0, start:n] = c, k_rot
        c, k_rot = cache.keys[layer, 0, :n], cache.values[layer, 0, :n]  # (n, d_c), (n, d_rot)
    kv = linear(c, w, p + "kv_b_proj").unflatten(-1, (s.heads, -1)).transpose(0, 1)  # (h, n, nope + d_v)
    k_nope, v = kv.split((s.head_dim - d_rot, s.value_dim), dim=-1)
    k = torch.cat([k_rot.expand(s.heads, n, d_rot), k_nope], dim=-1)  # (h, n, d_head): rotary first, as q's
    scores = q @ k.mT * s.scale  # (h, m, n)
    allowed = torch.ones(m, n, dtype=torch.bool, device=x.device).tril(diagonal=start)  # token i sees j ≤ i
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights


def rotary(config: dict, d_rot: int, head_dim: int) -> dict:
    """RoPE as the config says (its base, YaRN's frequencies over the d_rot rotary dims and its factor on cos and sin)
    and the scores' scale: head_dim^(−1/2), times YaRN's mscale squared where mscale_all_dim is given (transformers'
    yarn_apply_mscale)."""
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})  # transformers 5, and 4's
    kind = rope.get("rope_type", rope.get("type", "default"))
    base = float(rope.get("rope_theta", config.get("rope_theta", 10000.0)))
    frequencies, attention = scaled_rope(kind, rope, base, d_rot, config)  # over the rotary dims alone
    scale = head_dim**-0.5
    if kind != "default" and rope.get("mscale_all_dim"):
        factor = rope["factor"]
        mscale = 1.0 if factor <= 1 else 0.1 * rope["mscale_all_dim"] * math.log(factor) + 1.0
        scale = scale * mscale * mscale
    return dict(rope_base=base, rope_frequencies=frequencies, rope_scaling=None if frequencies is None else kind,
                rope_attention=attention, scale=scale)  # fmt: skip


def mlp(f: torch.Tensor, w: dict, p: str) -> torch.Tensor:
    """A SwiGLU MLP (a dense layer's, an expert's, the shared experts'): down(silu(gate(f)) · up(f)); V2's biases
    where mlp_bias gives them."""
    return linear(torch.nn.functional.silu(linear(f, w, p + "gate_proj")) * linear(f, w, p + "up_proj"), w,
                  p + "down_proj")  # fmt: skip


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def rope_fraction(d_rot: int, head_dim: int) -> float | None:
    """The partial-rotary fraction whose int(head_dim · fraction) is d_rot exactly (d_rot / head_dim, nudged up where
    its float rounds below: 2 / 49 · 49 is 1.9999…); None when RoPE turns the whole head."""
    if d_rot == head_dim:
        return None
    fraction = d_rot / head_dim
    while rotary_dims(head_dim, fraction) < d_rot:
        fraction = math.nextafter(fraction, 1.0)
    return fraction
