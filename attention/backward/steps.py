"""The backward steps, the forward ones in reverse, each named after the forward step it goes back through (so a
gradient d_<name> sits beside its forward twin <name>): what each gradient is made from, and their formulas."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..base.case import Case
from ..base.i18n import msg, text
from ..base.record import Step
from ..forward.compute import scale_factor
from ..forward.steps import LABELS, NORM, ROPE, STEP_NAMES, number, step_names
from .loss import Loss

# The forward steps in reverse, but step 8, which repeats steps 4-7 and adds nothing to go back through, and step 3,
# which hands its gradients on to step 2's weights, where they met x (and to step 1's x likewise).
NOT_GONE_BACK_THROUGH = ("repeat", "qkv")
BACKWARD_NAMES = tuple(name for name in reversed(STEP_NAMES) if name not in NOT_GONE_BACK_THROUGH)
# A gradient's axes: its forward twin's, and those of the few with no twin in the trace
GRAD_AXES = {"d_w_out": ("value dim", "output dim"), "d_concat": ("query", "value dim"), "d_sinks": ("sink", "head"),
             "d_relative_bias": ("head", "bucket"), "d_latent_norm": ("latent norm", "latent dim")}  # fmt: skip
# What each gradient is made from: the gradients before it (the loss's first) and the forward tensors it meets
MADE_FROM = {
    "d_outputs": ("outputs",),
    "d_w_out": ("concat", "d_outputs"),
    "d_concat": ("d_outputs",),
    "d_head_outputs": ("d_concat",),
    "d_weighted": ("d_head_outputs",),
    "d_weights": ("d_head_outputs", "values"),
    "d_values": ("weights", "d_head_outputs"),
    "d_scores": ("weights_exact", "d_weights"),
    "d_sinks": ("weights_sink", "weights_exact", "d_weights"),
    "d_scores_uncapped": ("d_scores", "scores_uncapped"),
    "d_relative_bias": ("d_scores",),  # d_scores_uncapped with a softcap between (_made_from)
    "d_scores_raw": ("d_scores",),  # d_scores_uncapped with a softcap between (_made_from)
    "d_queries": ("d_scores_raw", "keys"),
    "d_keys": ("d_scores_raw", "queries"),
    "d_queries_unrotated": ("d_queries",),
    "d_keys_unrotated": ("d_keys",),
    "d_queries_unnormed": ("d_queries", "queries_unnormed"),  # d_queries_unrotated with RoPE between (_made_from)
    "d_keys_unnormed": ("d_keys", "keys_unnormed"),
    "d_w_query": ("x", "d_queries"),
    "d_w_key": ("x", "d_keys"),  # the latent's with multi-head latent attention (_made_from)
    "d_w_value": ("x", "d_values"),
    # multi-head latent attention's latent C: it made keys and values, then its norm (γ), then C = X W_DKV
    "d_latent": ("d_keys", "d_values", "w_key", "w_value"),
    "d_latent_norm": ("d_latent", "latent_unnormed"),
    "d_latent_unnormed": ("d_latent", "latent_unnormed"),
    "d_w_latent": ("x", "d_latent"),  # d_latent_unnormed with the latent's norm between (_made_from)
    "d_x": ("d_queries", "d_keys", "d_values", "w_query", "w_key", "w_value"),
    # cross-attention's other sentence: it made the keys and values (x then the queries alone)
    "d_x_kv": ("d_keys", "d_values", "w_key", "w_value"),
}
LATENT_MADE_FROM = {"d_x": ("d_queries", "d_latent", "w_query", "w_latent"),  # x reached keys and values through C
                    "d_x_kv": ("d_latent", "w_latent")}  # fmt: skip


def backward_names(case: Case) -> tuple[str, ...]:
    """The backward steps a case has, in the order they run: RoPE's and the q/k norm's after the scores when the case
    has them."""
    return tuple(name for name in reversed(step_names(case)) if name not in NOT_GONE_BACK_THROUGH)


def step(case: Case, loss: Loss, name: str, tensors: Mapping, seconds: float) -> Step:
    """A backward step: its title, formula and notes, its gradients and what each was made from."""
    title, explanation = text("en", f"backward.{name}.title"), text("en", f"backward.{name}.explanation")
    notes = tuple(_notes(name, case))
    reads = {grad: _made_from(grad, tensors, case) for grad in tensors}
    return Step(number(name), name, LABELS[name], title, explanation,
                formula(name, case, loss), tensors, MappingProxyType(reads), "cpu", seconds, notes)  # fmt: skip


def _notes(name: str, case: Case):
    """What a reader should know beside a backward step: the rounded softmax's constant, and what today's options
    (a window, ALiBi, a softcap, sinks, partial rotary) do to the gradients."""
    o = case.options
    if name == "softmax" and o.weights_override:
        yield msg("backward.note.rounded")
    if name == "softmax" and o.sinks is not None:
        yield msg("backward.note.sinks")
    if name == "scores" and o.window is not None:
        yield msg("backward.note.window", window=o.window)
    if name == "scores" and o.alibi is not None:
        yield msg("backward.note.alibi")
    if name == "scores" and o.relative_bias is not None:
        yield msg("backward.note.relative")
    if name == "scores" and o.softcap is not None:
        yield msg("backward.note.softcap", cap=o.softcap)
    if name == ROPE and o.rope_fraction is not None:
        yield msg("backward.note.partial_rope", d_rot=case.d_rot, d=case.d_head)


def _made_from(grad: str, tensors: Mapping, case: Case) -> tuple[str, ...]:
    """A gradient's parents; d_head_outputs is d_concat's, or the loss's own d_outputs without w_out; the norm's
    are RoPE's when the case turns queries and keys after the norm; the raw scores' the capped ones' with a cap;
    with multi-head latent attention, W_UK's and W_UV's read the latent, and W_DKV's and x's (x_kv's) the latent's
    gradient before its norm where it has one; in cross-attention x made the queries alone, and x_kv the keys and
    values (or the latent)."""
    parents = MADE_FROM.get(grad, ())
    if case.cross:
        parents = _cross_made_from(grad, parents)
    if case.options.w_latent is not None:
        parents = LATENT_MADE_FROM.get(grad, parents) if not (case.cross and grad == "d_x") else parents
        if grad in ("d_w_key", "d_w_value"):
            return ("latent", *parents[1:])
        if case.options.latent_norm is not None and grad in ("d_w_latent", "d_x", "d_x_kv"):
            return tuple("d_latent_unnormed" if p == "d_latent" else p for p in parents)
    if grad in ("d_scores_raw", "d_relative_bias") and "d_scores_uncapped" in tensors:
        return ("d_scores_uncapped",)
    if grad in ("d_queries_unnormed", "d_keys_unnormed") and case.options.rope_base is not None:
        return (parents[0] + "_unrotated", parents[1])
    return ("d_concat" if "d_concat" in tensors else "d_outputs",) if grad == "d_head_outputs" else parents


def _cross_made_from(grad: str, parents: tuple[str, ...]) -> tuple[str, ...]:
    """Cross-attention's parents: x made the queries alone; W_K, W_V and W_DKV met x_kv."""
    if grad == "d_x":
        return ("d_queries", "w_query")
    if grad in ("d_w_key", "d_w_value", "d_w_latent"):
        return ("x_kv", *parents[1:])
    return parents


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
        rule = r"dS_{ij} = A_{ij}\big(dA_{ij} - \textstyle\sum_k A_{ik}\, dA_{ik}\big)"
        sink = r",\quad ds = -\textstyle\sum_i A_{i,\mathrm{sink}} \sum_k A_{ik}\, dA_{ik}"
        return rule + (sink if o.sinks is not None else "")
    if name == "scores":
        return _scores_formula(case)
    if name == ROPE:
        first = rf"\ (\text{{dims}}\ 1..{case.d_rot})" if o.rope_fraction is not None else ""
        return rf"dq \leftarrow R_t^\top\, dq,\quad dk \leftarrow R_t^\top\, dk{first}"
    if name == NORM:  # q = γ ⊙ u / r back to u; û = u / r
        rule = r"du = \tfrac{1}{r}\big(g - \hat u\ \tfrac{1}{d}\textstyle\sum_c g_c \hat u_c\big)"
        return rf"g = \gamma_Q \odot dq,\quad {rule},\quad \hat u = u / r,\quad dk\ \text{{likewise}}\ (\gamma_K)"
    if name == "weights":
        return _weights_formula(case)
    if o.w_latent is not None:  # x made keys and values through the latent C = X W_DKV (U before its norm)
        through = rf"d{'U' if o.latent_norm is not None else 'C'}\, W_{{DKV}}^\top"
    else:
        through = r"dK\, W_K^\top + dV\, W_V^\top"
    if case.cross:  # x made the queries alone; the other sentence x_kv the keys and values
        return rf"dX = dQ\, W_Q^\top,\quad dX_{{kv}} = {through}"
    return rf"dX = dQ\, W_Q^\top + {through}"


def _weights_formula(case: Case) -> str:
    """Step 3 back to step 2's weights: Q = X W_Q, K = X W_K, V = X W_V (X_kv's in cross-attention); with multi-head
    latent attention K = C W_UK and V = C W_UV from the latent C, which gathers both gradients, goes back through
    its norm (γ, of its first columns) and C = X W_DKV."""
    o, kv = case.options, "X_{kv}" if case.cross else "X"  # cross-attention: keys and values from x_kv
    if o.w_latent is None:
        return rf"dW_Q = X^\top dQ,\quad dW_K = {kv}^\top dK,\quad dW_V = {kv}^\top dV"
    parts = [r"dW_Q = X^\top dQ", r"dW_{UK} = C^\top dK", r"dW_{UV} = C^\top dV",
             r"dC = dK\, W_{UK}^\top + dV\, W_{UV}^\top"]  # fmt: skip
    if o.latent_norm is not None:  # the norm of C's first len(γ) columns, Ĉ = U / r: back as the q/k norm's
        d = len(o.latent_norm)
        rule = rf"\tfrac{{1}}{{r}}\big(g - \hat C\ \tfrac{{1}}{{{d}}}\textstyle\sum_c g_c \hat C_c\big)"
        parts += [rf"d\gamma = \textstyle\sum_t dC_{{t,1..{d}}} \odot \hat C_{{t,1..{d}}}",
                  rf"dU_{{1..{d}}} = {rule},\ g = \gamma \odot dC_{{1..{d}}}"]  # fmt: skip
        if case.d_c > d:  # the rotary key's columns, not normed, pass as they are
            parts.append(rf"dU_{{{d + 1}..{case.d_c}}} = dC_{{{d + 1}..{case.d_c}}}")
        return r",\quad ".join([*parts, rf"dW_{{DKV}} = {kv}^\top dU"])
    return r",\quad ".join([*parts, rf"dW_{{DKV}} = {kv}^\top dC"])


OR = r"\ \text{or}\ "


def _scores_formula(case: Case) -> str:
    """Step 4 back: through the cap (U the scores before it), the scale and temperature (ALiBi's bias B a constant:
    no gradient of its own; T5's learned table t a sum per bucket), the mask and window, to Q and K."""
    o, factor = case.options, scale_factor(case) / case.options.temperature
    parts, d = [], "dS"
    if o.softcap is not None:
        parts.append(rf"dU = \big(1 - \tanh^2(U / {o.softcap:g})\big) \odot dS")
        d = "dU"
    parts.append(rf"dS^{{raw}} = {factor:g}\, {d}")
    if o.alibi is not None:
        parts.append(r"dB = 0\ (\text{constant})")
    if o.relative_bias is not None:  # T5's table is learned: each bucket's entry gathers its scores' gradients
        parts.append(rf"dt_h[b] = \textstyle\sum_{{\mathrm{{bucket}}(j - i) = b}} {d}_{{h,ij}}")
    blocked = [r"M_{ij} = 0"] * (o.mask is not None) + [rf"j \le i - {o.window}"] * (o.window is not None)
    if blocked:
        parts.append(r"dS^{raw}_{ij} = 0\ \text{where}\ " + OR.join(blocked))
    return r",\quad ".join([*parts, r"dQ = dS^{raw} K", r"dK = dS^{raw\top} Q"])
