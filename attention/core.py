"""The eight steps of self-attention, as in the article, recorded into an immutable trace."""

from __future__ import annotations

import contextlib
import math
import operator
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import torch

from .case import Case
from .devices import resolve_device, synchronize, warm_up
from .i18n import msg, text

# Past these sizes the trace keeps what is looked at, not everything (bench/core.md measured why). Step 6's
# (n_k, n_q, d_v) broadcast is made whole up to 1 MiB of float32 (n = 64 at d_v = 64):
WHOLE_MAX_NUMBERS = 1 << 18
REPEAT_MAX_N = 16  # step 8 runs its Python loop for the first 16 queries; one_query() runs any other on demand
ROUNDED_WITHIN = 0.1  # a weights override further than this from the exact softmax was made for other numbers
# (the article's own rounding moves a weight by up to 0.063)

STEP_NAMES = ("inputs", "weights", "qkv", "scores", "softmax", "weighted", "outputs", "repeat")
# RoPE (rotary position embedding, as in Llama-style models) happens between step 3's projections and step 4's
# scores: a case with rope_base gets this step there, numbered 3 like the projections it turns (the article has none)
ROPE = "rope"
# Each step's label, as the article counts them: RoPE is part of step 3 ("3b"), the steps after it keep theirs
LABELS = {name: str(number) for number, name in enumerate(STEP_NAMES, start=1)} | {ROPE: "3b"}

# What each axis of a recorded tensor is; with heads > 1, the tensors in PER_HEAD have the head axis first.
AXES = {
    "x": ("token", "feature"),
    "w_query": ("feature", "query dim"),
    "w_key": ("feature", "key dim"),
    "w_value": ("feature", "value dim"),
    "queries_unrotated": ("token", "query dim"),
    "keys_unrotated": ("token", "key dim"),
    "queries": ("token", "query dim"),
    "keys": ("token", "key dim"),
    "values": ("token", "value dim"),
    "scores_raw": ("query", "key"),
    "scores": ("query", "key"),
    "weights_exact": ("query", "key"),
    "weights": ("query", "key"),
    "weighted": ("key", "query", "value dim"),
    "head_outputs": ("query", "value dim"),
    "concat": ("query", "value dim"),
    "outputs": ("query", "output dim"),
    "outputs_by_query": ("query", "output dim"),
}
PER_HEAD = {"queries", "keys", "values", "scores_raw", "scores", "weights_exact", "weights", "weighted", "head_outputs"}
PER_HEAD |= {"queries_unrotated", "keys_unrotated"}  # with RoPE, step 3's queries and keys before they are turned

# The article's step titles and a line on each, in English (the CLI, trace files); pages show the catalogue's
# step.<name>.title / step.<name>.explanation in the reader's language.
TITLES = {name: text("en", f"step.{name}.title") for name in (*STEP_NAMES, ROPE)}
EXPLANATIONS = {name: text("en", f"step.{name}.explanation") for name in (*STEP_NAMES, ROPE)}


def step_names(case: Case) -> tuple[str, ...]:
    """The steps a case's trace holds, in order: the article's eight, and RoPE after step 3 when the case has it."""
    if case.options.rope_base is None:
        return STEP_NAMES
    after = STEP_NAMES.index("qkv") + 1
    return (*STEP_NAMES[:after], ROPE, *STEP_NAMES[after:])


def step_of(case: Case, said: str) -> str | None:
    """The step a link or a person names: by its name ("scores"), its label ("3b"), or, as links held it before
    steps had names, its place among the case's steps from 1 ("4"); None when the case has no such step."""
    names = step_names(case)
    if said in names:
        return said
    if said == LABELS[ROPE]:
        return ROPE if ROPE in names else None
    if said.isascii() and said.isdigit() and len(said) < 3 and 1 <= int(said) <= len(names):  # not "²", not 9⁵⁰⁰⁰
        return names[int(said) - 1]
    return None


def step_near(case: Case, name: str, by: int = 0, wrap: bool = False) -> str:
    """The case's step `by` steps from `name` (one it lacks, RoPE after a case with it, counts as the step it is part
    of): at the ends it stays, or with `wrap` goes round from the last to the first."""
    names = step_names(case)
    here = names.index(name) if name in names else names.index("qkv") if name == ROPE else 0
    return names[(here + by) % len(names) if wrap else min(len(names) - 1, max(0, here + by))]


