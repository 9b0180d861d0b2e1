"""The session's plain values: the sidebar's choices (Controls) and the matrices as typed (Inputs), with the rules
for what a control may hold and what options they make together. Frozen: an operation replaces them whole."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from ..base import presets
from ..base.case import (
    DEVICE_PATTERN,
    DTYPES,
    MAX_D,
    MAX_HEADS,
    MAX_N,
    MAX_SCALE,
    MAX_SINK,
    MAX_SOFTCAP,
    MAX_TEMPERATURE,
    MAX_WIDE_D,
    MIN_SCALE,
    MIN_TEMPERATURE,
    Case,
    NormRest,
    rotary_dims,
)

Grid = tuple[tuple[object, ...], ...]  # rows of cells as typed: numbers, or whatever a client sent
NUMBERS = ("x", "w_query", "w_key", "w_value")  # the case's own matrices; the other grids are options
GRIDS = (*NUMBERS, "x_kv", "w_out", "mask", "rounded", "relative_bias", "w_latent", "latent_norm")  # cell by cell
LATENT = ("w_latent", "w_key", "w_value", "latent_norm")  # multi-head latent attention's: an edit makes them one's own
RELATIVE = ("relative_bias", "relative_max_distance", "relative_bidirectional")  # T5's: a loaded case's own
SIZES = {"n": MAX_N, "d_in": MAX_D, "d_k": MAX_D, "d_v": MAX_D}
SCALES = ("none", "sqrt_dk", "custom")
MASKS = ("none", "causal", "custom")
CROSS_MASKS = ("none", "custom")  # cross-attention's: no causal mask across two sentences (the case refuses one)
FILLS = ("zeros", "random")
IMAGE_FORMATS = ("png", "svg")
ROPE_FRACTIONS = (1.0, 0.5, 0.25)  # partial rotary: Phi-2 turns 0.4 of a head, GPT-NeoX and Pythia 0.25
ROPE_BASE = 10000.0  # RoPE's base when a person turns it on (the paper's); a model's or a file's own base is kept
PRESETS = ("article", "random", "real")  # the sidebar's presets, each the kind of origin it makes (origins.PRESETS)
MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class Controls:
    """The sidebar's choices, each held by a widget of the same name."""

    preset: str = "article"  # PRESETS: which kind of origin the sidebar makes
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
    # today's models' attention (the Variants page; each off by default, the article's plain attention)
    window: int = 0  # a sliding window of this many keys; 0: none
    softcap: float = 0.0  # Gemma 2's cap on the scores; 0: none
    alibi: bool = False  # ALiBi's linear bias, with the paper's slopes (or a loaded case's own)
    relative: bool = False  # T5's relative bias, with relative_table's numbers (or a loaded case's own)
    sinks: bool = False  # gpt-oss's sink logits, each head's `sink` (or a loaded case's own)
    sink: float = 0.0
    rope: bool = False  # RoPE (off: NoPE, as SmolLM3's and Llama 4's every fourth layer)
    rope_fraction: float = 1.0  # partial rotary: the share of each head RoPE turns
    latent: int = 0  # multi-head latent attention's d_c: the numbers a token's cache keeps (latent.py); 0: none
    n_kv: int = 0  # cross-attention: x_kv's rows, the sentence keys and values come from (cross.py); 0: x's own

    @classmethod
    def of(cls, case: Case, keep: Controls) -> Controls:
        """The controls that show a case: its sizes and options (the preset, seed, fill and device of `keep`)."""
        o = case.options
        return replace(
            keep, n=case.n, d_in=case.d_in, d_k=case.d_k, d_v=case.d_v, use_rounded=o.weights_override is not None,
            scale=o.scale if isinstance(o.scale, str) else "custom",
            scale_value=1.0 if isinstance(o.scale, str) else o.scale, temperature=o.temperature, heads=o.heads,
            dtype=o.dtype, mask="custom" if isinstance(o.mask, tuple) else o.mask or "none", window=o.window or 0,
            softcap=o.softcap or 0.0, alibi=o.alibi is not None, relative=o.relative_bias is not None,
            sinks=o.sinks is not None,
            sink=o.sinks[0] if o.sinks else keep.sink, rope=o.rope_base is not None,
            rope_fraction=o.rope_fraction or 1.0, latent=case.d_c if o.w_latent is not None else 0,
            n_kv=case.n_kv if case.cross else 0,
        )  # fmt: skip

    @property
    def preset_choice(self) -> tuple:
        """What the loaded numbers depend on: the preset, and the seed for the random one."""
        return (self.preset, self.seed) if self.preset == "random" else (self.preset,)


