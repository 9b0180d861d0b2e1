"""Decoding with a KV cache: attention one token at a time, as a chat model generates, recorded and checked
against the whole causal computation (the trace of the same case with a causal mask)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import torch

from .case import Case, CaseError, with_options
from .core import Trace, attend, option_tensors, positions, rope, scale_factor
from .devices import resolve_device, synchronize
from .i18n import Message, msg
from .numbers import approx

Tensor = torch.Tensor
AGREES_RTOL = 1e-5  # output t against row t of the causal trace: the same sums in another order (float32)
# Decoded steps: a sentence's worth (the generation's limit, models.MAX_SENTENCE_TOKENS). Past it the first ones are
# decoded, as step 8 repeats the first 16 queries: a Python loop of 1,024 steps took 8.6 s at the limits (16 heads)
MAX_DECODE_N = 64

# What each axis of a decoding step's tensors is; with heads > 1 the per-head ones have the head axis first (the
# cache's is the key/value head: with grouped-query attention, fewer than the query heads)
AXES = {
    "x_t": ("token", "feature"),
    "q_t": ("token", "query dim"),
    "k_t": ("token", "key dim"),
    "v_t": ("token", "value dim"),
    "k_cache": ("key", "key dim"),
    "v_cache": ("key", "value dim"),
    "scores_t": ("query", "key"),
    "weights_t": ("query", "key"),
    "output_t": ("query", "output dim"),
}
PER_HEAD = {"q_t", "k_t", "v_t", "k_cache", "v_cache", "scores_t", "weights_t"}


@dataclass(frozen=True)
class DecodeStep:
    """Decoding step t (from 0): token t's query, key and value, the cache after k_t and v_t were appended, q_t's
    scores and weights against it, and output t; its largest difference from row t of the causal trace."""

    t: int
    tensors: Mapping[str, Tensor]  # by name (AXES), on the CPU; the caches are views of the final cache's rows
    difference: float  # |output t − row t of the causal trace|, largest
    agrees: bool
    seconds: float  # time on the device, synchronised

    def __getitem__(self, name: str) -> Tensor:
        return self.tensors[name]

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(tensor.shape) for name, tensor in self.tensors.items()}


@dataclass(frozen=True)
class Decoding:
    """A case decoded token by token with a KV cache: its steps, and the causal trace each step is checked with."""

    case: Case  # as decoded: causal, the exact softmax
    # the whole causal computation's scores, its rows of the decoded tokens (h?, m, n): not the trace itself, which
    # the session's cache holds and may drop (at the limits a decoding holding it kept a second 192 MiB trace alive)
    causal_scores: Tensor
    steps: tuple[DecodeStep, ...]
    outputs: Tensor  # (n, d_out): the steps' outputs stacked (the first MAX_DECODE_N rows past it)
    notes: tuple[Message, ...] = ()  # what decoding changed of the case as given (no mask, rounded weights)

    def tensors_held(self) -> list[Tensor]:
        """Every tensor it holds, for the session's cache to count (app/cache.py)."""
        return [self.causal_scores, self.outputs, *(tensor for step in self.steps for tensor in step.tensors.values())]

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def difference(self) -> float:
        return max(step.difference for step in self.steps)

    @property
    def agrees(self) -> bool:
        return all(step.agrees for step in self.steps)

    def worst(self) -> int:
        """The step (from 0) whose output is furthest from its row of the causal trace."""
        return max(range(self.n), key=lambda t: self.steps[t].difference)

    def status(self) -> Message:
        """The status row: whether every output t equals row t of the causal trace, and the largest difference."""
        said = {"n": self.n, "difference": self.difference, "row": self.worst() + 1}
        return msg("decoding.agrees" if self.agrees else "decoding.differs", **said)

    def axes(self, name: str) -> tuple[str, ...]:
        return ("head", *AXES[name]) if name in PER_HEAD and self.case.options.heads > 1 else AXES[name]

    def _repr_html_(self) -> str:
        """The steps with their tensors' shapes and differences, as HTML: how a decoding shows itself in Jupyter."""
        from .notebook import decoding_html  # only a notebook needs it

        return decoding_html(self)