@dataclass(frozen=True)
class Step:
    """One step of the walkthrough: what it is, the code that ran, and the tensors it made (on the CPU)."""

    number: int
    name: str
    title: str
    explanation: str
    formula: str  # LaTeX
    tensors: Mapping[str, torch.Tensor]
    device: str  # where the tensors were computed
    seconds: float  # time on that device, synchronised
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The step's number as the article counts them: "3b" for RoPE."""
        return LABELS[self.name]


@dataclass(frozen=True)
class Trace:
    """The record of one run: the case as used, the eight steps, and the final outputs."""

    case: Case
    device: str
    steps: tuple[Step, ...]
    outputs: torch.Tensor  # the final result (after w_out when given)

    def step(self, name: str) -> Step:
        """A step by its name (KeyError for a step this trace does not have, such as RoPE without rope_base)."""
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    def axes(self, name: str) -> tuple[str, ...]:
        """What each axis of a recorded tensor is (see AXES), with "head" first when it has a head axis."""
        return ("head", *AXES[name]) if name in PER_HEAD and self.case.options.heads > 1 else AXES[name]

    def has_head(self, name: str) -> bool:
        """Whether a recorded tensor's first axis is the head (several heads, a tensor of PER_HEAD)."""
        return self.axes(name)[0] == "head"

    def view(self, name: str, head: int | None = None) -> torch.Tensor:
        """A recorded tensor, or its slice of one head; a tensor without a head axis (or head None) as it is."""
        tensor = self[name]
        return tensor if head is None or not self.has_head(name) else tensor[head]

    def __getitem__(self, tensor: str) -> torch.Tensor:
        """A recorded tensor by its name, whichever step made it."""
        for step in self.steps:
            if tensor in step.tensors:
                return step.tensors[tensor]
        raise KeyError(tensor)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(note for step in self.steps for note in step.notes)

    def _repr_html_(self) -> str:
        """The steps, their tensors' shapes and the outputs as HTML: how a trace shows itself in Jupyter."""
        from .notebook import trace_html  # only a notebook needs it

        return trace_html(self)

    @property
    def numbers(self) -> int:
        """How many numbers the trace holds (step 6's Broadcast, made on demand, holds none)."""
        kept = (tensor for step in self.steps for tensor in step.tensors.values())
        return sum(tensor.numel() for tensor in kept if not isinstance(tensor, Broadcast))