CONTROLS = tuple(f.name for f in fields(Controls))
# a control's sidebar.* label, where it is not its name: a message names the widget a person sees, not its key
LABELS = {"use_rounded": "rounded"} | {name: f"size_{name}" for name in SIZES}


def allowed(name: str, value: object) -> bool:
    """Whether a widget of the sidebar could hold this value for that control (a forged client sends anything)."""
    whole = {**{k: (1, v) for k, v in SIZES.items()}, "heads": (1, MAX_HEADS), "seed": (0, MAX_SEED)}
    whole |= {"latent": (0, MAX_WIDE_D), "n_kv": (0, MAX_N)}  # a latent width latent.py cannot make: said there
    if name in whole:
        return type(value) is int and whole[name][0] <= value <= whole[name][1]
    if name == "window":
        return type(value) is int and 0 <= value <= MAX_N
    ranges = {"scale_value": (MIN_SCALE, MAX_SCALE), "temperature": (MIN_TEMPERATURE, MAX_TEMPERATURE)}
    # a cap under MIN_SOFTCAP, or a fraction that turns an odd number of dims, is the case's to refuse, saying why
    ranges |= {"softcap": (0.0, MAX_SOFTCAP), "sink": (-MAX_SINK, MAX_SINK), "rope_fraction": (0.01, 1.0)}
    if name in ranges:
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return number and ranges[name][0] <= value <= ranges[name][1]
    if name in ("use_rounded", "alibi", "relative", "sinks", "rope"):
        return isinstance(value, bool)
    if name == "device":
        return isinstance(value, str) and DEVICE_PATTERN.fullmatch(value) is not None
    choices = {"preset": PRESETS, "fill": FILLS, "scale": SCALES, "dtype": DTYPES}
    choices["mask"] = MASKS  # custom: the inputs' own matrix (a loaded case's, or the causal one to edit)
    return name in choices and value in choices[name]


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
    # A real model's attention (attention/models/), which no widget sets: kept as a loaded case (a file, a link) had
    # them, else a check of the inputs would drop them: RoPE's base, positions, frequencies; grouped heads; q/k norms
    rope_base: float | None = None
    positions: tuple[int, ...] | None = None
    rope_frequencies: tuple[float, ...] | None = None
    kv_heads: int | None = None
    q_norm: tuple[float, ...] | None = None
    k_norm: tuple[float, ...] | None = None
    norm_eps: float = 1e-6
    norm_width: bool = False  # OLMo 2's q/k norm over every head's dims, not each head's
    norm_rest: NormRest | None = None  # and a head cut from its layer: the other heads' share of each token's norm
    bias: bool = False  # x's last column brings in the weights' biases (a model's): its label says so
    # a loaded case's own ALiBi slopes and sink logits, one per head (a control turns each on or off)
    alibi: tuple[float, ...] | None = None
    sinks: tuple[float, ...] | None = None
    relative_bias: Grid | None = None  # and T5's table (heads × buckets), with its max distance and directions
    relative_max_distance: int | None = None
    relative_bidirectional: bool = True
    # cross-attention's source sentence and its labels (None: self-attention), and those set aside while it is off
    x_kv: Grid | None = None
    tokens_kv: tuple[object, ...] | None = None
    set_aside: tuple[Grid, tuple[object, ...]] | None = None
    # multi-head latent attention: W_DKV (w_key and w_value are then W_UK and W_UV, d_c rows), its norm's γ as one
    # row, and the w_key and w_value it was made from (the person's own: back when it is turned off, if unedited)
    w_latent: Grid | None = None
    latent_norm: Grid | None = None
    plain: tuple[Grid, Grid] | None = None

    @classmethod
    def of(cls, case: Case) -> Inputs:
        o = case.options
        return cls(
            case.x, case.w_query, case.w_key, case.w_value, case.tokens,
            w_out=o.w_out, mask=o.mask if isinstance(o.mask, tuple) else None, rounded=o.weights_override,
            rope_base=o.rope_base, positions=o.positions, rope_frequencies=o.rope_frequencies, kv_heads=o.kv_heads,
            bias=o.bias, q_norm=o.q_norm, k_norm=o.k_norm, norm_eps=o.norm_eps, alibi=o.alibi, sinks=o.sinks,
            relative_bias=o.relative_bias, norm_width=o.norm_width, norm_rest=o.norm_rest,
            relative_max_distance=o.relative_max_distance if o.relative_bias is not None else None,
            relative_bidirectional=o.relative_bidirectional, w_latent=o.w_latent,
            latent_norm=None if o.latent_norm is None else (o.latent_norm,), x_kv=case.x_kv, tokens_kv=case.tokens_kv,
        )  # fmt: skip

    def with_cells(self, name: str, cells: dict[tuple[int, int], object]) -> Inputs:
        """The inputs with these cells of a grid changed (self when none changes: a cell it does not have, or the
        same value); only the changed rows are copied (x has 65,536 cells at the limits, and edits come each run)."""
        grid, changes = getattr(self, name), {}
        for (row, column), value in cells.items():
            if isinstance(row, int) and isinstance(column, int) and 0 <= row < len(grid) and 0 <= column < len(grid[0]):
                now = grid[row][column]
                if not (now is value or now == value):  # NaN is not equal to NaN, but is itself
                    changes.setdefault(row, {})[column] = value
        if not changes:
            return self
        rows = list(grid)
        for row, columns in changes.items():
            rows[row] = tuple(columns.get(j, v) for j, v in enumerate(rows[row]))
        return replace(self, **{name: tuple(rows)}, **({"plain": None} if name in LATENT else {}))

    def resized(self, c: Controls) -> Inputs:
        """The inputs at the controls' sizes: numbers that still fit kept, new cells zeros or seeded random numbers;
        the n × n_kv matrices (the rounded weights, an explicit mask) dropped when n changes; x_kv follows d_in."""
        typed = {name: getattr(self, name) for name in (*NUMBERS, "tokens", "x_kv", "tokens_kv")}
        typed["options"] = {"w_out": self.w_out, "w_latent": self.w_latent}  # W_DKV follows d_in, W_UK its rows
        grids = presets.resize_grids(typed, c.n, c.d_in, c.d_k, c.d_v, c.fill, c.seed)
        w_out, w_latent = grids["options"]["w_out"], grids["options"]["w_latent"]
        kept = {} if c.n != len(self.x) else {"rounded": self.rounded, "mask": self.mask, "positions": self.positions}
        kept |= {"rope_base": self.rope_base, "kv_heads": self.kv_heads, "bias": self.bias and c.d_in == len(self.x[0])}
        kept |= {name: getattr(self, name) for name in ("norm_eps", "norm_width", "alibi", "sinks", *RELATIVE)}
        if c.d_k == len(self.w_query[0]):  # a pair's frequency, a dim's norm weight each: the same head widths
            kept |= {name: getattr(self, name) for name in ("rope_frequencies", "q_norm", "k_norm", "norm_rest")}
        same = (c.d_in, c.d_k, c.d_v) == (len(self.x[0]), len(self.w_query[0]), len(self.w_value[0]))
        kept |= {"latent_norm": self.latent_norm, "plain": self.plain if same else None}  # plain: as wide as they were
        kept |= {"set_aside": self.set_aside, "tokens_kv": None if self.x_kv is None else tuple(grids["tokens_kv"])}
        matrices = {name: _grid(grids[name]) for name in NUMBERS} | {"tokens": tuple(grids["tokens"])}
        grids = {"w_out": w_out, "w_latent": w_latent, "x_kv": grids["x_kv"]}
        return Inputs(**matrices, **{k: None if v is None else _grid(v) for k, v in grids.items()}, **kept)


