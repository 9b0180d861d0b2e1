"""The Backward page's view (the loss chosen, the training steps taken) and its operations, and their link; plain
Python, no Streamlit (the Backward page calls these operations, tests drive them directly)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..app import typed
from ..app.session import Session
from ..base.case import Case, CaseError
from ..base.i18n import msg
from ..base.record import Check
from ..forward.compute import Trace
from .compute import Backward, backward, check
from .loss import Loss, default_loss, fits, loss_value
from .training import MAX_LR, TrainingError, train_step

PARAMS = ("loss", "target", "lr", "train")  # the link's parameters: the loss, and the steps taken (not the weights)
MAX_LINK_STEPS = 200  # steps a link may ask to replay (each is a forward and a backward pass of the case)
MIN_LR, DEFAULT_LR = 1e-4, 0.01
MAX_TARGET_CHARS = 4000
# heads × n × n_kv past which the app makes no backward pass: its two or three n × n_kv gradients per head beside the
# forward trace's four would pass the session's memory bound (docs/hosting.md); the CLI and the library have none
MAX_CELLS = 1 << 20  # n = 1024 at one head, 512 at four: measured within the bound (docs/backward.md)


@dataclass
class Learned:
    """What the Backward page holds for one tab; a new whole case forgets the steps (not the loss)."""

    loss_cell: tuple[int, int] | None = None  # the loss is this output number (row, column from 0); None: the target
    picked: tuple[int, int] | None = None  # with the target: the output number picked (its target typed, its map)
    target: tuple[tuple[float, ...], ...] | None = None  # the target's numbers once edited; None: the default one
    target_error: CaseError | None = None  # why the target's last edit was refused
    lr: float = DEFAULT_LR  # the learning rate of a training step
    trained: int = 0  # gradient steps taken on W_Q, W_K, W_V since the weights were the untrained ones
    untrained: object = field(default=None, repr=False)  # the session's Inputs before the first step: Reset's
    untrained_link: dict | None = field(default=None, repr=False)  # the link that named the case before it
    last_step: dict | None = field(default=None, repr=False)  # W_Q, W_K, W_V before the last step
    losses: list[float] = field(default_factory=list)  # the loss before the first step and after each
    trained_case: Case | None = field(default=None, repr=False)  # the case the last step made (an edit leaves it)
    default_target: tuple | None = field(default=None, repr=False)  # the default target of the untrained outputs

    def forget(self) -> None:
        """The steps left behind: the weights as they are become the case's own."""
        self.trained, self.untrained, self.untrained_link, self.trained_case = 0, None, None, None
        self.losses, self.last_step, self.default_target = [], None, None


def too_big(trace: Trace) -> bool:
    return trace.case.options.heads * trace.case.n * trace.case.n_kv > MAX_CELLS  # n × n_kv scores a head


def loss(session: Session, trace: Trace) -> Loss:
    """The session's loss for this trace: its output cell, its target as typed once valid, or the default target."""
    view = session.view(Learned)
    if view.loss_cell is not None:
        candidate = Loss(cell=view.loss_cell)
    elif view.target is not None:
        candidate = Loss(target=view.target)
    elif view.default_target is not None:  # training: the target stays where the first step saw it
        candidate = Loss(target=view.default_target)
    else:
        return kept_default_loss(session, trace)
    return candidate if fits(candidate, trace) else kept_default_loss(session, trace)  # a resize: the default again


def kept_default_loss(session: Session, trace: Trace) -> Loss:
    """default_loss, kept while the case is (its target writes every output number: 65,536 of them at the limits)."""
    return session.derived.get(("default loss", trace.case, trace.device), lambda: default_loss(trace))


def result(session: Session, trace: Trace) -> Backward:
    """The backward pass of the trace with the session's loss, kept while the case and the loss are."""
    chosen = loss(session, trace)
    return backward_of(session, trace, chosen)


def backward_of(session: Session, trace: Trace, chosen: Loss) -> Backward:
    def make():
        made = backward(trace, chosen)
        return made, tuple(t for step in made.steps for t in step.tensors.values())  # its tensors: counted bytes

    return session.derived.get(("backward", trace.case, trace.device, chosen), make)[0]