def attend(case: Case) -> Trace:
    """Run the eight steps on the case's device and return their trace."""
    o = case.options
    device, dtype = resolve_device(o.device), getattr(torch, o.dtype)
    n, h, g = case.n, o.heads, o.kv_heads or o.heads
    scale, temperature = scale_factor(case), o.temperature
    allowed, override, w_out = option_tensors(case, device)  # (n, n) bool, (n, n), (d_v, d_out), or None each
    warm_up(str(device))  # the first run of an operation in a process is slow: not a step's time
    recorder = _Recorder(device, step_names(case))
    record = recorder.record
    # step 1: inputs
    x = torch.tensor(case.x, dtype=dtype, device=device)  # (n, d_in)
    record("inputs", x=x)
    # step 2: weights
    w_query = torch.tensor(case.w_query, dtype=dtype, device=device)  # (d_in, d_k)
    w_key = torch.tensor(case.w_key, dtype=dtype, device=device)  # (d_in, d_k)
    w_value = torch.tensor(case.w_value, dtype=dtype, device=device)  # (d_in, d_v)
    record("weights", w_query=w_query, w_key=w_key, w_value=w_value)
    # step 3: qkv
    queries = x @ w_query  # (n, d_k)
    keys = x @ w_key  # (n, d_k), or (n, d_k/h · g) with g key/value heads
    values = x @ w_value  # (n, d_v)
    if h > 1:  # head i takes the i-th block of columns: (n, d) -> (h, n, d/h)
        queries = queries.unflatten(-1, (h, -1)).transpose(0, 1)  # (h, n, d_k/h)
        keys, values = (m.unflatten(-1, (g, -1)).transpose(0, 1) for m in (keys, values))  # (g, n, d/h)
        # grouped-query attention (g < h): query head i reads key/value head i // (h/g); else g = h and each its own
        keys, values = keys.repeat_interleave(h // g, dim=0), values.repeat_interleave(h // g, dim=0)  # (h, n, d/h)
    record("qkv", **_unrotated(o.rope_base, queries=queries, keys=keys), values=values)
    if o.rope_base is not None:
        # step 3b: rope
        t = positions(case)  # (n,): each token's position
        queries = rope(queries, t, o.rope_base)  # (h?, n, d_k): pair p of token i turned by the angle t_i · θ_p
        keys = rope(keys, t, o.rope_base)  # the same turns: a score then depends on t_i − t_j alone
        record("rope", queries=queries, keys=keys)
    # steps 4-7, for all queries at once (each step's comment is inside steps_4_to_7)
    options = {"scale": scale, "temperature": temperature, "w_out": w_out}
    whole = n * n * case.d_v <= WHOLE_MAX_NUMBERS  # step 6 held whole, or made slice by slice when looked at
    outputs = steps_4_to_7(
        queries, keys, values, allowed=allowed, override=override, record=record, whole=whole, **options
    )
    # step 8: repeat
    by_query = []
    for i in range(min(n, REPEAT_MAX_N)):
        query_i = queries[..., i : i + 1, :]  # (h?, 1, d_k)
        rows_i = {"allowed": _row(allowed, i), "override": _row(override, i)}  # its rows of the mask and override
        by_query.append(steps_4_to_7(query_i, keys, values, **rows_i, **options))
    outputs_by_query = torch.cat(by_query)  # (min(n, REPEAT_MAX_N), d_out): the rows stacked
    record("repeat", outputs_by_query=outputs_by_query)
    return _trace(case, device, recorder.records, outputs)


Tensor = torch.Tensor


def steps_4_to_7(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    scale: float,
    temperature: float,
    allowed: Tensor | None,
    override: Tensor | None,
    w_out: Tensor | None,
    record: Callable[..., None] = lambda step, **tensors: None,
    whole: bool = True,
) -> Tensor:
    """Steps 4-7 for a block of queries: all of them (the matrix form) or one at a time (step 8)."""
    # step 4: scores
    scores_raw = queries @ keys.mT  # (h?, n_q, n_k)
    scores = scores_raw * (scale / temperature)  # a new tensor: changed in place below (at the limits each is 64 MiB)
    if allowed is not None:  # a 0 in the mask: the query may not attend to that key
        scores.masked_fill_(~allowed, float("-inf"))
    record("scores", scores_raw=scores_raw, scores=scores)
    # step 5: softmax
    weights_exact = torch.softmax(scores, dim=-1)  # (h?, n_q, n_k)
    if allowed is not None:  # a fully masked row is all NaN: zeros instead, as fused attention gives
        weights_exact.nan_to_num_(nan=0.0)
    weights = weights_exact if override is None else override  # (h?, n_q, n_k)
    record("softmax", weights_exact=weights_exact, weights=weights)
    # step 6: weighted
    if whole:  # every product at once: (h?, n_k, 1, d_v) * (h?, n_k, n_q, 1) -> (h?, n_k, n_q, d_v)
        weighted = values[..., :, None, :] * weights.mT[..., :, :, None]
    else:  # too many numbers to hold: the same products, made a slice at a time when they are looked at
        weighted = Broadcast(values, weights)
    record("weighted", weighted=weighted)
    # step 7: outputs
    head_outputs = weighted.sum(dim=-3) if whole else weights @ values  # (h?, n_q, d_v/h): summed over the keys
    concat = head_outputs.transpose(0, 1).flatten(1) if head_outputs.dim() == 3 else head_outputs  # (n_q, d_v)
    outputs = concat if w_out is None else concat @ w_out  # (n_q, d_out)
    record("outputs", outputs=outputs, **_step_7_parts(head_outputs, concat, w_out))
    return outputs


def rope(m: Tensor, positions: Tensor, base: float) -> Tensor:
    """Rotary position embedding of (h?, n, d): dims 2p and 2p+1 of the token at position t turned by the angle
    t · base^(−2p/d) (interleaved pairs, as in the RoPE paper and GGUF files). Angles in float64, then m's dtype."""
    d = m.shape[-1]
    frequencies = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = positions.to(torch.float64)[:, None] * frequencies  # (n, d/2)
    cos, sin = (f.to(dtype=m.dtype, device=m.device) for f in (angles.cos(), angles.sin()))
    even, odd = m[..., 0::2], m[..., 1::2]  # (h?, n, d/2) each
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def _unrotated(rope_base: float | None, **tensors: Tensor) -> dict[str, Tensor]:
    """Step 3's queries and keys under their names; with RoPE, as queries_unrotated and keys_unrotated, since the
    rope step's turned ones are what the scores use (and what "queries" and "keys" name in the trace)."""
    return tensors if rope_base is None else {f"{name}_unrotated": tensor for name, tensor in tensors.items()}


def positions(case: Case) -> Tensor:
    """Each token's position for RoPE: the case's, or 0, 1, …, n − 1."""
    given = case.options.positions
    return torch.arange(case.n) if given is None else torch.tensor(given)


class Broadcast:
    """Step 6's product values[..., :, None, :] * weights.mT[..., :, :, None], not held: indexing it makes just the
    products asked for, from two expanded views (no copies). Indexing the head alone gives that head's Broadcast."""

    def __init__(self, values: Tensor, weights: Tensor):
        self.values, self.weights = values, weights
        v, w = values[..., :, None, :], weights.mT[..., :, :, None]  # (h?, n_k, 1, d_v), (h?, n_k, n_q, 1)
        self.shape = torch.broadcast_shapes(v.shape, w.shape)  # (h?, n_k, n_q, d_v)
        self._v, self._w = v.expand(self.shape), w.expand(self.shape)
        self.dtype, self.device = values.dtype, values.device

    def __getitem__(self, index) -> Tensor | Broadcast:
        if len(self.shape) == 4 and not isinstance(index, bool | tuple | slice | list):
            with contextlib.suppress(TypeError):  # one head, by any integer (a Python int, NumPy's, a 0-d tensor)
                head = operator.index(index)
                return Broadcast(self.values[head], self.weights[head])
        return self._v[index] * self._w[index]

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def detach(self) -> Broadcast:
        return self

    def cpu(self) -> Broadcast:
        return Broadcast(self.values.cpu(), self.weights.cpu())


def _step_7_parts(head_outputs: Tensor, concat: Tensor, w_out: Tensor | None) -> dict[str, Tensor]:
    """What step 7 records beside the outputs: the heads and their concatenation, and concat before w_out."""
    multi_head = head_outputs.dim() == 3
    parts = {"head_outputs": head_outputs} if multi_head else {}
    return parts | ({"concat": concat} if multi_head or w_out is not None else {})


def one_query(trace: Trace, i: int) -> dict[str, Tensor]:
    """Steps 4-7 for query i alone, as step 8 runs them, with every tensor recorded (on the CPU)."""
    case, o = trace.case, trace.case.options
    allowed, override, w_out = option_tensors(case, torch.device("cpu"))
    recorded: dict[str, Tensor] = {}
    query_i = trace["queries"][..., i : i + 1, :]
    steps_4_to_7(
        query_i, trace["keys"], trace["values"], scale=scale_factor(case), temperature=o.temperature,
        allowed=_row(allowed, i), override=_row(override, i), w_out=w_out,
        record=lambda step, **tensors: recorded.update(tensors),
    )  # fmt: skip
    return recorded


def variant_outputs(trace: Trace, case: Case) -> Tensor:
    """The outputs of `case`, a case with the trace's numbers and other options (a variant), made from the trace's
    queries, keys and values: steps 4-7 one head at a time, nothing recorded. It needs one head's n × n scores at a
    time, where a whole trace holds every head's four (the variants page shows five variants)."""
    queries, keys, values = (_with_head(trace, name) for name in ("queries", "keys", "values"))  # (h, n, d/h)
    options = _options_of(case)
    heads = [
        steps_4_to_7(q, k, v, **options, w_out=None, whole=False) for q, k, v in zip(queries, keys, values, strict=True)
    ]
    concat = torch.cat(heads, dim=-1)  # (n, d_v): the heads side by side
    w_out = case.options.w_out
    return concat if w_out is None else concat @ torch.tensor(w_out, dtype=concat.dtype)


def variant_weights(trace: Trace, case: Case, head: int = 0) -> Tensor:
    """Step 5's weights (n_q, n_k) of one head for a variant `case`, from the trace's queries and keys."""
    q, k, v = (_with_head(trace, name)[head] for name in ("queries", "keys", "values"))
    recorded: dict[str, Tensor] = {}
    record = lambda step, **tensors: recorded.update(tensors)  # noqa: E731
    steps_4_to_7(q, k, v, **_options_of(case), w_out=None, record=record, whole=False)
    return recorded["weights"]


def _with_head(trace: Trace, name: str) -> Tensor:
    """A recorded tensor with its head axis, one head or several: (h, n, d/h)."""
    return trace[name] if trace.case.options.heads > 1 else trace[name][None]


def _options_of(case: Case) -> dict:
    """Steps 4-7's options for a case, on the CPU, without w_out (which comes after the heads are joined)."""
    allowed, override, _ = option_tensors(case, torch.device("cpu"))
    options = {"scale": scale_factor(case), "temperature": case.options.temperature}
    return options | {"allowed": allowed, "override": override}


def option_tensors(case: Case, device: torch.device) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """The options that are matrices, as tensors on the device: which keys each query may attend to (the mask),
    the weights override and w_out; None for each the case does not have."""
    o, dtype = case.options, getattr(torch, case.options.dtype)
    override = None if o.weights_override is None else torch.tensor(o.weights_override, dtype=dtype, device=device)
    w_out = None if o.w_out is None else torch.tensor(o.w_out, dtype=dtype, device=device)
    return _allowed(o.mask, case.n, device), override, w_out


def _row(matrix: torch.Tensor | None, i: int) -> torch.Tensor | None:
    return None if matrix is None else matrix[i : i + 1]


def _allowed(mask, n: int, device: torch.device) -> torch.Tensor | None:
    if mask is None:
        return None
    if mask == "causal":  # query i may attend to keys 1..i
        return torch.ones(n, n, dtype=torch.bool, device=device).tril()
    return torch.tensor(mask, device=device) != 0


class _Recorder:
    """Collects each step's tensors by the step's name, copied to the CPU, and its time on the device (synchronised)."""

    def __init__(self, device: torch.device, names: tuple[str, ...] = STEP_NAMES):
        self.device, self.names, self.records = device, names, {}
        self.last = self._now()

    def _now(self) -> float:
        synchronize(self.device)
        return time.perf_counter()

    def record(self, step: str, **tensors: torch.Tensor) -> None:
        expected = self.names[len(self.records)]
        if step != expected:  # the steps are the article's, in its order
            raise ValueError(f"step {step!r} recorded where {expected!r} comes")
        seconds = self._now() - self.last
        self.records[step] = ({k: tensor.detach().cpu() for k, tensor in tensors.items()}, seconds)
        self.last = self._now()  # the copy to the CPU is not the step's time


def scale_factor(case: Case) -> float:
    """The number the raw scores are multiplied by: 1 in the article, 1/√(d_k per head) in textbook attention."""
    scale = case.options.scale
    return {"none": 1.0, "sqrt_dk": 1 / math.sqrt(case.d_head)}.get(scale, scale)


def _trace(case: Case, device: torch.device, records: dict, outputs: torch.Tensor) -> Trace:
    steps = []
    for name in step_names(case):
        number = STEP_NAMES.index("qkv" if name == ROPE else name) + 1  # RoPE is part of step 3 (its label: 3b)
        tensors, seconds = records[name]
        steps.append(
            Step(
                number, name, TITLES[name], EXPLANATIONS[name], formula(name, case),
                MappingProxyType(tensors), str(device), seconds, tuple(_notes(name, case, tensors, outputs)),
            )
        )  # fmt: skip
    return Trace(case, str(device), tuple(steps), records["outputs"][0]["outputs"])


def _notes(name: str, case: Case, tensors: dict, outputs: torch.Tensor):
    """Warnings and checks a reader should see beside the step."""
    o = case.options
    if name == "scores" and isinstance(o.mask, tuple):  # a causal mask leaves every query its own key
        for i in (i for i, row in enumerate(o.mask) if not any(row)):  # every key masked
            then = msg("note.masked_override") if o.weights_override else msg("note.masked_zero")
            yield msg("note.masked_row", row=i + 1, token=case.tokens[i], then=then)
    if name == "softmax" and o.weights_override is not None:
        yield msg("note.override")
        gap = (tensors["weights"] - tensors["weights_exact"]).abs().max().item()
        if gap > ROUNDED_WITHIN:
            yield msg("note.stale_override", gap=gap)
    if name == "weighted" and isinstance(tensors["weighted"], Broadcast):
        w = tensors["weighted"]
        yield msg("note.broadcast_not_kept", numbers=w.numel(), mib=w.numel() * w.dtype.itemsize / 2**20)
    if name == "repeat":
        by_query = tensors["outputs_by_query"]
        rows = outputs.cpu()[: len(by_query)]
        difference = (by_query - rows).abs().max().item()
        agrees = torch.allclose(by_query, rows, rtol=1e-5, atol=1e-5 * (1 + rows.abs().max().item()))
        if len(by_query) < case.n:  # big n: the first queries only
            some = {"difference": difference, "m": len(by_query), "n": case.n}
            yield msg("note.repeat_some_equal", **some) if agrees else msg("note.repeat_some_differ", **some)
        else:
            yield msg("note.repeat_equals" if agrees else "note.repeat_differs", difference=difference)


def formula(name: str, case: Case, lang: str = "en") -> str:
    """The step's formula in LaTeX, with this case's sizes and options (its few words in `lang`)."""
    o, n, h = case.options, case.n, case.options.heads

    def words(key: str, **params) -> str:
        return rf"\text{{{text(lang, f'formula.{key}', **params)}}}"

    if name == "inputs":
        return rf"X \in \mathbb{{R}}^{{{n} \times {case.d_in}}}"
    if name == "weights":
        return (
            rf"W_Q, W_K \in \mathbb{{R}}^{{{case.d_in} \times {case.d_k}}},\quad "
            rf"W_V \in \mathbb{{R}}^{{{case.d_in} \times {case.d_v}}}"
        )
    if name == "qkv":
        g = o.kv_heads or h
        sizes = f"{case.d_head}, {case.d_head}, {case.d_v // g}"
        split = rf",\quad {words('heads', heads=h)}\ {sizes}\ {words('columns')}" if h > 1 else ""
        shared = rf",\quad {words('kv_heads', kv_heads=g, group=h // g)}" if g < h else ""
        return rf"Q = X W_Q,\quad K = X W_K,\quad V = X W_V{split}{shared}"
    if name == ROPE:  # the rotation R_t turns pair p of a query or key at position t by the angle t·θ_p
        theta = rf"\theta_p = {o.rope_base:g}^{{-2p/{case.d_head}}}"
        q = r"\begin{pmatrix} q_{2p} \\ q_{2p+1} \end{pmatrix}"
        turn = r"\begin{pmatrix} \cos t\theta_p & -\sin t\theta_p \\ \sin t\theta_p & \cos t\theta_p \end{pmatrix}"
        pair = rf"{q} \leftarrow {turn} {q}"
        return rf"{pair},\quad {theta},\quad k\ {words('likewise')}"
    if name == "scores":
        scale = {"none": "", "sqrt_dk": rf"\frac{{1}}{{\sqrt{{{case.d_head}}}}}\,"}.get(o.scale)
        scale = rf"{o.scale:g}\," if scale is None else scale
        temperature = "" if o.temperature == 1 else rf" \,/\, {o.temperature:g}"
        mask = rf",\quad S_{{ij}} = -\infty\ {words('where')}\ M_{{ij}} = 0" if o.mask is not None else ""
        return rf"S = {scale}Q K^\top{temperature}{mask}"
    if name == "softmax":
        exact = r"A_{ij} = \frac{e^{S_{ij}}}{\sum_k e^{S_{ik}}}"
        return exact + (rf",\quad A := \tilde{{A}}\ {words('rounded')}" if o.weights_override is not None else "")
    if name == "weighted":
        return r"\mathcal{W}_{j,i,:} = A_{ij}\, V_{j,:}"
    if name == "outputs":
        heads = r",\quad O = [O^{(1)} \cdots O^{(h)}]" if h > 1 else ""
        project = r",\quad O \leftarrow O\, W_O" if o.w_out is not None else ""
        return r"O_{i,:} = \sum_j \mathcal{W}_{j,i,:} = (A V)_{i,:}" + heads + project
    return rf"o_i = {words('with')}\ q_i\ {words('alone')} = O_{{i,:}} \quad {words('each_query')}\ i"
