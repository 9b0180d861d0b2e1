"""The backward pass: a loss on the outputs, its gradient through the eight steps in reverse, recorded by name."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import torch

from .case import Case, CaseError, Matrix
from .core import ROPE, STEP_NAMES, Step, Trace, option_tensors, positions, rope, scale_factor
from .i18n import msg, text

# The backward steps, the forward ones in reverse, each named after the forward step it goes back through (so a
# gradient d_<name> sits beside its forward twin <name>). Step 8 repeats steps 4-7 and adds nothing to go back
# through; step 2's weights get their gradients from step 3, where they met x, and step 1's x likewise.
BACKWARD_NAMES = ("outputs", "weighted", "softmax", "scores", "weights", "inputs")
MAX_LR = 10.0  # a training step's learning rate is bounded: past this one step throws any case far off


@dataclass(frozen=True)
class Loss:
    """What the backward pass differentiates: ½ Σ (outputs − target)², or one output cell alone."""

    target: Matrix | None = None  # (n, d_out): the outputs the learner wants; the squared error's target
    cell: tuple[int, int] | None = None  # (row, column) from 0: the loss is that output number itself

    @property
    def kind(self) -> str:
        return "cell" if self.cell is not None else "target"


@dataclass(frozen=True)
class Backward:
    """The record of one backward pass: the forward trace it started from, the loss, and its steps in reverse."""

    forward: Trace
    loss: Loss
    value: float  # the loss's value
    steps: tuple[Step, ...]

    def step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    def __getitem__(self, tensor: str) -> torch.Tensor:
        for step in self.steps:
            if tensor in step.tensors:
                return step.tensors[tensor]
        raise KeyError(tensor)

    def twin(self, name: str) -> str | None:
        """The forward tensor a gradient belongs to (d_scores → scores), None when the forward trace lacks it."""
        forward = name.removeprefix("d_")
        try:
            self.forward[forward]
        except KeyError:
            return None
        return forward

    @property
    def gradients(self) -> dict[str, torch.Tensor]:
        """The leaves' gradients: x, W_Q, W_K, W_V (and w_out when the case has it)."""
        names = ("d_x", "d_w_query", "d_w_key", "d_w_value", "d_w_out")
        return {name: self[name] for name in names if any(name in s.tensors for s in self.steps)}

    def _repr_html_(self) -> str:
        from .notebook import backward_html  # only a notebook needs it

        return backward_html(self)


def backward_names(case: Case) -> tuple[str, ...]:
    """The backward steps a case has, in the order they run: RoPE's after the scores when the case has it."""
    if case.options.rope_base is None:
        return BACKWARD_NAMES
    at = BACKWARD_NAMES.index("scores") + 1
    return (*BACKWARD_NAMES[:at], ROPE, *BACKWARD_NAMES[at:])


def default_loss(trace: Trace) -> Loss:
    """The learner's first loss: the outputs as they are with one number changed (output 3's second, or the last
    one's last), so the squared error is ½ and every gradient says how to move toward it."""
    target = [row[:] for row in _rows(trace.outputs)]
    i, j = min(2, len(target) - 1), min(1, len(target[0]) - 1)
    target[i][j] = float(round(target[i][j]) + 1)
    return Loss(target=tuple(tuple(row) for row in target))


def parse_loss(obj: object, case: Case) -> Loss:
    """A loss as plain JSON values ({"target": rows} or {"cell": [row, column]}, from 1); CaseError names the place."""
    n, d_out = case.n, len(case.options.w_out[0]) if case.options.w_out is not None else _concat_width(case)
    if not isinstance(obj, dict) or len(obj) != 1 or next(iter(obj)) not in ("target", "cell"):
        raise CaseError(msg("backward.where.loss"), msg("backward.error.loss_kind"))
    if "cell" in obj:
        cell = obj["cell"]
        ok = isinstance(cell, list | tuple) and len(cell) == 2 and all(type(v) is int for v in cell)
        if not ok or not (1 <= cell[0] <= n and 1 <= cell[1] <= d_out):
            raise CaseError(msg("backward.where.loss_cell"), msg("backward.error.loss_cell", n=n, d=d_out))
        return Loss(cell=(cell[0] - 1, cell[1] - 1))
    target = obj["target"]
    if not isinstance(target, list | tuple) or len(target) != n:
        raise CaseError(msg("backward.where.target"), msg("backward.error.target_shape", n=n, d=d_out))
    rows = []
    for i, row in enumerate(target):
        if not isinstance(row, list | tuple) or len(row) != d_out:
            raise CaseError(msg("backward.where.target"), msg("backward.error.target_shape", n=n, d=d_out))
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or abs(v) > 1e6:
                where = msg("backward.where.target_cell", row=i + 1, column=j + 1)
                raise CaseError(where, msg("backward.error.target_number"))
        rows.append(tuple(float(v) for v in row))
    return Loss(target=tuple(rows))


