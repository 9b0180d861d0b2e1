"""The session model: what one visitor typed and chose, the last valid case, and the operations on them.

Plain Python, no Streamlit: the sidebar, the editors and a link call these operations, and tests drive them directly.
Every change goes one way: an operation changes the inputs as typed, then they are checked, and either become the
case every page shows or leave it as it was with the error that says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from .. import files, presets
from ..case import (
    CASE_FORMAT,
    DEVICE_PATTERN,
    DTYPES,
    MAX_D,
    MAX_HEADS,
    MAX_N,
    MAX_SCALE,
    MAX_TEMPERATURE,
    MIN_SCALE,
    MIN_TEMPERATURE,
    Case,
    CaseError,
    parse_case,
    with_options,
)
from ..core import STEP_NAMES
from ..devices import resolve_device
from ..i18n import LANGUAGES, Message, clip, excerpt, msg
from .cache import Derived

Grid = tuple[tuple[object, ...], ...]  # rows of cells as typed: numbers, or whatever a client sent
NUMBERS = ("x", "w_query", "w_key", "w_value")  # the case's own matrices; the other grids are options
OPTIONAL = ("w_out", "mask", "rounded")  # None when the case has none
SIZES = {"n": MAX_N, "d_in": MAX_D, "d_k": MAX_D, "d_v": MAX_D}
SCALES = ("none", "sqrt_dk", "custom")
MASKS = ("none", "causal", "custom")
FILLS = ("zeros", "random")
IMAGE_FORMATS = ("png", "svg")


@dataclass(frozen=True)
class Controls:
    """The sidebar's choices, each held by a widget of the same name."""

    preset: str = "article"  # presets.PRESETS
    seed: int = 0  # the random preset's, and random new cells' after a resize
    n: int = 3
    d_in: int = 4
    d_k: int = 3
    d_v: int = 3
    fill: str = "zeros"  # new cells after a resize: zeros or seeded random numbers
    use_rounded: bool = True  # the article's rounded softmax, while the inputs have it
    scale: str = "none"  # "none", "sqrt_dk", or "custom": × scale_value
    scale_value: float = 1.0
    temperature: float = 1.0
    mask: str = "none"  # "none", "causal", or "custom": the inputs' own 0/1 matrix
    heads: int = 1
    dtype: str = "float32"
    device: str = "cpu"


CONTROLS = tuple(f.name for f in fields(Controls))
MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class Inputs:
    """The matrices and token labels as typed, perhaps invalid; replaced whole by every change (never mutated)."""

    x: Grid
    w_query: Grid
    w_key: Grid
    w_value: Grid
    tokens: tuple[object, ...]
    w_out: Grid | None = None
    mask: Grid | None = None  # an explicit 0/1 matrix (a loaded case's)
    rounded: Grid | None = None  # the article's rounded softmax (the case's weights_override)

    @classmethod
    def of(cls, case: Case) -> Inputs:
        o = case.options
        return cls(
            case.x, case.w_query, case.w_key, case.w_value, case.tokens,
            w_out=o.w_out, mask=o.mask if isinstance(o.mask, tuple) else None, rounded=o.weights_override,
        )  # fmt: skip

    def cell(self, name: str, row: int, column: int) -> object:
        return getattr(self, name)[row][column]

    def with_cell(self, name: str, row: int, column: int, value: object) -> Inputs:
        grid = getattr(self, name)
        changed = (*grid[row][:column], value, *grid[row][column + 1 :])
        return replace(self, **{name: (*grid[:row], changed, *grid[row + 1 :])})


