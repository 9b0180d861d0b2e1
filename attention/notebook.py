"""A trace as HTML, for Jupyter (Trace._repr_html_): the eight steps with their tensors' shapes, then the outputs."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core import Trace
    from .tiles import Tiled

SHOWN = 16  # rows and columns of the outputs shown; past that, the first ones and a line that says so


def trace_html(trace: Trace, digits: int = 4) -> str:
    """The trace's steps (number, title, tensors with their shapes, notes) and its outputs (rows labelled by the
    tokens), as one HTML fragment. All text is escaped: token labels are whatever the case's author typed."""
    case, o = trace.case, trace.case.options
    sizes = f"n = {case.n}, d_in = {case.d_in}, d_k = {case.d_k}, d_v = {case.d_v}"
    heads = f", {o.heads} heads" if o.heads > 1 else ""
    steps = "".join(
        "<tr>"
        f"<td>{step.label}</td><td>{_e(step.title)}</td>"
        f"<td>{'<br>'.join(f'<code>{_e(name)}</code> {_shape(t)}' for name, t in step.tensors.items())}</td>"
        f"<td>{'<br>'.join(_e(str(note)) for note in step.notes)}</td>"
        "</tr>"
        for step in trace.steps
    )
    return (
        '<div class="attention-trace">'
        f"<p><b>Attention trace</b>: {sizes}{heads} · {_e(o.dtype)} · {_e(trace.device)}</p>"
        "<table><thead><tr><th>step</th><th>title</th><th>tensors</th><th>notes</th></tr></thead>"
        f"<tbody>{steps}</tbody></table>"
        f"<p><b>outputs</b> {_shape(trace.outputs)}</p>{_matrix(trace, digits)}"
        "</div>"
    )


def _matrix(trace: Trace, digits: int) -> str:
    """The outputs, one row per token: the first SHOWN rows and columns, and a line naming what was left out."""
    outputs, tokens = trace.outputs.cpu().tolist(), trace.case.tokens
    n, d = len(outputs), len(outputs[0])
    head = "".join(f"<th>{j + 1}</th>" for j in range(min(d, SHOWN)))
    rows = "".join(
        f"<tr><th>{_e(tokens[i])}</th>{''.join(f'<td>{v:.{digits}g}</td>' for v in outputs[i][:SHOWN])}</tr>"
        for i in range(min(n, SHOWN))
    )
    more = f"<p>(the first {min(n, SHOWN)} of {n} rows, {min(d, SHOWN)} of {d} columns)</p>"
    return f"<table><thead><tr><th>token</th>{head}</tr></thead><tbody>{rows}</tbody></table>" + (
        more if n > SHOWN or d > SHOWN else ""
    )


def tiled_html(run: Tiled, digits: int = 4) -> str:
    """A tiled run (Tiled._repr_html_): its tiles in order, what each did to the first query's m and ℓ (head 1),
    the skipped ones, and the outputs' shape."""
    rows = []
    for v in run.visits:
        if v.skipped:
            did = "<td colspan=3>skipped: every score of the tile masked</td>"
        else:
            m0, m1, r, l0, l1 = (v.tensors[k][0, 0].item() for k in ("m_before", "m", "rescale", "l_before", "l"))
            m, ell = f"{m0:.{digits}g} → {m1:.{digits}g}", f"{l0:.{digits}g} → {l1:.{digits}g}"
            did = f"<td>{m}</td><td>{r:.{digits}g}</td><td>{ell}</td>"
        rows.append(f"<tr><td>{v.query_tile + 1}</td><td>{v.key_tile + 1}</td>{did}</tr>")
    recorded = "" if run.recorded is None else f" (recorded: query tiles {', '.join(str(i + 1) for i in run.recorded)})"
    return (
        '<div class="attention-tiles">'
        f"<p><b>Attention in tiles</b>: n = {run.case.n}, tiles of {run.block_q} × {run.block_k}: {run.tiles} tiles, "
        f"{len(run.skipped)} skipped{recorded} · {_e(run.case.options.dtype)} · {_e(run.device)}</p>"
        "<table><thead><tr><th>query tile</th><th>key tile</th><th>m (first query)</th>"
        "<th>e<sup>m_old − m_new</sup></th><th>ℓ (first query)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        f"<p><b>outputs</b> {_shape(run.outputs)}: partial ÷ ℓ, as step 7's</p>"
        "</div>"
    )


def _shape(tensor) -> str:
    """A tensor's shape and dtype, e.g. (3 × 4) float32 (step 6's Broadcast has both too)."""
    return f"({' × '.join(map(str, tensor.shape))}) {str(tensor.dtype).removeprefix('torch.')}"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


# The backward pass (issue 21) -------------------------------------------------------------------------------------


def backward_html(result) -> str:
    """A backward pass as HTML (Backward._repr_html_): the loss, the check against autograd, and the steps in the
    order they ran with their gradients' shapes."""
    from .backward import check

    checked = check(result)
    steps = "".join(
        "<tr>"
        f"<td>{step.label}</td><td>{_e(step.title)}</td>"
        f"<td>{'<br>'.join(f'<code>{_e(name)}</code> {_shape(t)}' for name, t in step.tensors.items())}</td>"
        "</tr>"
        for step in result.steps
    )
    agrees = "agrees with" if checked.agrees else "differs from"
    return (
        '<div class="attention-backward">'
        f"<p><b>Backward pass</b>: loss ({result.loss.kind}) = {result.value:.6g} · {agrees} "
        f"{checked.oracle} (largest difference {checked.difference:.2g})</p>"
        "<table><thead><tr><th>step</th><th>back through</th><th>gradients</th></tr></thead>"
        f"<tbody>{steps}</tbody></table>"
        "</div>"
    )


def decoding_html(decoding) -> str:
    """A decoding (decoding.Decoding) as HTML: the status, then each step's tensors with their shapes and its
    difference from row t of the causal trace (token labels escaped)."""
    rows = "".join(
        f"<tr><td>{step.t + 1}</td><td>{_e(decoding.case.tokens[step.t])}</td>"
        f"<td>{'<br>'.join(f'<code>{_e(name)}</code> {_shape(t)}' for name, t in step.tensors.items())}</td>"
        f"<td>{step.difference:.3g}</td></tr>"
        for step in decoding.steps
    )
    return (
        '<div class="attention-decoding">'
        f"<p><b>Decoding with a KV cache</b>: {_e(str(decoding.status()))}</p>"
        "<table><thead><tr><th>step</th><th>token</th><th>tensors</th><th>difference</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
    )
