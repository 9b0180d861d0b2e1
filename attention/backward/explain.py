"""A gradient's arithmetic, with the backward pass's own numbers: why ∂L/∂T of one number of the forward trace is
what it is (the Explain page shows it under the number's own arithmetic). Its numbers are brief: 4 digits, since
the float32 rounding of a gradient is not what it teaches."""

from __future__ import annotations

from ..base.explain import Context, Derivation, explains, factor
from ..base.i18n import msg
from ..base.numbers import brief, sub
from ..forward.compute import scale_factor
from .compute import Backward
from .steps import MADE_FROM


@explains(Backward, *MADE_FROM)
def gradient(c: Context, grad: str, head: int | None, index: tuple[int, ...]) -> Derivation:
    """∂L/∂T of one number: the softmax's rule for a score (times the scale for a raw one), the sum over the value
    dims for a weight, O − T for an output; the title alone for the others."""
    result, name = c.record, grad.removeprefix("d_")
    trace, whole = result.forward, ((head,) if head is not None else ()) + index
    i, j = index[-2:] if len(index) >= 2 else (index[0], 0)
    cell = sub(i, j, sep="")  # the row and column from 1, as subscripts: S₂₃
    title = msg("backward.explain.title", name=name, cell=cell, value=brief(result[grad][whole].item()))
    lines, parts = [], {grad: tuple((k,) for k in index)}
    if name in ("scores_raw", "scores") and trace["scores"][whole].item() == float("-inf"):
        return Derivation(title, (msg("backward.explain.masked"),), parts, head)
    if name in ("scores", "scores_raw"):  # the raw score's is the score's times the scale: its arithmetic first
        a, da = trace.view("weights_exact", head)[i], result.view("d_weights", head)[i]  # the row: (n_k,) each
        mean = (a * da).sum().item()
        terms = " + ".join(
            f"{factor(brief(x))}·{factor(brief(y))}" for x, y in zip(a.tolist(), da.tolist(), strict=True)
        )
        said = {"cell": cell, "a": factor(brief(a[j].item())), "g": factor(brief(da[j].item()))}
        lines += [
            msg("backward.explain.score_rule", cell=cell, row=sub(i)),
            msg("backward.explain.score_sum", row=sub(i), terms=terms, sum=factor(brief(mean))),
            msg(
                "backward.explain.score",
                **said,
                sum=factor(brief(mean)),
                value=factor(brief(result.view("d_scores", head)[i, j].item())),
            ),
            msg("backward.explain.softmax"),
        ]
        parts |= {"d_weights": ((i,), None)}
    if name == "scores_raw":
        multiplier = scale_factor(trace.case) / trace.case.options.temperature
        g = factor(brief(result.view("d_scores", head)[i, j].item()))
        lines.insert(0, msg("backward.explain.raw", cell=cell, factor=f"{multiplier:g}", g=g))  # then dS's arithmetic
    elif name == "weights":
        d_o = next(result.view(d, head) for d in ("d_head_outputs", "d_concat", "d_outputs") if d in result)
        row, v = d_o[i], trace.view("values", head)[j]
        terms = " + ".join(
            f"{factor(brief(x))}·{factor(brief(y))}" for x, y in zip(row.tolist(), v.tolist(), strict=True)
        )
        value = factor(brief(result[grad][whole].item()))
        lines += [msg("backward.explain.weight", cell=cell, i=sub(i), j=sub(j), terms=terms, value=value),
                  msg("backward.explain.weights")]  # fmt: skip
    elif name == "outputs" and result.loss.cell is None:
        o, target = trace.outputs[i, j].item(), result.loss.target[i][j]
        value = factor(brief(result[grad][whole].item()))
        lines.append(msg("backward.explain.output", cell=cell, o=brief(o), t=brief(target), value=value))
    return Derivation(title, tuple(lines), parts, head)
