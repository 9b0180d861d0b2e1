"""A record as HTML for Jupyter, from plain data: a heading, its steps (label, title, tensors' shapes, notes) and a
matrix under them. All text is escaped: token labels are whatever the case's author typed."""

from __future__ import annotations

import html

SHOWN = 16  # rows and columns of a matrix shown; past that, the first ones and a line that says so

Row = tuple[str, str, list[tuple[str, str]], list[str]]  # label, title, (tensor, its shape), notes


def record_html(kind: str, heading: str, steps: list[Row], tail: tuple[str, list[str], list[list[str]]] | None) -> str:
    """The record as one HTML fragment: `kind: heading`, a table of its steps, then `tail` (caption, row labels,
    cells) when it has one."""
    body = "".join(
        f"<tr><td>{_e(label)}</td><td>{_e(title)}</td>"
        f"<td>{'<br>'.join(f'<code>{_e(name)}</code> {_e(shape)}' for name, shape in tensors)}</td>"
        f"<td>{'<br>'.join(map(_e, notes))}</td></tr>"
        for label, title, tensors, notes in steps
    )
    return (
        f'<div class="attention-record"><p><b>{_e(kind)}</b>: {_e(heading)}</p>'
        "<table><thead><tr><th>step</th><th>title</th><th>tensors</th><th>notes</th></tr></thead>"
        f"<tbody>{body}</tbody></table>{'' if tail is None else _matrix(*tail)}</div>"
    )


def _matrix(caption: str, labels: list[str], cells: list[list[str]]) -> str:
    """A matrix, one row per label: the first SHOWN rows and columns, and a line naming what was left out."""
    n, d = len(cells), len(cells[0]) if cells else 0
    head = "".join(f"<th>{j + 1}</th>" for j in range(min(d, SHOWN)))
    rows = "".join(
        f"<tr><th>{_e(labels[i])}</th>{''.join(f'<td>{_e(v)}</td>' for v in cells[i][:SHOWN])}</tr>"
        for i in range(min(n, SHOWN))
    )
    more = f"<p>(the first {min(n, SHOWN)} of {n} rows, {min(d, SHOWN)} of {d} columns)</p>"
    return (
        f"<p><b>{_e(caption)}</b></p><table><thead><tr><th>token</th>{head}</tr></thead><tbody>{rows}</tbody></table>"
        + (more if n > SHOWN or d > SHOWN else "")
    )


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