def gradient_check(session: Session, result: Backward) -> Check:
    """The hand-written gradients against autograd's, kept while the case and the loss are."""
    return session.derived.get(("backward check", result.forward.case, result.loss), lambda: check(result))


def first_pick(trace: Trace) -> tuple[int, int]:
    """The output number picked before any pick: output 3's second (the article's 7.8), or the last there is."""
    n, d = trace.outputs.shape
    return min(2, n - 1), min(1, d - 1)


def picked(session: Session, trace: Trace) -> tuple[int, int]:
    """The one output number the page's pickers hold (row, column from 0): the loss's when the loss is one output
    number, else the one whose target is typed; the sensitivity map is of it too, so one choice drives both."""
    view = session.view(Learned)
    cell = view.loss_cell if view.loss_cell is not None else view.picked
    if cell is None:
        return first_pick(trace)
    n, d = trace.outputs.shape
    return min(cell[0], n - 1), min(cell[1], d - 1)  # a resize keeps the pick inside the outputs


def pick(session: Session, cell: tuple[int, int]) -> None:
    """Another output number picked: the loss's, when the loss is one output number (training steps left behind),
    else the one whose target is typed."""
    view = session.view(Learned)
    if view.loss_cell is not None:
        choose_cell(session, cell)
    else:
        view.picked = cell


def choose_kind(session: Session, trace: Trace, cell: bool) -> None:
    """The loss becomes the picked output number (`cell`), or the target again, the same number still picked."""
    at = picked(session, trace)
    session.view(Learned).picked = at
    choose_cell(session, at if cell else None)


def choose_cell(session: Session, cell: tuple[int, int] | None) -> None:
    """The loss becomes one output number (row, column from 0), or, with None, the target again."""
    view = session.view(Learned)
    if cell != view.loss_cell:
        forget_training(session)  # the steps taken followed the other loss: the weights they reached stay
    view.loss_cell = cell


def forget_training(session: Session) -> None:
    """The weights as they are become the case's own (an edited case): the link names them, not steps taken."""
    view = session.view(Learned)
    view.forget()


def settle(session: Session) -> None:
    """An edit after training steps (or a new case) leaves the steps behind: the link then names the case itself."""
    view = session.view(Learned)
    if view.trained and session.case is not view.trained_case:
        forget_training(session)


def edit_target(session: Session, trace: Trace, row: int, column: int, text: object) -> None:
    """One cell of the target as typed: a number within the limit changes it; anything else is refused with the
    editor's message, and the last valid target stays."""
    view = session.view(Learned)
    current = loss(session, trace)
    target = current.target if current.target is not None else kept_default_loss(session, trace).target
    n, d = len(target), len(target[0])
    if not (0 <= row < n and 0 <= column < d):
        return
    value = typed.cell(text if isinstance(text, str) else str(text))
    where = msg("backward.where.target_cell", row=row + 1, column=column + 1)
    if not isinstance(value, float) or not math.isfinite(value):
        view.target_error = CaseError(where, typed.problem(str(text)))
        return
    rows = [list(r) for r in target]
    rows[row][column] = value
    forget_training(session)
    view.target, view.target_error, view.loss_cell = tuple(map(tuple, rows)), None, None


def choose_lr(session: Session, lr: object) -> None:
    """A learning rate within (MIN_LR, MAX_LR); another is refused with a notice, and the last one stays."""
    view = session.view(Learned)
    if isinstance(lr, int | float) and not isinstance(lr, bool) and MIN_LR <= lr <= MAX_LR:
        view.lr = float(lr)
    else:
        session.notices.append(msg("backward.notice.lr_refused", low=MIN_LR, high=MAX_LR))