def loss_to_dict(loss: Loss) -> dict:
    return {"cell": [loss.cell[0] + 1, loss.cell[1] + 1]} if loss.cell is not None else {"target": loss.target}


def fits(loss: Loss, trace: Trace) -> bool:
    """Whether a loss fits the trace's outputs (a resized case leaves the target, or the cell, without a place)."""
    n, d = trace.outputs.shape
    if loss.cell is not None:
        return loss.cell[0] < n and loss.cell[1] < d
    return loss.target is not None and len(loss.target) == n and all(len(row) == d for row in loss.target)


def backward(trace: Trace, loss: Loss) -> Backward:
    """The gradient of the loss through the eight steps in reverse, by hand in torch, on the CPU (where the trace's
    tensors are): each step's gradients recorded under its forward step's name."""
    case, o = trace.case, trace.case.options
    h, g = o.heads, o.kv_heads or o.heads
    allowed, _, w_out = option_tensors(case, torch.device("cpu"))  # (n, n) bool, (d_v, d_out): or None
    x, w_query, w_key, w_value = (trace[name] for name in ("x", "w_query", "w_key", "w_value"))
    queries, keys, values = trace["queries"], trace["keys"], trace["values"]  # (h?, n, d/h)
    weights, weights_exact = trace["weights"], trace["weights_exact"]  # (h?, n_q, n_k): used in step 6, exact
    recorder = _Recorder(backward_names(case))
    record = recorder.record
    # the loss, and step 7 back: d outputs, through w_out and the heads' concatenation, to every key's product
    value, d_outputs = _loss_gradient(trace.outputs, loss)  # (n, d_out)
    tensors = {"d_outputs": d_outputs}
    d_concat = d_outputs
    if w_out is not None:  # outputs = concat @ w_out
        concat = trace["concat"]  # (n, d_v)
        tensors["d_w_out"] = concat.T @ d_outputs  # (d_v, d_out)
        d_concat = tensors["d_concat"] = d_outputs @ w_out.T  # (n, d_v)
    d_head_outputs = d_concat
    if h > 1:  # the concatenation undone: head i's columns back to head i
        d_head_outputs = tensors["d_head_outputs"] = d_concat.unflatten(-1, (h, -1)).transpose(0, 1)  # (h, n, d/h)
    # step 7 summed the products over the keys: the sum hands each key the same gradient (a view, no copy)
    n_k = values.shape[-2]
    d_weighted = d_head_outputs[..., None, :, :].expand(*values.shape[:-2], n_k, *d_head_outputs.shape[-2:])
    record("outputs", **tensors, d_weighted=d_weighted)  # d_weighted: (h?, n_k, n_q, d_v)
    # step 6 back: weighted[j, i, :] = A_ij · v_j, so d A_ij = Σ_c dW[j, i, c] v_jc and d v_j = Σ_i dW[j, i, :] A_ij
    d_weights = d_head_outputs @ values.mT  # (h?, n_q, n_k): the broadcast's sum over value dims, as a matmul
    d_values = weights.mT @ d_head_outputs  # (h?, n_k, d_v/h): the weights used (the rounded ones, when used)
    record("weighted", d_weights=d_weights, d_values=d_values)
    # step 5 back: the softmax's Jacobian, row by row: d S_ij = A_ij (d A_ij − Σ_k A_ik d A_ik). The rounded
    # override has no gradient (a constant), so the exact softmax's is used; a masked A_ij is 0, so its d S_ij is 0
    row_mean = torch.linalg.vecdot(weights_exact, d_weights).unsqueeze(-1)  # (h?, n_q, 1): Σ_k A_ik dA_ik
    d_scores = (d_weights - row_mean).mul_(weights_exact)  # (h?, n_q, n_k): one n × n tensor made, not three
    record("softmax", d_scores=d_scores)
    # step 4 back: S = (scale / temperature) · Q Kᵀ, masked: a masked score is a constant −∞, its gradient exactly 0
    factor = scale_factor(case) / o.temperature
    d_scores_raw = d_scores if factor == 1 else d_scores * factor  # (h?, n_q, n_k): the same tensor at 1 (memory)
    if allowed is not None:
        d_scores_raw = d_scores_raw.masked_fill(~allowed, 0.0)  # already 0 there (A = 0); said once more, for −0
    d_queries = d_scores_raw @ keys  # (h?, n_q, d_k/h)
    d_keys = d_scores_raw.mT @ queries  # (h?, n_k, d_k/h)
    record("scores", d_scores_raw=d_scores_raw, d_queries=d_queries, d_keys=d_keys)
    if o.rope_base is not None:  # step 3b back: a rotation's transpose is the rotation by the opposite angle
        t = positions(case)
        d_queries, d_keys = rope(d_queries, -t, o.rope_base), rope(d_keys, -t, o.rope_base)
        record(ROPE, d_queries_unrotated=d_queries, d_keys_unrotated=d_keys)
    # step 3 back: the heads joined again (a shared key/value head sums its query heads' gradients), then Q = X W_Q
    d_q, d_k, d_v = d_queries, d_keys, d_values
    if h > 1:
        d_k, d_v = (m.unflatten(0, (g, h // g)).sum(1) for m in (d_k, d_v))  # (g, n, d/h): each group summed
        d_q, d_k, d_v = (m.transpose(0, 1).flatten(1) for m in (d_q, d_k, d_v))  # (n, d): head i's columns
    record("weights", d_w_query=x.T @ d_q, d_w_key=x.T @ d_k, d_w_value=x.T @ d_v)  # (d_in, d) each
    # step 1 back: x reached the scores three ways (as queries, keys and values): its gradient sums all three
    d_x = d_q @ w_query.T + d_k @ w_key.T + d_v @ w_value.T  # (n, d_in)
    record("inputs", d_x=d_x)
    return Backward(trace, loss, value, _steps(case, loss, recorder.records))


def _loss_gradient(outputs: torch.Tensor, loss: Loss) -> tuple[float, torch.Tensor]:
    """The loss's value and its gradient on the outputs."""
    if loss.cell is not None:  # one output number: its gradient is 1 there and 0 everywhere else
        d_outputs = torch.zeros_like(outputs)
        d_outputs[loss.cell] = 1.0
        return outputs[loss.cell].item(), d_outputs
    d_outputs = outputs - torch.tensor(loss.target, dtype=outputs.dtype)  # ½ Σ (O − T)²: its gradient is O − T
    return 0.5 * (d_outputs**2).sum().item(), d_outputs


# Checking against autograd -------------------------------------------------------------------------------------


def autograd(case: Case, loss: Loss) -> dict[str, torch.Tensor]:
    """The same gradients by torch.autograd: the forward written with differentiable torch ops (no in-place ones),
    the rounded override as its value with the exact softmax's gradient (straight through), then .backward()."""
    o, dtype = case.options, getattr(torch, case.options.dtype)
    h, g = o.heads, o.kv_heads or o.heads
    allowed, override, w_out = option_tensors(case, torch.device("cpu"))
    leaves = {name: torch.tensor(getattr(case, name), dtype=dtype, requires_grad=True) for name in _LEAVES}
    if w_out is not None:
        leaves["w_out"] = w_out.clone().requires_grad_(True)
    x = leaves["x"]
    q, k, v = (x @ leaves[name] for name in ("w_query", "w_key", "w_value"))
    q = q.unflatten(-1, (h, -1)).transpose(0, 1)
    k, v = (m.unflatten(-1, (g, -1)).transpose(0, 1).repeat_interleave(h // g, dim=0) for m in (k, v))
    if o.rope_base is not None:
        q, k = rope(q, positions(case), o.rope_base), rope(k, positions(case), o.rope_base)
    scores = q @ k.mT * (scale_factor(case) / o.temperature)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
        scores = torch.where(allowed.any(-1, keepdim=True), scores, 0.0)  # a fully masked row: no NaN to pass
    a = torch.softmax(scores, dim=-1)
    if allowed is not None:
        a = a.masked_fill(~allowed, 0.0)  # that row's weights 0, as the core gives
    if override is not None:
        a = a + (override - a).detach()  # the override's value, the exact softmax's gradient
    outputs = (a @ v).transpose(0, 1).flatten(1)
    if w_out is not None:
        outputs = outputs @ leaves["w_out"]
    if loss.cell is not None:
        outputs[loss.cell].backward()
    else:
        (0.5 * ((outputs - torch.tensor(loss.target, dtype=dtype)) ** 2).sum()).backward()
    return {f"d_{name}": leaf.grad for name, leaf in leaves.items()}


_LEAVES = ("x", "w_query", "w_key", "w_value")


@dataclass(frozen=True)
class GradientCheck:
    oracle: str
    difference: float  # largest |by hand − autograd| over every leaf's gradient
    agrees: bool


def check(result: Backward) -> GradientCheck:
    """The hand-written gradients against autograd's on the same case (the forward is checked against SDPA)."""
    theirs = autograd(result.forward.case, result.loss)
    mine = result.gradients
    difference, agrees = 0.0, True
    for name, expected in theirs.items():
        got = mine[name]
        difference = max(difference, (got - expected).abs().max().item())
        scale = 1 + expected.abs().max().item()
        tol = 1e-4 if got.dtype == torch.float32 else 1e-10
        agrees = agrees and torch.allclose(got, expected, rtol=tol, atol=tol * scale)
    return GradientCheck("torch.autograd", difference, agrees)


# Training ---------------------------------------------------------------------------------------------------------


class TrainingError(ValueError):
    """A training step that would make some number non-finite (or leave the case's bounds): refused."""


def train_step(trace: Trace, loss: Loss, lr: float, grads: Backward | None = None) -> Case:
    """One step of gradient descent on W_Q, W_K and W_V: W ← W − lr · dW. The case with the new weights; a step
    that makes a number non-finite, or past the case's bounds, is a TrainingError (the weights stay as they were)."""
    if not (isinstance(lr, int | float) and 0 < lr <= MAX_LR):
        raise TrainingError(msg("backward.error.lr", high=MAX_LR))
    grads = grads if grads is not None and grads.loss == loss and grads.forward is trace else backward(trace, loss)
    new = {}
    for name in ("w_query", "w_key", "w_value"):
        w = trace[name].double() - lr * grads[f"d_{name}"].double()
        if not torch.isfinite(w).all() or w.abs().max().item() > 1e6:
            raise TrainingError(msg("backward.error.train_diverged", name=name, lr=lr))
        new[name] = tuple(tuple(row) for row in w.to(trace[name].dtype).tolist())
    return replace(trace.case, **new)  # within the bounds parse_case holds (finite, |w| ≤ 1e6): the case is valid


def loss_value(trace: Trace, loss: Loss) -> float:
    """The loss of a trace's outputs, without a backward pass."""
    if loss.cell is not None:
        return trace.outputs[loss.cell].item()
    return 0.5 * ((trace.outputs - torch.tensor(loss.target, dtype=trace.outputs.dtype)) ** 2).sum().item()


# Recording --------------------------------------------------------------------------------------------------------


class _Recorder:
    """Each backward step's tensors by name, in the order the steps must come, with its time (the CPU's)."""

    def __init__(self, names: tuple[str, ...]):
        self.names, self.records, self.last = names, {}, time.perf_counter()

    def record(self, step: str, **tensors: torch.Tensor) -> None:
        expected = self.names[len(self.records)]
        if step != expected:
            raise ValueError(f"backward step {step!r} recorded where {expected!r} comes")
        now = time.perf_counter()
        self.records[step] = (tensors, now - self.last)
        self.last = time.perf_counter()


def _steps(case: Case, loss: Loss, records: dict) -> tuple[Step, ...]:
    out = []
    for name in backward_names(case):
        tensors, seconds = records[name]
        number = STEP_NAMES.index("qkv" if name == ROPE else name) + 1
        title, explanation = text("en", f"backward.{name}.title"), text("en", f"backward.{name}.explanation")
        notes = (msg("backward.note.rounded"),) if name == "softmax" and case.options.weights_override else ()
        out.append(
            Step(number, name, title, explanation, formula(name, case, loss), MappingProxyType(tensors), "cpu",
                 seconds, notes)
        )  # fmt: skip
    return tuple(out)


def formula(name: str, case: Case, loss: Loss | None = None) -> str:
    """A backward step's formula in LaTeX, with the case's options (∂L/∂T written dT)."""
    o = case.options
    if name == "outputs":
        cell = None if loss is None else loss.cell
        first = r"dO = O - T" if cell is None else rf"dO = e_{{{cell[0] + 1},{cell[1] + 1}}}"
        project = r",\quad dW_O = C^\top dO,\quad dC = dO\, W_O^\top" if o.w_out is not None else ""
        return first + project + r",\quad d\mathcal{W}_{j,i,:} = dO_{i,:}\ \forall j"
    if name == "weighted":
        return r"dA_{ij} = \sum_c d\mathcal{W}_{j,i,c} V_{jc} = (dO\,V^\top)_{ij},\quad dV = A^\top dO"
    if name == "softmax":
        return r"dS_{ij} = A_{ij}\big(dA_{ij} - \textstyle\sum_k A_{ik}\, dA_{ik}\big)"
    if name == "scores":
        factor = scale_factor(case) / o.temperature
        mask = r",\quad dS_{ij} = 0\ \text{where}\ M_{ij} = 0" if o.mask is not None else ""
        return rf"dS^{{raw}} = {factor:g}\, dS{mask},\quad dQ = dS^{{raw}} K,\quad dK = dS^{{raw\top}} Q"
    if name == ROPE:
        return r"dq \leftarrow R_t^\top\, dq,\quad dk \leftarrow R_t^\top\, dk"
    if name == "weights":
        return r"dW_Q = X^\top dQ,\quad dW_K = X^\top dK,\quad dW_V = X^\top dV"
    return r"dX = dQ\, W_Q^\top + dK\, W_K^\top + dV\, W_V^\top"


def _concat_width(case: Case) -> int:
    o = case.options
    g = o.kv_heads or o.heads
    return case.d_v * o.heads // g  # with grouped heads each query head's output is d_v / g wide


def _rows(tensor: torch.Tensor) -> list[list[float]]:
    return [[float(f"{v:.6g}") for v in row] for row in tensor.tolist()]


Tensors = Mapping[str, torch.Tensor]


# A gradient's arithmetic (the Explain page) -----------------------------------------------------------------------


def explain_gradient(result: Backward, name: str, index: tuple[int, ...]) -> tuple[str, list[str], str] | None:
    """The loss's gradient on trace[name][index] with its arithmetic in real numbers: a title, lines (Messages
    where words are) and its step's formula; None for a tensor the backward pass has no gradient of."""
    grad = f"d_{name}"
    try:
        g = result[grad]
    except KeyError:
        return None
    value = g[index].item()
    cell = "".join(_sub(i + 1) for i in index[-2:])  # the row and column from 1, as subscripts: S₂₃
    title = msg("backward.explain.title", name=name, cell=cell, value=f"{value:.4g}".replace("-", "−"))
    head, (i, j) = index[:-2], index[-2:]
    trace, lines, formula = result.forward, [], result.step(_step_of(result, grad)).formula
    if name in ("scores_raw", "scores") and trace["scores"][index].item() == float("-inf"):
        return title, [msg("backward.explain.masked")], formula
    if name in ("scores", "scores_raw"):  # the raw score's is the score's times the scale: its arithmetic first
        a, da = trace["weights_exact"][(*head, i)], result["d_weights"][(*head, i)]  # the row: (n_k,) each
        mean = (a * da).sum().item()
        terms = " + ".join(f"{_n(x)}·{_n(y)}" for x, y in zip(a.tolist(), da.tolist(), strict=True))
        row = _sub(i + 1)
        lines += [
            msg("backward.explain.score_rule", cell=cell, row=row),
            msg("backward.explain.score_sum", row=row, terms=terms, sum=_n(mean)),
            msg(
                "backward.explain.score",
                cell=cell,
                a=_n(a[j].item()),
                g=_n(da[j].item()),
                sum=_n(mean),
                value=_n(result["d_scores"][index].item()),
            ),
            msg("backward.explain.softmax"),
        ]
    if name == "scores_raw":
        factor = scale_factor(trace.case) / trace.case.options.temperature
        g = _n(result["d_scores"][index].item())
        lines.insert(0, msg("backward.explain.raw", cell=cell, factor=f"{factor:g}", g=g))  # then dS's arithmetic
    elif name == "weights":
        d_o = result["d_head_outputs"] if "d_head_outputs" in result.step("outputs").tensors else result["d_concat"] \
            if "d_concat" in result.step("outputs").tensors else result["d_outputs"]  # fmt: skip
        row, v = d_o[(*head, i)], trace["values"][(*head, j)]
        terms = " + ".join(f"{_n(x)}·{_n(y)}" for x, y in zip(row.tolist(), v.tolist(), strict=True))
        lines.append(
            msg("backward.explain.weight", cell=cell, i=_sub(i + 1), j=_sub(j + 1), terms=terms, value=_n(value))
        )
        lines.append(msg("backward.explain.weights"))
    elif name == "outputs" and result.loss.cell is None:
        o, target = trace.outputs[i, j].item(), result.loss.target[i][j]
        lines.append(msg("backward.explain.output", cell=cell, o=_n(o), t=_n(target), value=_n(value)))
    return title, lines, formula


def _step_of(result: Backward, grad: str) -> str:
    return next(step.name for step in result.steps if grad in step.tensors)


def _n(v: float) -> str:
    """A number in a sum or product: 4 digits, a negative one in brackets (0.5 · (−2), not 0.5 · -2)."""
    return f"({v:.4g})".replace("-", "−") if v < 0 else f"{v:.4g}"


def _sub(number: int) -> str:
    return str(number).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
