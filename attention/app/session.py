"""The session model: what one visitor typed and chose, the last valid case, and the operations on them.

Plain Python, no Streamlit: the sidebar, the editors and a link call these operations, and tests drive them directly.
Every change goes one way: an operation changes the inputs as typed, then they are checked, and either become the
case every page shows or leave it as it was with the error that says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from .. import models
from ..base import presets
from ..base.case import CASE_FORMAT, Case, CaseError, Options, parse_case, with_options
from ..base.device import resolve_device
from ..base.i18n import LANGUAGES, Message, excerpt, msg
from ..forward.compute import ROUNDED_WITHIN
from ..forward.steps import STEP_NAMES, step_near
from ..forward.teach import rounding_gap
from ..models import Model
from . import choices, cross, heads, latent, typed
from .cache import Derived
from .choices import NUMBERS, SIZES, Controls, Inputs
from .origins.given import Article
from .origins.origin import Origin, edited

View = TypeVar("View")
ROTARY = {"heads", "rope", "rope_fraction"}  # what DeepSeek's decoupled rotary key in a latent made here follows

Cells = Mapping[tuple[int, int], object]  # (row, column) -> a cell's value as typed
OPTION_GRIDS = {"where.mask": "mask", "where.w_out": "w_out", "where.weights_override": "rounded",
                "where.relative_bias": "relative_bias", "where.w_latent": "w_latent",
                "where.latent_norm": "latent_norm"}  # an error's grid  # fmt: skip


@dataclass
class Session:
    """One browser tab's state: the controls, the inputs as typed, and the last valid case, which every page shows."""

    controls: Controls
    inputs: Inputs
    case: Case
    error: CaseError | None = None  # why the inputs as typed are not a case; None: they are `case`
    step: str = STEP_NAMES[0]  # the walkthrough's step, by its name (core.step_names)
    lang: str = "en"
    image_format: str = "png"  # what a chart's toolbar saves
    notices: list[Message] = field(default_factory=list)  # said once, at the top of the next page drawn
    generation: int = 0  # how often the matrices were replaced whole: an editor made before knows older grids
    next_step_at: float | None = None  # the player's clock (time.monotonic) while it plays
    rounding: Message | None = None  # why the article's rounded softmax, though chosen, is not used: None if it is
    widgets: dict = field(default_factory=dict, repr=False)  # what the sidebar's widgets showed when last drawn
    runs: int = 0  # runs drawn in this tab: the last element of each tells a dragged editor to send on (grid.pace)
    derived: Derived = field(default_factory=Derived, repr=False, compare=False)  # see cache.py
    source: Origin | None = None  # where the last whole case came from (see origin; Session.start sets it)
    loader: Callable[[str], Model] = field(default=models.loaded, repr=False, compare=False)  # the app's: loaded.py
    views: dict[type, object] = field(default_factory=dict)  # each capability's view of this tab, by its kind
    _numbers: Case | None = field(default=None, repr=False)  # the inputs' matrices, checked, with no options
    _origin: tuple | None = field(default=None, repr=False, compare=False)  # (case, source, origin): the last answer

    @classmethod
    def start(cls, lang: str = "en") -> Session:
        """A new session on the article's numbers."""
        article, lang = presets.article(), lang if lang in LANGUAGES else "en"
        session = cls(Controls(), Inputs.of(article), article, lang=lang, source=Article(article))
        session._check(numbers=True)
        return session

    def view(self, kind: type[View]) -> View:
        """This tab's view of a capability (what its page shows: a tile, a loss), made on first use."""
        return self.views.setdefault(kind, kind())

    def keep(self, view: object) -> None:
        """A view replaced whole (a frozen one)."""
        self.views[type(view)] = view

    @property
    def origin(self) -> Origin:
        """Where the case came from: its source while the case is as it made it, else edited from it (one rule)."""
        return _origin(self)

    # Whole cases

    def load(self, case: Case, origin: Origin | None = None, keep_device: bool = False, checked: bool = False) -> None:
        """Put a whole case in from its origin (None: numbers handed in); the preset, seed and fill stay as chosen."""
        keep_device = keep_device or checked
        device = self.controls.device if keep_device else device_here(case.options.device, self.notices)
        self.controls = replace(Controls.of(case, keep=self.controls), device=device)
        self.inputs, self.source = Inputs.of(case), origin or Origin(case)
        self.generation += 1
        if checked:  # a model's numbers, checked as tensors (models/model.py): not again, number by number
            o = case.options  # grouped key/value heads set how wide w_key is: the numbers keep them (see _numbers)
            grouped = Options(heads=o.heads, kv_heads=o.kv_heads) if o.kv_heads else Options()
            self._numbers = case.with_checked_options(grouped)
        self._check(numbers=not checked)
        if checked:  # the case as the session made it (on its device), which the origin compares with
            self.source = replace(self.source, case=self.case)

    def refuse(self, error: CaseError, source: Origin | None = None) -> None:
        """A case its origin could not make: the last valid one stays, with why (and the source as it now stands)."""
        self.error, self.source = error, source or self.source

    # The sidebar's choices

    def choose(self, **changes: object) -> bool:
        """New sidebar choices: new sizes resize, new options are checked alone; whether the preset (or the random
        one's seed) changed, for its origin to make its case (origins.make.choose)."""
        # a value no widget can hold (a forged client sends anything) is refused with a notice, and the choice stays
        before, accepted = self.controls, {}
        for name, value in changes.items():
            if getattr(before, name) == value:
                continue
            if not choices.allowed(name, value):
                label = msg(f"sidebar.{choices.LABELS.get(name, name)}")  # the widget as shown, not its key
                self.notices.append(msg("notice.control_refused", name=label, value=excerpt(value)))
            elif name == "heads" and (value := heads.stepped(before, value, self.inputs, self.notices)) is None:
                continue  # a step past the last count the sizes allow: the count stays, and a notice says why
            else:
                accepted[name] = value
        if not (accepted := cross.accepted(before, accepted, self.notices)):  # options that need one sentence
            return False
        self.controls = c = replace(before, **accepted)
        if "sink" in accepted:  # one sink logit for every head, in place of a loaded case's own
            self.inputs = replace(self.inputs, sinks=None)
        if sources := "n_kv" in accepted:  # cross-attention's x_kv made, resized or set aside: new grids
            self.inputs, self.generation = cross.turned(self.inputs, c), self.generation + 1
        self.inputs = choices.to_edit(c, self.inputs)  # a custom mask, T5's table
        remade = bool(c.latent) and self.inputs.plain is not None and not ROTARY.isdisjoint(accepted)  # rotary key
        turned = ("latent" in accepted or remade) and _turn_latent(self, before)  # a latent made, or plain keys back
        c = self.controls  # (a latent width that cannot be made stays as it was)
        if c.preset_choice != before.preset_choice:
            return True
        if any(name in SIZES for name in accepted):
            if c.n != len(self.inputs.x):  # the n × n matrices (rounded weights, a mask) no longer fit
                self.controls = replace(c, use_rounded=False, mask="none" if c.mask == "custom" else c.mask)
            self.inputs = self.inputs.resized(c)
            self.generation += 1
            self._check(numbers=True)
        else:
            self._check(numbers=turned or sources)
        return False

    # Edits

    def edit(self, name: str, row: int, column: int, value: object) -> None:
        """One cell of a matrix, as typed (then checked); a cell the matrix does not have is left alone."""
        self.edit_cells(name, {(row, column): value})

    def edit_cells(self, name: str, cells: Cells) -> None:
        """Cells of a grid as typed (a number's text becomes the number), checked once; the same ones change nothing."""
        if name in choices.GRIDS and getattr(self.inputs, name) is not None:
            edited = self.inputs.with_cells(name, {at: typed.cell(typed.sent(v)) for at, v in cells.items()})
            if edited is not self.inputs:
                self.inputs = edited
                self._check(numbers=name in NUMBERS or name == "x_kv")  # (x_kv: the case's own too)

    def relabel(self, row: int, label: object, name: str = "tokens") -> None:
        """A token label of x ("tokens") or of cross-attention's x_kv ("tokens_kv"), as typed (then checked)."""
        tokens, label = getattr(self.inputs, name) or (), typed.sent(label)
        if 0 <= row < len(tokens) and tokens[row] != label:
            self.inputs = replace(self.inputs, **{name: (*tokens[:row], label, *tokens[row + 1 :])})
            self._check(numbers=True)

    def use_w_out(self, on: bool) -> None:
        """Add the output projection w_out (d_v × d_v, the identity to start with), or remove it."""
        self.inputs = replace(self.inputs, w_out=choices.identity(len(self.inputs.w_value[0])) if on else None)
        self._check(numbers=False)

    def go_to(self, step: str, by: int = 0, wrap: bool = False) -> None:
        """A step by its name, or `by` steps from it (core.step_near); the player goes round (`wrap`)."""
        self.step = step_near(self.case, step, by, wrap)

    def _check(self, numbers: bool) -> None:
        """Check the inputs as typed (the matrices when they changed): a valid case becomes the case, else why not."""
        try:
            if numbers or self._numbers is None:
                self._numbers = None
                self._numbers = _numbers(self.inputs, self.controls)
            (self.case, self.rounding), self.error = _with_options(self._numbers, self.controls, self.inputs), None
        except CaseError as e:
            self.error = as_typed(e, self.inputs)