def train(session: Session, trace: Trace, link: Mapping[str, str] | None = None) -> bool:
    """One gradient step on W_Q, W_K and W_V with the session's loss and learning rate: the session's inputs take
    the new weights (every page follows); a step that makes a number non-finite is refused with a notice, and the
    weights stay. `link`: the link parameters of the case before the first step (the link names that case)."""
    view = session.view(Learned)
    chosen = loss(session, trace)
    if too_big(trace):
        session.notices.append(msg("backward.too_big", cells=MAX_CELLS))
        return False
    try:
        stepped = train_step(trace, chosen, view.lr, backward_of(session, trace, chosen))
    except TrainingError as e:
        session.notices.append(e.args[0])
        return False
    if view.untrained is None:
        view.untrained, view.untrained_link, view.losses = session.inputs, dict(link or {}), []
        view.default_target = chosen.target if view.target is None and view.loss_cell is None else None
    if not view.losses:
        view.losses.append(loss_value(trace, chosen))
    matrices = {name: getattr(stepped, name) for name in ("w_query", "w_key", "w_value")}
    before = session.case
    session.inputs = replace(session.inputs, **matrices)
    session.generation += 1  # the editors show the new weights
    session._check(numbers=True)
    if session.error is not None:  # cannot be, as train_step checks the bounds; kept safe all the same
        session.inputs, session.case = view.untrained, before
        return False
    view.trained, view.trained_case = view.trained + 1, session.case
    view.last_step = {name: getattr(trace.case, name) for name in matrices}  # the weights before this step
    return True


def record_loss(session: Session, trace: Trace) -> None:
    """The loss after the last step, once its trace is made (the loss line's next point)."""
    view = session.view(Learned)
    if view.trained and len(view.losses) == view.trained:
        view.losses.append(loss_value(trace, loss(session, trace)))


def reset(session: Session) -> None:
    """Back to the weights before the first step."""
    view = session.view(Learned)
    if view.untrained is not None:
        session.inputs, view.untrained = view.untrained, None
        session.generation += 1
        session._check(numbers=True)
    forget_training(session)


def link(session: Session) -> dict[str, str | None]:
    """The link's parameters of the backward pass: the loss (a cell as row.column from 1, or an edited target),
    and, once steps are taken, the learning rate and their count."""
    view = session.view(Learned)
    out: dict[str, str | None] = dict.fromkeys(PARAMS)
    if view.loss_cell is not None:
        out["loss"] = f"{view.loss_cell[0] + 1}.{view.loss_cell[1] + 1}"
    elif view.target is not None:
        out["target"] = ";".join(",".join(repr(v) for v in row) for row in view.target)
    if view.trained:
        out["lr"], out["train"] = repr(view.lr), str(view.trained)
    return out


def open_link(session: Session, params: Mapping[str, str | None], trace_of) -> None:
    """A link's loss and training steps: the loss set, then the steps replayed from the link's case (`trace_of`
    makes a case's trace). A bad part is refused with a notice, and the rest kept."""
    view = session.view(Learned)
    said = {name: params.get(name) for name in PARAMS}
    if said["loss"]:
        parts = said["loss"].split(".")
        if len(parts) == 2 and all(p.isascii() and p.isdigit() and len(p) < 6 for p in parts):
            cell = int(parts[0]) - 1, int(parts[1]) - 1
            if fits(Loss(cell=cell), trace_of(session.case)):
                view.loss_cell = cell
            else:
                session.notices.append(msg("backward.notice.bad_loss"))
        else:
            session.notices.append(msg("backward.notice.bad_loss"))
    elif said["target"]:
        rows = _target(said["target"])
        if rows is not None and fits(Loss(target=rows), trace_of(session.case)):
            view.target = rows
        else:
            session.notices.append(msg("backward.notice.bad_target"))
    if said["train"] or said["lr"]:
        lr, steps = _float(said["lr"]), said["train"] or ""
        ok = lr is not None and MIN_LR <= lr <= MAX_LR and steps.isascii() and steps.isdigit()
        if not ok or not 0 < int(steps[:6]) <= MAX_LINK_STEPS:
            session.notices.append(msg("backward.notice.bad_train", high=MAX_LINK_STEPS))
            return
        view.lr = lr
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
