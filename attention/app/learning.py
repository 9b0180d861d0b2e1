"""The backward pass's side of the session (issue 21): the loss chosen, training steps taken, and their link; plain
Python, no Streamlit (the Backward page calls these operations, tests drive them directly)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from .. import backward as bw
from ..case import CaseError
from ..core import Trace
from ..i18n import msg
from . import typed
from .session import Session

PARAMS = ("loss", "target", "lr", "train")  # the link's parameters: the loss, and the steps taken (not the weights)
MAX_LINK_STEPS = 200  # steps a link may ask to replay (each is a forward and a backward pass of the case)
MIN_LR, DEFAULT_LR = 1e-4, 0.01
MAX_TARGET_CHARS = 4000
# heads × n² past which the app makes no backward pass: its two or three n × n gradients per head beside the forward
# trace's four would pass the session's memory bound (README, "Hosting"); the CLI and the library have none
MAX_CELLS = 1 << 20  # n = 1024 at one head, 512 at four: measured within the bound (README, "The backward pass")


def too_big(trace: Trace) -> bool:
    return trace.case.options.heads * trace.case.n**2 > MAX_CELLS


def loss(session: Session, trace: Trace) -> bw.Loss:
    """The session's loss for this trace: its output cell, its target as typed once valid, or the default target."""
    if session.learned.loss_cell is not None:
        candidate = bw.Loss(cell=session.learned.loss_cell)
    elif session.learned.target is not None:
        candidate = bw.Loss(target=session.learned.target)
    elif session.learned.default_target is not None:  # training: the target stays where the first step saw it
        candidate = bw.Loss(target=session.learned.default_target)
    else:
        return bw.default_loss(trace)
    return candidate if bw.fits(candidate, trace) else bw.default_loss(trace)  # a resize: the default again


def result(session: Session, trace: Trace) -> bw.Backward:
    """The backward pass of the trace with the session's loss, kept while the case and the loss are."""
    chosen = loss(session, trace)
    return backward_of(session, trace, chosen)


def backward_of(session: Session, trace: Trace, chosen: bw.Loss) -> bw.Backward:
    def make():
        made = bw.backward(trace, chosen)
        return made, tuple(t for step in made.steps for t in step.tensors.values())  # its tensors: counted bytes

    return session.derived.get(("backward", trace.case, trace.device, chosen), make)[0]


def check(session: Session, result: bw.Backward) -> bw.GradientCheck:
    """The hand-written gradients against autograd's, kept while the case and the loss are."""
    return session.derived.get(("backward check", result.forward.case, result.loss), lambda: bw.check(result))


def choose_cell(session: Session, cell: tuple[int, int] | None) -> None:
    """The loss becomes one output number (row, column from 0), or, with None, the target again."""
    if cell != session.learned.loss_cell:
        forget_training(session)  # the steps taken followed the other loss: the weights they reached stay
    session.learned.loss_cell = cell


def forget_training(session: Session) -> None:
    """The weights as they are become the case's own (an edited case): the link names them, not steps taken."""
    session.learned.forget()


def settle(session: Session) -> None:
    """An edit after training steps (or a new case) leaves the steps behind: the link then names the case itself."""
    if session.learned.trained and session.case is not session.learned.trained_case:
        forget_training(session)


def edit_target(session: Session, trace: Trace, row: int, column: int, text: object) -> None:
    """One cell of the target as typed: a number within the limit changes it; anything else is refused with the
    editor's message, and the last valid target stays."""
    current = loss(session, trace)
    target = current.target if current.target is not None else bw.default_loss(trace).target
    n, d = len(target), len(target[0])
    if not (0 <= row < n and 0 <= column < d):
        return
    value = typed.cell(text if isinstance(text, str) else str(text))
    where = msg("backward.where.target_cell", row=row + 1, column=column + 1)
    if not isinstance(value, float) or not math.isfinite(value):
        session.learned.target_error = CaseError(where, typed.problem(str(text)))
        return
    rows = [list(r) for r in target]
    rows[row][column] = value
    forget_training(session)
    learned = session.learned
    learned.target, learned.target_error, learned.loss_cell = tuple(map(tuple, rows)), None, None


def choose_lr(session: Session, lr: object) -> None:
    """A learning rate within (MIN_LR, MAX_LR); another is refused with a notice, and the last one stays."""
    if isinstance(lr, int | float) and not isinstance(lr, bool) and MIN_LR <= lr <= bw.MAX_LR:
        session.learned.lr = float(lr)
    else:
        session.notices.append(msg("backward.notice.lr_refused", low=MIN_LR, high=bw.MAX_LR))