def _turn_latent(session: Session, before: Controls) -> bool:
    """The latent width the controls ask for, made in the inputs (latent.turned): whether they changed. A width that
    cannot be made is refused with a notice saying why, and the width stays as it was."""
    try:
        inputs = latent.turned(session.inputs, session.controls)
    except CaseError as e:
        width = session.controls.latent
        session.controls = replace(session.controls, latent=before.latent)
        session.notices.append(msg("notice.latent_refused", width=width, error=e.message))
        return False
    if session.inputs.latent_norm is not None and inputs.latent_norm is None:
        session.notices.append(msg("notice.latent_norm_dropped"))
    session.inputs, session.generation = inputs, session.generation + 1  # W_UK and W_UV: new grids
    return True


def _origin(session: Session) -> Origin:
    """The session's origin, kept while its case and source are (made() compares cases: 110,000 numbers)."""
    kept = session._origin
    if kept is None or kept[0] is not session.case or kept[1] is not session.source:
        session._origin = kept = (session.case, session.source, edited(session.source, session.case))
    return kept[2]


def _numbers(inputs: Inputs, controls: Controls) -> Case:
    """The typed matrices (and cross-attention's x_kv) checked, with no options but those that set w_key's shape:
    grouped key/value heads (its width) and a latent (its rows)."""
    grouped = {"heads": controls.heads, "kv_heads": inputs.kv_heads} if inputs.kv_heads else {}
    grouped |= {"w_latent": inputs.w_latent} if inputs.w_latent is not None else {}  # W_UK's rows: the latent's
    matrices = {name: getattr(inputs, name) for name in NUMBERS}
    if inputs.x_kv is not None:
        matrices |= {"x_kv": inputs.x_kv, "tokens_kv": inputs.tokens_kv}
    return parse_case({"format": CASE_FORMAT, **matrices, "tokens": inputs.tokens, "options": grouped})