@dataclass
class Session:
    """One browser tab's state: the controls, the inputs as typed, and the last valid case, which every page shows."""

    controls: Controls
    inputs: Inputs
    case: Case
    error: CaseError | None = None  # why the inputs as typed are not a case; None: they are `case`
    step: int = 1  # the walkthrough's step, 1-based
    lang: str = "en"
    image_format: str = "png"  # what a chart's toolbar saves
    notices: list[Message] = field(default_factory=list)  # said once, at the top of the next page drawn
    generation: int = 0  # how often the matrices were replaced whole: an editor made before knows older grids
    next_step_at: float | None = None  # the player's clock (time.monotonic) while it plays
    derived: Derived = field(default_factory=Derived, repr=False, compare=False)  # see cache.py
    _numbers: Case | None = field(default=None, repr=False)  # the inputs' matrices, checked, with no options

    @classmethod
    def start(cls, lang: str = "en") -> Session:
        """A new session on the article's numbers."""
        article = presets.article()
        session = cls(Controls(), Inputs.of(article), article, lang=lang if lang in LANGUAGES else "en")
        session._check(numbers=True)
        return session

    # Loading whole cases

    def load(self, case: Case, keep_device: bool = False) -> None:
        """Put a whole case in: its matrices, sizes and options (the preset, seed and fill stay as chosen)."""
        o = case.options
        self.controls = replace(
            self.controls, n=case.n, d_in=case.d_in, d_k=case.d_k, d_v=case.d_v,
            use_rounded=o.weights_override is not None,
            scale=o.scale if isinstance(o.scale, str) else "custom",
            scale_value=1.0 if isinstance(o.scale, str) else o.scale,
            temperature=o.temperature, heads=o.heads, dtype=o.dtype,
            mask="custom" if isinstance(o.mask, tuple) else o.mask or "none",
            device=self.controls.device if keep_device else self._device_here(o.device),
        )  # fmt: skip
        self.inputs = Inputs.of(case)
        self.generation += 1
        self._check(numbers=True)

    def reset(self) -> None:
        """The chosen preset again, dropping edits (a preset has numbers, not a device: the chosen one stays)."""
        c = self.controls
        if c.preset == "article":
            self.load(presets.article(), keep_device=True)
        else:
            self.load(presets.random_case(c.n, c.d_in, c.d_k, c.d_v, seed=c.seed), keep_device=True)

    def open_link(self, params: Mapping[str, str | None]) -> None:
        """A shared link (?case=…&step=…&lang=…) restores its case, step and language; a bad part is refused with a
        notice, and the rest is kept."""
        if token := params.get("case"):
            try:
                self.load(files.case_from_link(token))
            except CaseError as e:
                self.notices.append(msg("notice.link_refused", error=e.message))
        if step := params.get("step"):
            if step in {str(i) for i in range(1, len(STEP_NAMES) + 1)}:
                self.step = int(step)
            else:
                self.notices.append(msg("notice.bad_step", steps=len(STEP_NAMES)))
        if language := params.get("lang"):
            if language in LANGUAGES:
                self.lang = language
            else:
                self.notices.append(msg("notice.bad_lang", languages=", ".join(LANGUAGES)))

    def import_file(self, name: str, data: bytes) -> None:
        """An uploaded case file; a bad one changes nothing and says why."""
        try:
            self.load(files.load_case(data))
            self.notices.append(msg("notice.opened", name=clip(name)))
        except CaseError as e:
            self.notices.append(msg("notice.not_opened", name=clip(name), error=e.message))

    # The sidebar's choices

    def choose(self, **changes: object) -> None:
        """New sidebar choices: a new preset (or seed of the random one) loads that preset, new sizes resize the
        matrices keeping their numbers, new options are checked alone. A value no widget can hold (a forged client
        sends anything) is refused with a notice, and the choice stays."""
        before = self.controls
        accepted = {}
        for name, value in changes.items():
            if getattr(before, name) == value:
                continue
            if self._allowed(name, value):
                accepted[name] = value
            else:
                self.notices.append(msg("notice.control_refused", name=name, value=excerpt(value)))
        if not accepted:
            return
        self.controls = replace(before, **accepted)
        if _preset_choice(self.controls) != _preset_choice(before):
            self.reset()
        elif any(name in SIZES for name in accepted):
            self._resize()
        else:
            self._check(numbers=False)

    def _allowed(self, name: str, value: object) -> bool:
        """Whether a widget of the sidebar could hold this value for that control."""
        low_high = {**{k: (1, v) for k, v in SIZES.items()}, "heads": (1, MAX_HEADS), "seed": (0, MAX_SEED)}
        if name in low_high:
            return type(value) is int and low_high[name][0] <= value <= low_high[name][1]
        ranges = {"scale_value": (MIN_SCALE, MAX_SCALE), "temperature": (MIN_TEMPERATURE, MAX_TEMPERATURE)}
        if name in ranges:
            number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            return number and ranges[name][0] <= value <= ranges[name][1]
        if name == "use_rounded":
            return isinstance(value, bool)
        if name == "device":
            return isinstance(value, str) and DEVICE_PATTERN.fullmatch(value) is not None
        choices = {"preset": presets.PRESETS, "fill": FILLS, "scale": SCALES, "dtype": DTYPES}
        choices["mask"] = MASKS if self.inputs.mask is not None else MASKS[:2]
        return name in choices and value in choices[name]

    def _resize(self) -> None:
        c, i = self.controls, self.inputs
        typed = {name: getattr(i, name) for name in NUMBERS} | {"tokens": i.tokens, "options": {"w_out": i.w_out}}
        grids = presets.resize_grids(typed, c.n, c.d_in, c.d_k, c.d_v, fill=c.fill, seed=c.seed)
        if c.n != len(i.x):  # the n×n matrices no longer fit
            self.controls = replace(c, use_rounded=False, mask="none" if c.mask == "custom" else c.mask)
            i = replace(i, rounded=None, mask=None)
        w_out = grids["options"]["w_out"]
        self.inputs = replace(
            i, **{name: _grid(grids[name]) for name in NUMBERS}, tokens=tuple(grids["tokens"]),
            w_out=None if w_out is None else _grid(w_out),
        )  # fmt: skip
        self.generation += 1
        self._check(numbers=True)

    def fall_back_to_cpu(self) -> None:
        """The chosen GPU failed: the CPU from now on, the numbers kept."""
        self.controls = replace(self.controls, device="cpu")
        self._check(numbers=False)

    # Edits

    def edit(self, name: str, row: int, column: int, value: object) -> None:
        """One cell of a matrix, as typed (then checked); a cell the matrix does not have is left alone."""
        grid = getattr(self.inputs, name)
        if grid is None or not (0 <= row < len(grid) and 0 <= column < len(grid[0])):
            return
        value = _typed(value)
        now = grid[row][column]
        if now is value or now == value:  # NaN is not equal to NaN, but is itself
            return
        self.inputs = self.inputs.with_cell(name, row, column, value)
        self._check(numbers=name in NUMBERS)

    def relabel(self, row: int, label: object) -> None:
        """A token label, as typed (then checked)."""
        tokens, label = self.inputs.tokens, _typed(label)
        if 0 <= row < len(tokens) and tokens[row] != label:
            self.inputs = replace(self.inputs, tokens=(*tokens[:row], label, *tokens[row + 1 :]))
            self._check(numbers=True)

    def use_w_out(self, on: bool) -> None:
        """Add the output projection w_out (d_v × d_v, the identity to start with), or remove it."""
        d_v = len(self.inputs.w_value[0])
        identity = tuple(tuple(float(i == j) for j in range(d_v)) for i in range(d_v))
        self.inputs = replace(self.inputs, w_out=identity if on else None)
        self._check(numbers=False)

    # View state

    def go_to(self, step: int) -> None:
        self.step = min(len(STEP_NAMES), max(1, step))

    def take_notices(self) -> list[Message]:
        notices, self.notices = self.notices, []
        return notices

    # Checking

    def _options(self) -> dict:
        c, i = self.controls, self.inputs
        return {
            "scale": c.scale_value if c.scale == "custom" else c.scale,
            "temperature": c.temperature,
            "mask": {"none": None, "custom": i.mask}.get(c.mask, c.mask),
            "heads": c.heads,
            "w_out": i.w_out,
            "weights_override": i.rounded if c.use_rounded else None,
            "dtype": c.dtype,
            "device": c.device,
        }

    def _check(self, numbers: bool) -> None:
        """Check the inputs as typed, the matrices too when they changed (150,000 numbers at the limits): a valid
        result becomes the case; an invalid one keeps the last valid case and says why."""
        try:
            if numbers or self._numbers is None:
                self._numbers = None
                i = self.inputs
                matrices = {name: getattr(i, name) for name in NUMBERS}
                self._numbers = parse_case({"format": CASE_FORMAT, **matrices, "tokens": i.tokens})
            case = with_options(self._numbers, **self._options())
        except CaseError as e:
            self.error = e
        else:
            self.case, self.error = case, None

    def _device_here(self, spec: str) -> str:
        """The device a case asks for, when it is here; else the CPU, with a notice."""
        try:
            return str(resolve_device(spec))
        except CaseError as e:
            self.notices.append(msg("notice.device_cpu", error=e.message))
            return "cpu"


def _preset_choice(c: Controls) -> tuple:
    """What the loaded numbers depend on: the preset, and the seed for the random one."""
    return (c.preset, c.seed) if c.preset == "random" else (c.preset,)


def _grid(rows: list) -> Grid:
    return tuple(tuple(row) for row in rows)


def _typed(value: object) -> object:
    """A cell's value as typed: a number, text or nothing; anything else a client sends (a list) as its text."""
    return value if value is None or isinstance(value, int | float | str) else str(value)