def train(session: Session, trace: Trace, link: Mapping[str, str] | None = None) -> bool:
    """One gradient step on W_Q, W_K and W_V with the session's loss and learning rate: the session's inputs take
    the new weights (every page follows); a step that makes a number non-finite is refused with a notice, and the
    weights stay. `link`: the link parameters of the case before the first step (the link names that case)."""
    chosen = loss(session, trace)
    if too_big(trace):
        session.notices.append(msg("backward.too_big", cells=MAX_CELLS))
        return False
    try:
        stepped = bw.train_step(trace, chosen, session.learned.lr, backward_of(session, trace, chosen))
    except bw.TrainingError as e:
        session.notices.append(e.args[0])
        return False
    if session.learned.untrained is None:
        learned = session.learned
        learned.untrained, learned.untrained_link, learned.losses = session.inputs, dict(link or {}), []
        learned.default_target = chosen.target if learned.target is None and learned.loss_cell is None else None
    if not session.learned.losses:
        session.learned.losses.append(bw.loss_value(trace, chosen))
    matrices = {name: getattr(stepped, name) for name in ("w_query", "w_key", "w_value")}
    before = session.case
    session.inputs = replace(session.inputs, **matrices)
    session.generation += 1  # the editors show the new weights
    session._check(numbers=True)
    if session.error is not None:  # cannot be, as train_step checks the bounds; kept safe all the same
        session.inputs, session.case = session.learned.untrained, before
        return False
    session.learned.trained, session.learned.trained_case = session.learned.trained + 1, session.case
    session.learned.last_step = {name: getattr(trace.case, name) for name in matrices}  # the weights before this step
    return True


def record_loss(session: Session, trace: Trace) -> None:
    """The loss after the last step, once its trace is made (the loss line's next point)."""
    if session.learned.trained and len(session.learned.losses) == session.learned.trained:
        session.learned.losses.append(bw.loss_value(trace, loss(session, trace)))


def reset(session: Session) -> None:
    """Back to the weights before the first step."""
    if session.learned.untrained is not None:
        session.inputs, session.learned.untrained = session.learned.untrained, None
        session.generation += 1
        session._check(numbers=True)
    forget_training(session)


def link(session: Session) -> dict[str, str | None]:
    """The link's parameters of the backward pass: the loss (a cell as row.column from 1, or an edited target),
    and, once steps are taken, the learning rate and their count."""
    out: dict[str, str | None] = dict.fromkeys(PARAMS)
    if session.learned.loss_cell is not None:
        out["loss"] = f"{session.learned.loss_cell[0] + 1}.{session.learned.loss_cell[1] + 1}"
    elif session.learned.target is not None:
        out["target"] = ";".join(",".join(repr(v) for v in row) for row in session.learned.target)
    if session.learned.trained:
        out["lr"], out["train"] = repr(session.learned.lr), str(session.learned.trained)
    return out


def open_link(session: Session, params: Mapping[str, str | None], trace_of) -> None:
    """A link's loss and training steps: the loss set, then the steps replayed from the link's case (`trace_of`
    makes a case's trace). A bad part is refused with a notice, and the rest kept."""
    said = {name: params.get(name) for name in PARAMS}
    if said["loss"]:
        parts = said["loss"].split(".")
        if len(parts) == 2 and all(p.isascii() and p.isdigit() and len(p) < 6 for p in parts):
            cell = int(parts[0]) - 1, int(parts[1]) - 1
            if bw.fits(bw.Loss(cell=cell), trace_of(session.case)):
                session.learned.loss_cell = cell
            else:
                session.notices.append(msg("backward.notice.bad_loss"))
        else:
            session.notices.append(msg("backward.notice.bad_loss"))
    elif said["target"]:
        rows = _target(said["target"])
        if rows is not None and bw.fits(bw.Loss(target=rows), trace_of(session.case)):
            session.learned.target = rows
        else:
            session.notices.append(msg("backward.notice.bad_target"))
    if said["train"] or said["lr"]:
        lr, steps = _float(said["lr"]), said["train"] or ""
        ok = lr is not None and MIN_LR <= lr <= bw.MAX_LR and steps.isascii() and steps.isdigit()
        if not ok or not 0 < int(steps[:6]) <= MAX_LINK_STEPS:
            session.notices.append(msg("backward.notice.bad_train", high=MAX_LINK_STEPS))
            return
        session.learned.lr = lr
        link_before = {k: v for k, v in params.items() if k not in ("lr", "train")}
        for _ in range(int(steps)):
            trace = trace_of(session.case)
            if not train(session, trace, link_before):
                break
            record_loss(session, trace_of(session.case))


def _target(text: str) -> tuple[tuple[float, ...], ...] | None:
    if len(text) > MAX_TARGET_CHARS:
        return None
    rows = []
    for row in text.split(";"):
        numbers = [typed.number(v) for v in row.split(",")]
        if not numbers or any(v is None or not abs(v) <= 1e6 for v in numbers):
            return None
        rows.append(tuple(numbers))
    return tuple(rows)


def _float(text: str | None) -> float | None:
    return typed.number(text) if text else None