def _with_options(numbers: Case, controls: Controls, inputs: Inputs) -> tuple[Case, Message | None]:
    """The checked numbers with the options the controls describe, and why the article's rounded softmax, though
    chosen, is not used: the article rounded one head's softmax for its own numbers, so with several heads, or
    numbers and options whose softmax it would miss by more than ROUNDED_WITHIN, the exact softmax is used. Rounded
    weights a person edited (or a file brought) are not the article's: they are used as they are."""
    options = choices.options(controls, inputs)
    if options["weights_override"] is None:
        return with_options(numbers, **options), None
    if controls.heads > 1:
        return with_options(numbers, **options | {"weights_override": None}), msg(
            "notice.rounded_heads", heads=controls.heads
        )
    case = with_options(numbers, **options)
    if inputs.rounded != presets.ARTICLE_ROUNDED_WEIGHTS:
        return case, None
    gap = rounding_gap(case)
    if gap > ROUNDED_WITHIN:
        return with_options(case, weights_override=None), msg("notice.rounded_stale", gap=gap)
    return case, None


def as_typed(error: CaseError, inputs: Inputs) -> CaseError:
    """A cell's error in the words of what was typed: the core reads JSON and calls any text "not a number", but a
    person who typed 1e400, −1 or 1,5 is told that it is past the limit, or which character to change."""
    found = place(error)
    if found is None or found[2] is None or getattr(error.problem, "key", "") != "error.not_a_number":
        return error
    name, row, column = found
    value = getattr(inputs, name)[row][column]
    return CaseError(error.where, typed.problem(value)) if isinstance(value, str) else error


def place(error: CaseError | None) -> tuple[str, int, int | None] | None:
    """Where an error is, as (the grid of Inputs, row, column) counted from 0, or ("tokens", label, None) for a token
    label; None for a place that is no cell (an option, a size)."""
    where = getattr(error, "where", None)
    key, params = getattr(where, "key", None), getattr(where, "params", {})
    if key in ("where.label", "where.key_label"):  # x's, or cross-attention's x_kv's
        return "tokens" if key == "where.label" else "tokens_kv", params["label"] - 1, None
    if key == "where.bucket":  # T5's table: a head's row, a bucket's column
        return "relative_bias", params["where"].params["head"] - 1, params["bucket"]
    if key == "where.norm_weight" and getattr(params["name"], "key", None) == "where.latent_norm":
        return "latent_norm", 0, params["dim"] - 1  # the latent's norm weights: one row
    if key != "where.column" or getattr(params["where"], "key", None) not in ("where.row", "where.row_token"):
        return None
    row = params["where"].params
    name = row["name"]  # x, w_query, …, or an option's grid in words (a Message: where.mask)
    return OPTION_GRIDS.get(getattr(name, "key", None), name), row["row"] - 1, params["column"] - 1


def device_here(spec: str, notices: list[Message]) -> str:
    """The device a case asks for, when it is here; else the CPU, with a notice."""
    try:
        return str(resolve_device(spec))
    except CaseError as e:
        notices.append(msg("notice.device_cpu", error=e.message))
        return "cpu"