def decodable(case: Case) -> Case:
    """The case as decoding runs it: causal (decoding can only look back: key j does not exist yet while token i <
    j is decoded) and with the exact softmax; CaseError for a custom mask that is not the causal one."""
    mask = case.options.mask
    if isinstance(mask, tuple):
        for i, row in enumerate(mask):
            for j, allowed in enumerate(row):
                if bool(allowed) != (j <= i):
                    problem = msg("decoding.mask_future" if j > i else "decoding.mask_past")
                    raise CaseError(msg("decoding.where_mask", row=i + 1, column=j + 1), problem)
    return with_options(case, mask="causal", weights_override=None)


def decode(case: Case, causal: Trace | None = None) -> Decoding:
    """Decode the case token by token with a KV cache (its first MAX_DECODE_N tokens), each step checked against
    row t of its causal trace (`causal`, when it is already made: the trace of decodable(case))."""
    given, case = case, decodable(case)
    notes = tuple(_notes(given))
    causal = attend(case) if causal is None else causal
    if causal.case != case:
        raise ValueError("the causal trace given is not of the case as decoded")
    o = case.options
    device, dtype = resolve_device(o.device), getattr(torch, o.dtype)
    h, g = o.heads, o.kv_heads or o.heads
    _, _, w_out = option_tensors(case, device)  # (d_v, d_out) or None
    x = torch.tensor(case.x, dtype=dtype, device=device)  # (n, d_in)
    w_query, w_key, w_value = (torch.tensor(w, dtype=dtype, device=device) for w in (case.w_query, case.w_key,
                                                                                     case.w_value))  # fmt: skip
    at = positions(case)  # (n,): each token's position for RoPE
    multiplier = scale_factor(case) / o.temperature
    # the cache, allocated whole and filled a row a step: (g, n, d_head) keys and (g, n, d_v/g) values
    k_cache = torch.empty(g, case.n, w_key.shape[1] // g, dtype=dtype, device=device)
    v_cache = torch.empty(g, case.n, w_value.shape[1] // g, dtype=dtype, device=device)
    rows, steps = causal.outputs.cpu(), []
    for t in range(min(case.n, MAX_DECODE_N)):
        start = _now(device)
        x_t = x[t : t + 1]  # (1, d_in): token t alone
        q_t = (x_t @ w_query).view(h, 1, -1)  # (h, 1, d_head): only token t's query is computed
        k_t, v_t = (x_t @ w_key).view(g, 1, -1), (x_t @ w_value).view(g, 1, -1)  # (g, 1, d): its key and value
        if o.rope_base is not None:  # turned once, at token t's own position: a cached key is never turned again
            q_t, k_t = rope(q_t, at[t : t + 1], o.rope_base), rope(k_t, at[t : t + 1], o.rope_base)
        k_cache[:, t : t + 1], v_cache[:, t : t + 1] = k_t, v_t  # appended: the cache holds tokens 0..t
        keys, values = k_cache[:, : t + 1], v_cache[:, : t + 1]  # (g, t + 1, d)
        # grouped-query attention: query heads i·h/g … (i+1)·h/g − 1 read key/value head i (no copy of the cache)
        scores_t = (q_t.view(g, h // g, -1) @ keys.mT * multiplier).view(h, 1, t + 1)  # (h, 1, t + 1)
        weights_t = torch.softmax(scores_t, dim=-1)  # (h, 1, t + 1)
        heads_t = (weights_t.view(g, h // g, t + 1) @ values).view(h, 1, -1)  # (h, 1, d_v/h)
        output_t = heads_t.transpose(0, 1).flatten(1)  # (1, d_v): the heads side by side
        output_t = output_t if w_out is None else output_t @ w_out  # (1, d_out)
        seconds = _now(device) - start
        tensors = {"x_t": x_t, "q_t": q_t, "k_t": k_t, "v_t": v_t, "k_cache": keys, "v_cache": values}
        tensors |= {"scores_t": scores_t, "weights_t": weights_t, "output_t": output_t}
        tensors = {name: _shaped(tensor.detach().cpu(), name, h) for name, tensor in tensors.items()}
        difference, agrees = _against(tensors["output_t"], rows[t : t + 1])
        steps.append(DecodeStep(t, MappingProxyType(tensors), difference, agrees, seconds))
    outputs = torch.cat([step["output_t"] for step in steps])  # (n, d_out)
    causal_scores = causal["scores"][..., : len(steps), :].clone()  # (h?, m, n): a copy, not a view of the trace's
    return Decoding(case, causal_scores, tuple(steps), outputs, notes)


def _shaped(tensor: Tensor, name: str, heads: int) -> Tensor:
    """One head's tensors without the head axis (as the core's trace records a single head)."""
    return tensor[0] if heads == 1 and name in PER_HEAD else tensor


def _against(output_t: Tensor, row_t: Tensor) -> tuple[float, bool]:
    difference = (output_t.double() - row_t.double()).abs().max().item()
    return difference, difference <= AGREES_RTOL * (1 + row_t.abs().max().item())


def _now(device: torch.device) -> float:
    synchronize(device)
    return time.perf_counter()


def _notes(case: Case):
    """What decoding changes of the case as given, said beside it."""
    if case.options.mask is None:
        yield msg("decoding.note_made_causal")
    if case.options.weights_override is not None:
        yield msg("decoding.note_exact")
    if case.n > MAX_DECODE_N:
        yield msg("decoding.note_first", m=MAX_DECODE_N, n=case.n)


# Work and memory, each way -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """What the cost of decoding depends on: one attention layer's widths (or a model's), and the number's bytes."""

    d_in: int
    heads: int
    kv_heads: int
    d_head: int  # a query and key head's width
    d_value_head: int
    d_out: int | None  # w_out's width, None: none
    layers: int = 1
    bytes: int = 4  # float32

    @classmethod
    def of(cls, case: Case) -> Sizes:
        o, w_out = case.options, case.options.w_out
        g = o.kv_heads or o.heads
        itemsize = torch.empty(0, dtype=getattr(torch, o.dtype)).element_size()
        return cls(case.d_in, o.heads, g, case.d_head, case.d_v // g, None if w_out is None else len(w_out[0]),
                   bytes=itemsize)  # fmt: skip


def multiply_adds(s: Sizes, t: int, cache: bool) -> int:
    """Multiply-adds of attention for token t (from 0), with the cache (token t's q, k, v, its one row of scores
    and weighted sum) or without (the whole causal computation of tokens 0..t again: every q, k, v and row)."""
    rows = 1 if cache else t + 1  # queries computed; the keys they are scored against: t + 1 either way
    projections = (t + 1 if not cache else 1) * s.d_in * (s.heads * s.d_head + s.kv_heads * (s.d_head + s.d_value_head))
    attention = rows * (t + 1) * s.heads * (s.d_head + s.d_value_head)  # q·k, then the weights times v
    projection_out = 0 if s.d_out is None else rows * s.heads * s.d_value_head * s.d_out
    return s.layers * (projections + attention + projection_out)


def cache_bytes_per_token(s: Sizes) -> int:
    """The cache's bytes per token: 2 (a key and a value) × layers × kv_heads × d_head × bytes, or where a value
    head is not as wide as a key head, layers × kv_heads × (d_head + its width) × bytes."""
    return s.layers * s.kv_heads * (s.d_head + s.d_value_head) * s.bytes


def measured_cache_bytes(decoding: Decoding) -> int:
    """The bytes of the cache a decoding really filled (its last step's keys and values)."""
    last = decoding.steps[-1]
    return sum(last[name].numel() * last[name].element_size() for name in ("k_cache", "v_cache"))


def model_sizes(spec, bytes: int = 4) -> Sizes:
    """A model's sizes (a models.Spec: layers, heads, kv_heads, head_dim, width), its attention with w_out."""
    return Sizes(spec.width, spec.heads, spec.kv_heads, spec.head_dim, spec.head_dim, spec.width, spec.layers, bytes)


def full_heads(s: Sizes) -> Sizes:
    """The same sizes without grouped-query attention: one key/value head per query head."""
    return Sizes(s.d_in, s.heads, s.heads, s.d_head, s.d_value_head, s.d_out, s.layers, s.bytes)


def mib(count: int) -> float:
    return count / 2**20


def step_of(n: int, said: str | None) -> int | None:
    """The decoding step (from 0) a link or a person names as token t from 1, of n; None when there is none."""
    if not said or not said.isascii() or not said.isdigit() or len(said) > 4:
        return None
    t = int(said) - 1
    return t if 0 <= t < n else None


# Explain a cached score ------------------------------------------------------------------------------------------

EXPLAIN_TERMS = 8  # a dot product of more terms shows its first ones, then "…"


def explain_score(decoding: Decoding, t: int, j: int, head: int | None = None) -> tuple[Message, ...]:
    """Why score j of decoding step t (from 0) is what it is: q_t · k_j with k_j read from the cache (made once, at
    step j), scaled; then the same number in the whole causal computation's scores."""
    o, step = decoding.case.options, decoding.steps[t]
    h = 0 if head is None else head
    kv = h // (o.heads // (o.kv_heads or o.heads))  # the key/value head this query head reads
    q_t, keys = step["q_t"], step["k_cache"]
    q_t, k_j = (q_t[h, 0], keys[kv, j]) if o.heads > 1 else (q_t[0], keys[j])
    value = (step["scores_t"][h, 0, j] if o.heads > 1 else step["scores_t"][0, j]).item()
    causal = decoding.causal_scores
    causal = (causal[h] if o.heads > 1 else causal)[t, j].item()
    terms = [f"{approx(a)}·{approx(b)}" for a, b in zip(q_t.tolist(), k_j.tolist(), strict=True)]
    shown = " + ".join(terms[:EXPLAIN_TERMS]) + (" + …" if len(terms) > EXPLAIN_TERMS else "")
    raw = float(q_t.double() @ k_j.double())
    multiplier = scale_factor(decoding.case) / o.temperature
    at = int(positions(decoding.case)[j])
    turned = msg("decoding.explain_turned", position=at) if o.rope_base is not None else ""
    lines = [
        msg("decoding.explain_cache", j=j + 1, t=t + 1, turned=turned),
        msg("decoding.explain_dot", t=t + 1, j=j + 1, terms=shown, raw=approx(raw), count=len(terms)),
    ]
    if multiplier != 1:
        scaled = {"raw": approx(raw), "multiplier": approx(multiplier), "value": approx(value)}
        lines.append(msg("decoding.explain_scaled", **scaled))
    lines.append(msg("decoding.explain_same", t=t + 1, j=j + 1, causal=approx(causal), value=approx(value)))
    return tuple(lines)


# The exported script -----------------------------------------------------------------------------------------------


SCRIPT_ROPE = [  # the exported script's RoPE: the core's rope(), written out
    "def rope(m, t):",
    '    """Pair p of each row (dims 2p, 2p+1) turned by the angle t·base^(−2p/d), t the positions (n,)."""',
    "    if ROPE_BASE is None:",
    "        return m",
    "    d = m.shape[-1]",
    "    angles = t.double()[:, None] * ROPE_BASE ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)",
    "    cos, sin = angles.cos().to(m.dtype), angles.sin().to(m.dtype)",
    "    even, odd = m[..., 0::2], m[..., 1::2]",
    "    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)",
    "",
    "",
]


def decoding_script(case: Case) -> str:
    """Python source, torch alone: the case's numbers decoded token by token with a KV cache, asserted equal to the
    whole causal computation of the same numbers (every query at once under a causal mask)."""
    from .script import _literal  # the exported scripts' own way of writing a matrix

    case = decodable(case)
    o, dtype = case.options, f"torch.{case.options.dtype}"
    h, g = o.heads, o.kv_heads or o.heads
    at = list(o.positions) if o.positions is not None else list(range(case.n))
    lines = [
        '"""Decoding with a KV cache, one token at a time, checked against the whole causal computation (generated;',
        'needs torch)."""',
        "",
        "import torch",
        "",
        *_literal("x", case.x, labels=case.tokens),
        *_literal("w_query", case.w_query),
        *_literal("w_key", case.w_key),
        *_literal("w_value", case.w_value),
        *(_literal("w_out", o.w_out) if o.w_out is not None else ["w_out = None"]),
        f"x, w_query, w_key, w_value = (torch.tensor(m, dtype={dtype}) for m in (x, w_query, w_key, w_value))",
        f"w_out = None if w_out is None else torch.tensor(w_out, dtype={dtype})",
        f"H, G = {h}, {g}  # query heads, and key/value heads (each shared by H // G query heads)",
        f"MULTIPLIER = {scale_factor(case) / o.temperature!r}  # the scale over the temperature",
        f"ROPE_BASE = {o.rope_base!r}  # None: no rotary position embedding",
        f"POSITIONS = torch.tensor({at})",
        "",
        "",
        *SCRIPT_ROPE,
        "# The whole causal computation: every query at once, a key after its query masked",
        "n = len(x)",
        "queries = rope((x @ w_query).unflatten(-1, (H, -1)).transpose(0, 1), POSITIONS)  # (H, n, d)",
        "keys = rope((x @ w_key).unflatten(-1, (G, -1)).transpose(0, 1), POSITIONS).repeat_interleave(H // G, 0)",
        "values = (x @ w_value).unflatten(-1, (G, -1)).transpose(0, 1).repeat_interleave(H // G, 0)  # (H, n, d_v)",
        "scores = (queries @ keys.mT * MULTIPLIER).masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -torch.inf)",
        "causal = (torch.softmax(scores, dim=-1) @ values).transpose(0, 1).flatten(1)  # (n, d_v): heads side by side",
        "causal = causal if w_out is None else causal @ w_out",
        "",
        "# Decoding: token t's query, key and value alone; k_t and v_t appended to the cache",
        "k_cache, v_cache, outputs = [], [], []",
        "for t in range(n):",
        "    x_t = x[t : t + 1]  # (1, d_in)",
        "    q_t = rope((x_t @ w_query).view(H, 1, -1), POSITIONS[t : t + 1])  # (H, 1, d)",
        "    k_t = rope((x_t @ w_key).view(G, 1, -1), POSITIONS[t : t + 1])  # turned once, at its own position",
        "    v_t = (x_t @ w_value).view(G, 1, -1)",
        "    k_cache.append(k_t)",
        "    v_cache.append(v_t)",
        "    keys_t, values_t = torch.cat(k_cache, dim=1), torch.cat(v_cache, dim=1)  # (G, t + 1, d): the cache",
        "    scores_t = q_t.view(G, H // G, -1) @ keys_t.mT * MULTIPLIER  # (G, H/G, t + 1): one row per head",
        "    weights_t = torch.softmax(scores_t, dim=-1)",
        "    output_t = (weights_t @ values_t).view(H, 1, -1).transpose(0, 1).flatten(1)  # (1, d_v)",
        "    outputs.append(output_t if w_out is None else output_t @ w_out)",
        '    print(f"step {t + 1}: {t + 1} cached keys, output", outputs[-1])',
        "decoded = torch.cat(outputs)",
        "torch.testing.assert_close(decoded, causal)  # output t is row t of the causal computation",
        'print("decoding with the cache equals the causal computation; largest difference:",',
        "      (decoded - causal).abs().max().item())",
    ]
    return "\n".join(lines) + "\n"


def dump_decoding(decoding: Decoding) -> str:
    """The decoding as JSON text: the status, then each step's tensors' shapes, its output and its difference."""
    import json

    steps = [
        {"token": step.t + 1, "label": decoding.case.tokens[step.t],
         "shapes": {name: " × ".join(map(str, shape)) for name, shape in step.shapes().items()},
         "output": step["output_t"][0].tolist(), "difference": step.difference, "agrees": step.agrees}
        for step in decoding.steps
    ]  # fmt: skip
    status = {"agrees": decoding.agrees, "difference": decoding.difference, "status": str(decoding.status())}
    return json.dumps({"format": "attention-decoding/1", **status, "steps": steps}, indent=1) + "\n"