def options(c: Controls, i: Inputs) -> dict:
    """The case's options the controls and the inputs describe (perhaps invalid: a case checks them)."""
    rope = c.rope  # off: NoPE, the case's positions and scaled frequencies set aside with its base
    pairs = rotary_dims(c.d_k // c.heads, c.rope_fraction) // 2 if c.heads and c.d_k % c.heads == 0 else 0
    frequencies = i.rope_frequencies if rope and len(i.rope_frequencies or ()) == pairs else None  # one per pair
    return {
        "scale": c.scale_value if c.scale == "custom" else c.scale,
        "temperature": c.temperature,
        "mask": {"none": None, "custom": i.mask}.get(c.mask, c.mask),
        "heads": c.heads,
        "w_out": i.w_out,
        # rounded weights n × n_kv (the article's are n × n: not for cross-attention's other keys, unless as many)
        "weights_override": i.rounded if c.use_rounded and i.rounded and len(i.rounded[0]) == (c.n_kv or c.n) else None,
        "dtype": c.dtype,
        "device": c.device,
        "rope_base": (i.rope_base or ROPE_BASE) if rope else None,
        "positions": i.positions if rope else None,
        "rope_frequencies": frequencies,
        "kv_heads": i.kv_heads,
        "bias": i.bias,
        "q_norm": i.q_norm,
        "k_norm": i.k_norm,
        "norm_eps": i.norm_eps,
        "norm_width": i.norm_width,
        "norm_rest": i.norm_rest if i.norm_rest and i.norm_rest.fits(c.n, c.n_kv or c.n) else None,
        "w_latent": i.w_latent,  # made by latent.py as the controls' latent width asks
        "latent_norm": i.latent_norm and i.latent_norm[0],
        "window": c.window or None,
        "softcap": c.softcap or None,
        "alibi": per_head(i.alibi, c.heads, alibi_slopes(c.heads)) if c.alibi else None,
        "sinks": per_head(i.sinks, c.heads, (c.sink,) * c.heads) if c.sinks else None,
        "rope_fraction": c.rope_fraction if rope and c.rope_fraction != 1 else None,
        **(
            {
                "relative_bias": i.relative_bias,
                "relative_max_distance": i.relative_max_distance or presets.RELATIVE_MAX_DISTANCE,
                "relative_bidirectional": i.relative_bidirectional,
            }
            if c.relative
            else {}
        ),  # to_edit's table
    }


def to_edit(c: Controls, i: Inputs) -> Inputs:
    """The inputs with the grids the controls ask a person to edit, where they lack them: a custom mask (from the
    causal one; cross-attention's from every key), T5's table while its switch is on (a row per head: a loaded
    case's own, or relative_table's)."""
    if c.mask == "custom" and i.mask is None:
        i = replace(i, mask=causal(c.n, c.n_kv))
    if c.relative and (i.relative_bias is None or len(i.relative_bias) != c.heads):
        table = presets.relative_table(c.heads)
        i = replace(i, relative_bias=table, relative_max_distance=None, relative_bidirectional=True)
    return i


def alibi_slopes(heads: int) -> tuple[float, ...]:
    """ALiBi's slopes as its paper sets them: a geometric sequence from 2^(−8/h), head k's 2^(−8k/h) (for a head
    count that is no power of two, the paper's interleaving: BLOOM's build_alibi_tensor)."""
    closest = 2 ** math.floor(math.log2(heads))
    slopes = [2 ** (-8 * k / closest) for k in range(1, closest + 1)]
    extra = [2 ** (-4 * k / closest) for k in range(1, 2 * (heads - closest), 2)]  # the odd powers of the next one
    return tuple(slopes + extra)


def per_head(given: tuple[float, ...] | None, heads: int, otherwise: tuple[float, ...]) -> tuple[float, ...]:
    """A loaded case's own numbers per head while the heads are as many, else the controls' own."""
    return given if given is not None and len(given) == heads else otherwise


def causal(n: int, n_kv: int = 0) -> Grid:
    """The causal mask as a 0/1 matrix (1: query i may attend to key j ≤ i), where a custom mask starts; its cells
    share two floats (a million of them at n = 1024 would be 24 MB of their own). Cross-attention's (n_kv keys of
    another sentence, which no query's place orders): every key, n × n_kv ones."""
    one, zero = 1.0, 0.0
    return tuple(tuple(one if j <= i or n_kv else zero for j in range(n_kv or n)) for i in range(n))


def identity(d: int) -> Grid:
    """The d × d identity: where w_out starts, changing nothing."""
    return tuple(tuple(float(i == j) for j in range(d)) for i in range(d))


def _grid(rows: list) -> Grid:
    return tuple(tuple(row) for row in rows)
