"""The case: every input of one attention computation, its limits, and its validation (JSON in, one error type out)."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from functools import partial

from .i18n import Message, excerpt, msg

CASE_FORMAT = "attention-case/2"  # /2 added cross-attention's x_kv and tokens_kv
FORMATS = ("attention-case/1", CASE_FORMAT)  # what a case file may say it is: every earlier one still reads

Matrix = tuple[tuple[float, ...], ...]

# Limits, chosen from measurements (docs/options.md, "Limits"): at the maximum sizes the step-6 broadcast tensor
# (n, n, d_v) is 256 MiB in float32, and a trace takes well under a second on two CPU cores.
MAX_N = 1024  # tokens
MAX_D = 64  # d_in, d_k, d_v and d_out
# A real model's head (attention/models/) reads the model's whole width: while n is at most MAX_WIDE_N (a sentence),
# x may have up to MAX_WIDE_D columns (a 2,048-wide model and its bias column), and each matrix up to MAX_WIDE_CELLS
# numbers (a 576-wide model's 576 × 576 with a bias row), which keeps a case within 1.4 million numbers
MAX_WIDE_D, MAX_WIDE_N, MAX_WIDE_CELLS = 2049, 64, 577 * 576
MIN_ROPE_BASE, MAX_ROPE_BASE = 2.0, 1e7  # RoPE's base: 10,000 in the paper, 100,000 in some small Llama-style models
MAX_POSITION = 1 << 20  # |a token's position| for RoPE: its angle stays exact enough in float64
MAX_HEADS = 64
MAX_HEAD_CELLS = 1 << 24  # heads × n² in float32 (half in float64): each n × n score and weight tensor, 64 MiB
MAX_ABS = 1e6  # |every input number|: keeps every product finite in float32 (see check_bounds_keep_float32_finite)
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0
MIN_SCALE, MAX_SCALE = 0.001, 100.0
MIN_SOFTCAP, MAX_SOFTCAP = 0.1, 1000.0  # Gemma 2 caps attention scores at 50 (and its final logits at 30)
MAX_SLOPE = 100.0  # |an ALiBi slope|: the paper's are 2^(−8k/h), at most 1/2
MAX_SINK = 100.0  # |a sink logit|: gpt-oss's learned ones lie within a few units of 0
MAX_BUCKETS, MAX_BUCKET_BIAS = 256, 1000.0  # T5's relative bias: 32 buckets a head; |a bias| (T5's: within ±50)
MAX_TOKEN_CHARS = 40
DTYPES = ("float32", "float64")
DEVICE_PATTERN = re.compile(r"cpu|cuda|cuda:\d{1,2}|mps|auto")


# The options of today's models: plain attention when each is None
MODERN = ("window", "softcap", "alibi", "sinks", "rope_fraction", "relative_bias", "w_latent")


class CaseError(ValueError):
    """Bad input: `where` names the place (matrix, row, column or option), `problem` says what is wrong.

    Both read as English (the CLI, str(e)); when they are catalogue Messages, `message` renders in any language.
    """

    def __init__(self, where: str | Callable[[], str], problem: str):
        where = where() if callable(where) else where  # a matrix cell's place is only written when it is wrong
        self.message = msg("error.where_problem", where=where, problem=problem)
        super().__init__(str(self.message))
        self.where, self.problem = where, problem


@dataclass(frozen=True)
class NormRest:
    """The layer's other heads' share of OLMo 2's norm over the width, for a case that holds only some of its heads:
    a token's root mean square is √((Σ its own q² + rest) / width + ε), so one head's case is exact and small."""

    q: tuple[float, ...]  # (n,): each token's sum of squares of its query numbers in the other heads, before the norm
    k: tuple[float, ...]  # (n_kv,): each key token's sum of squares of its key numbers in the other key/value heads
    q_width: int  # D_Q: the layer's whole query width (every head's dims), what the queries' mean divides by
    k_width: int  # D_K: the layer's whole key width (every key/value head's dims)

    def as_dict(self) -> dict:
        return {"q": list(self.q), "k": list(self.k), "q_width": self.q_width, "k_width": self.k_width}

    def fits(self, n: int, n_kv: int) -> bool:
        """Still the share of these tokens: a number per query and key token. A token more or fewer (the sidebar's
        n or n_kv) and it no longer says what those tokens' other heads add: the app drops it then (the norm runs
        over the heads the case holds, docs/options.md), as it drops RoPE's positions."""
        return len(self.q) == n and len(self.k) == n_kv


@dataclass(frozen=True)
class Options:
    """How steps 4-8 run. The defaults are the article's: unscaled scores, exact softmax, one head, no mask."""

    scale: str | float = "none"  # "none" (the article), "sqrt_dk" (textbook: × 1/√(d_k per head)), or a multiplier
    temperature: float = 1.0  # scores are divided by it before the softmax: < 1 sharpens, > 1 flattens
    mask: str | Matrix | None = None  # None, "causal", or n×n of 0/1 (1 = the query may attend to the key)
    heads: int = 1  # h; head i takes the i-th block of columns of Q, K and V, as nn.MultiheadAttention does
    w_out: Matrix | None = None  # (d_v, d_out), applied to the concatenated heads
    weights_override: Matrix | None = None  # n×n used as step 5's result, as given (the article's rounded softmax)
    dtype: str = "float32"  # "float32" or "float64"
    device: str = "cpu"  # "cpu", "cuda", "cuda:N", "mps" or "auto"
    rope_base: float | None = None  # rotary position embedding (RoPE) of queries and keys with this base; None: none
    positions: tuple[int, ...] | None = None  # each token's position for RoPE; None: 0, 1, …, n − 1
    # RoPE's frequency θ_p of each pair of a head's dims (d_head / 2 of them), as a model with scaled RoPE (Llama 3's,
    # linear, YaRN) has them; None: the paper's θ_p = base^(−2p/d_head)
    rope_frequencies: tuple[float, ...] | None = None
    kv_heads: int | None = None  # grouped-query attention: this many key/value heads, each shared by heads / kv_heads
    # query heads (query head i uses key/value head i // (heads / kv_heads)); None: one per query head
    bias: bool = False  # x's last feature is a column of ones that brings in the weights' last row: their biases
    # Qwen3's q/k norm: each head's query (key) RMS-normed and scaled by these d_head weights γ before RoPE; None: none
    q_norm: tuple[float, ...] | None = None
    k_norm: tuple[float, ...] | None = None
    norm_eps: float = 1e-6  # the norm's ε: x / √(mean(x²) + ε)
    # OLMo 2's q/k norm over the width: a token's whole query (key) projection, every head's dims at once, RMS-normed
    # before the split into heads; q_norm then has d_k numbers and k_norm w_key's width. False: Qwen3's, per head
    norm_width: bool = False
    # OLMo 2's head cut from its layer: what the layer's other heads add to each token's mean (with norm_width); None:
    # the case holds every head the norm runs over
    norm_rest: NormRest | None = None
    # The attention of the models people run today (the Variants page); None: the plain attention of the article.
    # Token i's place is its index i here (RoPE's positions are RoPE's alone).
    window: int | None = None  # sliding window (Mistral, Gemma 2/3, gpt-oss): query i sees keys i − window < j ≤ i
    softcap: float | None = None  # Gemma 2's cap: scores S → cap · tanh(S / cap), after the scale and any bias
    alibi: tuple[float, ...] | None = None  # ALiBi (BLOOM, MPT): head h's slope m_h, scores − m_h · (i − j)
    sinks: tuple[float, ...] | None = None  # gpt-oss: head h's sink logit s_h; e^s_h joins each softmax's denominator
    rope_fraction: float | None = None  # partial rotary (GPT-NeoX, Phi): RoPE turns each head's first
    # rope_fraction · d_head dims (pairs with θ_p = base^(−2p/d_rot)) and leaves the rest; None: all of them
    # T5's relative position bias: head h's learned bias b_h[k] for each bucket k of the distance j − i, added to the
    # scores (heads × buckets); the buckets' own distances up to half of them, then logarithmic up to
    # relative_max_distance (T5's: 32 buckets, 128); bidirectional (T5's encoder): keys ahead take the second half of
    # the buckets, else (its decoder) a key ahead falls in bucket 0 (a causal mask hides it)
    relative_bias: Matrix | None = None
    relative_max_distance: int = 128
    relative_bidirectional: bool = True
    # DeepSeek's multi-head latent attention (MLA): keys and values are made from a latent c = x W_DKV (d_in, d_c),
    # d_c numbers a token, which is all the KV cache keeps; w_key and w_value (W_UK, W_UV) then have d_c rows. Its
    # decoupled rotary key is latent columns that W_UK copies into every head's first dims (partial rotary turns
    # them). latent_norm: DeepSeek's RMSNorm of the latent's first len(γ) columns (the rotary key's pass), ε norm_eps
    w_latent: Matrix | None = None
    latent_norm: tuple[float, ...] | None = None

    @property
    def biased(self) -> bool:
        """Step 4 adds a term for where each key is from its query: ALiBi's or T5's."""
        return self.alibi is not None or self.relative_bias is not None


@dataclass(frozen=True)
class Case:
    """The inputs of steps 1-2 and the options: plain, hashable values, validated by parse_case."""

    x: Matrix  # (n, d_in), one row per token
    w_query: Matrix  # (d_in, d_k)
    w_key: Matrix  # (d_in, d_k)
    w_value: Matrix  # (d_in, d_v)
    tokens: tuple[str, ...]  # n labels
    options: Options = field(default_factory=Options)
    # cross-attention (an encoder-decoder's): the keys and values are made from another sentence's rows (n_kv, d_in)
    # with their own labels; None: self-attention, keys and values from x
    x_kv: Matrix | None = None
    tokens_kv: tuple[str, ...] | None = None

    def __hash__(self) -> int:
        """Hashed once: a case at the limits holds 150,000 numbers (2 ms a hash), and it keys a session's cache."""
        if "_hash" not in self.__dict__:
            self.__dict__["_hash"] = hash(tuple(getattr(self, f.name) for f in fields(self)))
        return self.__dict__["_hash"]

    def __getstate__(self) -> dict:  # a copy or pickle hashes again: str hashes differ between processes
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_tensors")}

    def keep_tensors(self, tensors: dict) -> Case:
        """The matrices as the float32 tensors they were read from (a real model's case): a run takes them instead
        of making 40,000 numbers into a tensor again (4 ms, a quarter of a small encoder's forward pass). Exactly the
        case's numbers: these were made from them with tolist(). A copy or a changed case does without."""
        self.__dict__["_tensors"] = tensors
        return self

    def with_checked_options(self, options: Options) -> Case:
        """The same numbers (and the tensors they were read from) under other options, already checked."""
        case = replace(self, options=options)
        return case.keep_tensors(self.__dict__["_tensors"]) if "_tensors" in self.__dict__ else case

    @property
    def n(self) -> int:
        return len(self.x)

    @property
    def cross(self) -> bool:
        """Cross-attention: queries from x, keys and values from x_kv."""
        return self.x_kv is not None

    @property
    def n_kv(self) -> int:
        """The keys' (and values') count: x_kv's rows, or x's."""
        return len(self.x_kv) if self.x_kv is not None else len(self.x)

    @property
    def key_tokens(self) -> tuple[str, ...]:
        """The keys' labels: x_kv's own, or x's."""
        return self.tokens_kv if self.tokens_kv is not None else self.tokens

    @property
    def d_in(self) -> int:
        return len(self.x[0])

    @property
    def d_k(self) -> int:
        """The queries' width (the keys' too, unless grouped-query attention shares fewer key heads)."""
        return len(self.w_query[0])

    @property
    def d_v(self) -> int:
        return len(self.w_value[0])

    @property
    def d_c(self) -> int:
        """What keys and values are made from: x's d_in features, or multi-head latent attention's d_c numbers."""
        return len(self.w_key)

    @property
    def d_head(self) -> int:
        """A query (and key) head's width: d_k split over the heads."""
        return self.d_k // self.options.heads

    @property
    def d_rot(self) -> int:
        """How many of a head's dims RoPE turns: all, or partial rotary's first fraction of them."""
        return rotary_dims(self.d_head, self.options.rope_fraction)


def rotary_dims(d_head: int, fraction: float | None) -> int:
    """Partial rotary's turned dims, as transformers counts them: int(d_head · fraction) (all of them for None)."""
    return d_head if fraction is None else int(d_head * fraction)


def default_tokens(n: int, word: str = "Input") -> tuple[str, ...]:
    """Labels for unlabelled rows: "Input 1", … (cross-attention's keys: "Source 1", …)."""
    return tuple(f"{word} {i + 1}" for i in range(n))


def parse_case(obj: object) -> Case:
    """Validate a case given as plain JSON values; raise CaseError naming the first bad place."""
    if not isinstance(obj, dict):
        raise CaseError(msg("where.case"), msg("error.not_object", kind=_kind(obj)))
    known = {"format", "tokens", "x", "w_query", "w_key", "w_value", "options", "x_kv", "tokens_kv"}
    for key in obj:
        if key not in known:
            raise CaseError(
                msg("where.case"), msg("error.unknown_key", key=excerpt(key), expected=", ".join(sorted(known)))
            )
    if obj.get("format") not in FORMATS:
        problem = msg("error.format", expected=" or ".join(map(repr, FORMATS)), value=excerpt(obj.get("format")))
        raise CaseError(msg("where.format"), problem)
    for name in ("x", "w_query", "w_key", "w_value"):
        if name not in obj:
            raise CaseError(name, msg("error.missing"))
    x_rows = obj["x"]
    tokens = (
        _tokens(obj.get("tokens"), len(x_rows))
        if isinstance(x_rows, list | tuple) and 0 < len(x_rows) <= MAX_N
        else None
    )
    n = len(x_rows) if isinstance(x_rows, list | tuple) else MAX_N
    x = _matrix(x_rows, "x", rows=(1, MAX_N), cols=(1, max_d(n, n)), tokens=tokens)
    n, d_in = len(x), len(x[0])
    w_query = _matrix(obj["w_query"], "w_query", rows=(d_in, d_in), cols=(1, max_d(n, d_in)))
    # keys and values read x (d_in rows), or multi-head latent attention's latent: any rows, its width checked
    # against W_DKV's with the options (max_d: a real model's latent within a case's numbers)
    latent = isinstance(obj.get("options"), dict) and obj["options"].get("w_latent") is not None
    rows = (1, MAX_WIDE_D) if latent else (d_in, d_in)
    given = len(obj["w_key"]) if latent and isinstance(obj["w_key"], list | tuple) else d_in
    w_key = _matrix(obj["w_key"], "w_key", rows=rows, cols=(1, max_d(n, given)))  # its width: with kv_heads
    d_c = len(w_key)
    w_value = _matrix(obj["w_value"], "w_value", rows=(d_c, d_c), cols=(1, max_d(n, d_c)))
    widths = Widths(len(w_query[0]), len(w_key[0]), len(w_value[0]), d_in, d_c)
    x_kv, tokens_kv = _keys_sentence(obj, n, d_in)
    n_kv = len(x_kv) if x_kv is not None else n
    options = _options(obj.get("options", {}), n, widths, tokens, n_kv if x_kv is not None else None)
    return Case(x, w_query, w_key, w_value, tokens, options, x_kv, tokens_kv)


def _keys_sentence(obj: dict, n: int, d_in: int) -> tuple[Matrix | None, tuple[str, ...] | None]:
    """Cross-attention's x_kv (as wide as x: both are the model's width) and its labels, or neither."""
    if obj.get("x_kv") is None:
        if obj.get("tokens_kv") is not None:
            raise CaseError(msg("where.tokens_kv"), msg("error.tokens_kv_alone"))
        return None, None
    if obj.get("format") == FORMATS[0]:
        raise CaseError(msg("where.format"), msg("error.cross_format", format=CASE_FORMAT))
    rows = obj["x_kv"]
    n_kv = len(rows) if isinstance(rows, list | tuple) and 0 < len(rows) <= MAX_N else None
    tokens = None if n_kv is None else _tokens(obj.get("tokens_kv"), n_kv, "tokens_kv")
    x_kv = _matrix(rows, "x_kv", rows=(1, MAX_N), cols=(d_in, d_in), tokens=tokens)
    return x_kv, tokens


def max_d(n: int, rows: int) -> int:
    """The most columns a matrix of `rows` rows may have for n tokens: for a sentence, a real model's width within
    MAX_WIDE_CELLS numbers; else MAX_D."""
    return max(MAX_D, min(MAX_WIDE_D, MAX_WIDE_CELLS // max(rows, 1))) if n <= MAX_WIDE_N else MAX_D


@dataclass(frozen=True)
class Widths:
    """The matrices' widths that options are checked against."""

    d_k: int  # w_query's columns
    d_key: int  # w_key's: d_k, or fewer with grouped-query attention
    d_v: int  # w_value's
    d_in: int = 0  # x's features (0: not checked, the head counts alone)
    d_c: int = 0  # w_key's and w_value's rows: d_in, or multi-head latent attention's latent width

    @classmethod
    def of(cls, case: Case) -> Widths:
        return cls(case.d_k, len(case.w_key[0]), case.d_v, case.d_in, case.d_c)


def with_options(case: Case, **changes) -> Case:
    """The same (valid) numbers with some options changed, None resetting one to its default: only the options are
    validated again (the variants page makes five of these per edit; at n = 1024 the numbers are 150,000)."""
    options = {f.name: getattr(case.options, f.name) for f in fields(Options)} | changes
    options = {k: _lists(v) for k, v in options.items() if v is not None}
    n_kv = case.n_kv if case.cross else None
    return case.with_checked_options(_options(options, case.n, Widths.of(case), case.tokens, n_kv))


def case_to_dict(case: Case) -> dict:
    """The case file: plain JSON values, with options that differ from the defaults."""
    options = {f.name: getattr(case.options, f.name) for f in fields(Options)}
    defaults = Options()
    keys = {"x_kv": _lists(case.x_kv), "tokens_kv": list(case.tokens_kv)} if case.cross else {}
    return {
        "format": CASE_FORMAT,
        "tokens": list(case.tokens),
        "x": _lists(case.x),
        **keys,
        "w_query": _lists(case.w_query),
        "w_key": _lists(case.w_key),
        "w_value": _lists(case.w_value),
        "options": {k: _lists(v) for k, v in options.items() if v != getattr(defaults, k)},
    }


def _lists(value):
    if isinstance(value, NormRest):
        return value.as_dict()
    if not isinstance(value, tuple):
        return value
    return [list(row) if isinstance(row, tuple) else row for row in value]  # a matrix, or positions


def _kind(value: object) -> str:
    kinds = {dict: "object", list: "list", str: "text", bool: "bool", type(None): "null"}
    kinds |= {int: "number", float: "number"}
    return msg(f"kind.{kinds[type(value)]}") if type(value) in kinds else type(value).__name__


def _number(value: object, where: str | Callable[[], str], bound: float = MAX_ABS) -> float:
    """One finite number within ±bound, checked in float64 before any tensor sees it."""
    if value is None or value == "":
        raise CaseError(where, msg("error.empty"))
    if isinstance(value, bool) or not isinstance(value, int | float):
        typed = value if isinstance(value, str) else excerpt(value)  # quoted as text: True is 'True'
        raise CaseError(where, msg("error.not_a_number", value=excerpt(typed)))
    try:
        number = float(value)
    except OverflowError:  # a huge JSON integer
        raise CaseError(where, msg("error.too_large", bound=bound)) from None
    if math.isnan(number):
        raise CaseError(where, msg("error.nan"))
    if math.isinf(number):
        raise CaseError(where, msg("error.infinite", sign="-" if number < 0 else ""))
    if abs(number) > bound:
        raise CaseError(where, msg("error.over_limit", number=number, bound=bound))
    return number


def _matrix(
    value: object,
    name: str,
    rows: tuple[int, int],
    cols: tuple[int, int],
    tokens: tuple[str, ...] | None = None,
    cell=_number,
) -> Matrix:
    """A list of equal-length rows of numbers, its size within [low, high] on both axes."""
    if not isinstance(value, list | tuple) or not value:
        raise CaseError(name, msg("error.not_rows", kind=_kind(value)))
    if not rows[0] <= len(value) <= rows[1]:
        raise CaseError(name, msg("error.row_count", count=len(value), expected=_range(rows, "rows")))
    out = []
    for i, row in enumerate(value):
        where = (
            msg("where.row_token", name=name, row=i + 1, token=tokens[i])
            if tokens
            else msg("where.row", name=name, row=i + 1)
        )  # one Message a row; a cell's is made only when the cell is wrong (a million cells per edit at n = 1024)
        if not isinstance(row, list | tuple):
            raise CaseError(where, msg("error.not_numbers", kind=_kind(row)))
        width = len(value[0])
        if i == 0 and not cols[0] <= width <= cols[1]:
            raise CaseError(name, msg("error.column_count", count=width, expected=_range(cols, "columns")))
        if len(row) != width:
            raise CaseError(where, msg("error.row_width", count=len(row), width=width))
        fast = cell is _number  # a float within the bounds is valid as it is: most cells, checked at once
        out.append(
            tuple(
                v
                if fast and type(v) is float and -MAX_ABS <= v <= MAX_ABS  # NaN fails the comparison
                else cell(v, partial(msg, "where.column", where=where, column=j + 1))
                for j, v in enumerate(row)
            )
        )
    return tuple(out)


def _range(bounds: tuple[int, int], what: str) -> str | Message:
    low, high = bounds
    return f"{low}" if low == high else msg(f"error.range_{what}", low=low, high=high)


def _tokens(value: object, n: int, name: str = "tokens") -> tuple[str, ...]:
    """n labels (x's, or cross-attention's x_kv's), each printable, short and said once."""
    if value is None:
        return default_tokens(n, "Input" if name == "tokens" else "Source")
    if not isinstance(value, list | tuple) or len(value) != n:
        raise CaseError(msg(f"where.{name}"), msg("error.tokens_count", n=n))
    seen = set()
    for i, token in enumerate(value):
        where = msg("where.label" if name == "tokens" else "where.key_label", label=i + 1)
        if not isinstance(token, str) or not token.strip():
            raise CaseError(where, msg("error.token_empty"))
        if len(token) > MAX_TOKEN_CHARS:
            raise CaseError(where, msg("error.token_long", limit=MAX_TOKEN_CHARS))
        if any(not ch.isprintable() for ch in token):
            raise CaseError(where, msg("error.token_control"))
        if token in seen:
            raise CaseError(where, msg("error.token_twice", token=excerpt(token)))
        seen.add(token)
    return tuple(value)


def _known_option(key: object) -> None:
    """An option of Options, else its name and the near ones (30 options: a list of all would be a paragraph)."""
    names = {f.name for f in fields(Options)}
    if key not in names:
        close = difflib.get_close_matches(str(key), names, n=3)
        hint = msg("error.option_close", names=", ".join(map(repr, close))) if close else msg("error.option_docs")
        raise CaseError(msg("where.options"), msg("error.unknown_option", key=excerpt(key), hint=hint))


def _options(value: object, n: int, widths: Widths, tokens: tuple[str, ...], n_kv: int | None = None) -> Options:
    """The options checked against n queries and n_kv keys (cross-attention's; None: self-attention's n)."""
    if not isinstance(value, dict):
        raise CaseError(msg("where.options"), msg("error.not_object", kind=_kind(value)))
    for key in value:
        _known_option(key)
    o = Options(**value)
    key_tokens, n_kv = (tokens, n) if n_kv is None else (None, _cross_options(o, n_kv))  # a cross case's: by place

    if o.scale not in ("none", "sqrt_dk"):
        if isinstance(o.scale, str):
            raise CaseError(_at("scale"), msg("error.scale_text", value=excerpt(o.scale)))
        scale = _number(o.scale, _at("scale"), MAX_SCALE)
        if scale < MIN_SCALE:
            raise CaseError(_at("scale"), msg("error.at_least", low=MIN_SCALE, value=scale))
        o = replace(o, scale=scale)

    temperature = _number(o.temperature, _at("temperature"), MAX_TEMPERATURE)
    if temperature < MIN_TEMPERATURE:
        raise CaseError(_at("temperature"), msg("error.at_least", low=MIN_TEMPERATURE, value=temperature))

    heads = o.heads
    if isinstance(heads, bool) or not isinstance(heads, int) or not 1 <= heads <= MAX_HEADS:
        raise CaseError(_at("heads"), msg("error.heads_range", high=MAX_HEADS, value=excerpt(heads)))
    if o.dtype not in DTYPES:  # before the heads' checks, whose limit depends on it
        raise CaseError(_at("dtype"), msg("error.dtype", value=excerpt(o.dtype)))
    kv_heads = _kv_heads(o.kv_heads, heads, widths, n, o.dtype, n_kv)

    mask = o.mask
    if mask is not None and mask != "causal":
        if isinstance(mask, str):
            raise CaseError(_at("mask"), msg("error.mask_text", value=excerpt(mask)))
        mask = _matrix(mask, _at("mask"), rows=(n, n), cols=(n_kv, n_kv), tokens=tokens, cell=_zero_one)

    d_concat = widths.d_v // (kv_heads or heads) * heads  # the heads' outputs side by side
    w_out = None
    if o.w_out is not None:
        w_out = _matrix(o.w_out, _at("w_out"), rows=(d_concat, d_concat), cols=(1, max_d(n, d_concat)))

    override = o.weights_override
    if override is not None:
        if heads != 1:
            raise CaseError(_at("weights_override"), msg("error.override_heads"))
        override = _matrix(override, _at("weights_override"), rows=(n, n), cols=(n_kv, n_kv), tokens=tokens)
        for i, row in enumerate(override):
            for j, weight in enumerate(row):
                if weight < 0:
                    row = msg("where.row_token", name=_at("weights_override"), row=i + 1, token=tokens[i])
                    raise CaseError(msg("where.column", where=row, column=j + 1), msg("error.negative", weight=weight))

    if not isinstance(o.device, str) or not DEVICE_PATTERN.fullmatch(o.device):
        raise CaseError(_at("device"), msg("error.device_spec", value=excerpt(o.device)))
    modern = _modern(o, heads, widths.d_k // heads) | _latent(o, n, widths)
    d_rot = rotary_dims(widths.d_k // heads, modern["rope_fraction"])
    rope_base, positions = _rope(o.rope_base, o.positions, n, d_rot, tokens)
    modern |= {"rope_base": rope_base, "positions": positions, "rope_frequencies": _frequencies(o.rope_frequencies,
               rope_base, d_rot)} | _norms(o, widths, heads)  # fmt: skip
    modern["norm_rest"] = _norm_rest(o.norm_rest, modern, widths, (n, n_kv), (tokens, key_tokens))
    return replace(o, temperature=temperature, mask=mask, w_out=w_out, weights_override=override, kv_heads=kv_heads,
                   bias=_flag(o.bias, _at("bias")), **modern)  # fmt: skip


# What positions mean within one sentence: with keys from another, a query's and a key's places are not comparable
WITHIN_ONE_SENTENCE = ("window", "alibi", "relative_bias", "rope_base")


def _cross_options(o: Options, n_kv: int) -> int:
    """Cross-attention's options: no causal mask, window or position term (encoder-decoders' cross-attention has
    none: every target token may see the whole source); n_kv, as it is."""
    if o.mask == "causal":
        raise CaseError(_at("mask"), msg("error.cross_causal"))
    for name in WITHIN_ONE_SENTENCE:
        if getattr(o, name) is not None:
            raise CaseError(_at(name), msg("error.cross_position"))
    return n_kv


def _at(option: str) -> Message:
    """An option's place in words, as the sidebar names it ("Heads", not the file's key options.heads)."""
    return msg(f"where.{option}")


def _flag(value: object, where: Message) -> bool:
    if not isinstance(value, bool):
        raise CaseError(where, msg("error.bias", value=excerpt(value)))
    return value


def head_counts(
    n: int, widths: Widths, kv_heads: int | None = None, dtype: str = "float32", n_kv: int | None = None
) -> tuple[int, ...]:
    """The numbers of heads these sizes allow: each splits d_k (and d_v, over its key/value heads) into equal
    blocks, and their n × n_kv scores (n_kv: n, or cross-attention's keys) stay within the limit; the Heads widget
    steps between them."""
    cells = n * (n if n_kv is None else n_kv)
    return tuple(h for h in range(1, MAX_HEADS + 1) if _heads_fit(h, cells, widths, kv_heads, dtype))


def _heads_fit(heads: int, cells: int, widths: Widths, kv_heads: int | None, dtype: str) -> bool:
    kv = kv_heads or heads
    grouped = kv <= heads and heads % kv == 0 and widths.d_key == widths.d_k // heads * kv
    return widths.d_k % heads == 0 and widths.d_v % kv == 0 and grouped and heads * cells <= _cell_limit(dtype)


def _cell_limit(dtype: str) -> int:
    return MAX_HEAD_CELLS // (2 if dtype == "float64" else 1)  # the same bytes in float64: half the numbers


def _allowed(n: int, widths: Widths, kv_heads: int | None, dtype: str, n_kv: int) -> str:
    """The head counts these sizes allow, as a message lists them: "1, 3" (a person reads which can be used)."""
    return ", ".join(map(str, head_counts(n, widths, kv_heads, dtype, n_kv))) or "—"


def _kv_heads(kv_heads: object, heads: int, widths: Widths, n: int, dtype: str, n_kv: int) -> int | None:
    """Grouped-query attention's key/value heads (None: as many as query heads), the heads checked against the
    widths and the score limit: a count that does not fit says why, in words, and which counts do."""
    if kv_heads is not None and (isinstance(kv_heads, bool) or not isinstance(kv_heads, int)):
        raise CaseError(_at("kv_heads"), msg("error.heads_range", high=heads, value=excerpt(kv_heads)))
    if kv_heads is not None and not (1 <= kv_heads <= heads and heads % kv_heads == 0):
        raise CaseError(_at("kv_heads"), msg("error.kv_heads", heads=heads, value=excerpt(kv_heads)))
    kv = kv_heads or heads
    values = msg("error.heads_values") if kv == heads else msg("error.heads_grouped", heads=kv)
    for what, size, split in ((msg("error.heads_queries"), widths.d_k, heads), (values, widths.d_v, kv)):
        if size % split:
            allowed = _allowed(n, widths, kv_heads, dtype, n_kv)
            raise CaseError(_at("heads"), msg("error.heads_divide", heads=heads, size=size, what=what, allowed=allowed))
    if heads * n * n_kv > (limit := _cell_limit(dtype)):
        allowed = _allowed(n, widths, kv_heads, dtype, n_kv)
        raise CaseError(_at("heads"), msg("error.heads_cells", heads=heads, n=n, dtype=dtype, limit=limit,
                                          allowed=allowed))  # fmt: skip
    if widths.d_key != widths.d_k // heads * kv:  # one key head as wide as a query head, kv of them
        expected = widths.d_k // heads * kv
        raise CaseError("w_key", msg("error.column_count", count=widths.d_key, expected=str(expected)))
    return None if kv_heads in (None, heads) else kv_heads


def _rope(base: object, positions: object, n: int, d_head: int, tokens: tuple[str, ...]):
    """RoPE's base and the tokens' positions (None: 0 … n − 1); a head's dims are turned in pairs, so even."""
    if base is None:
        if positions is not None:
            raise CaseError(_at("positions"), msg("error.positions_no_rope"))
        return None, None
    base = _number(base, _at("rope_base"), MAX_ROPE_BASE)
    if base < MIN_ROPE_BASE:
        raise CaseError(_at("rope_base"), msg("error.at_least", low=MIN_ROPE_BASE, value=base))
    if d_head % 2:
        raise CaseError(_at("rope_base"), msg("error.rope_odd", d=d_head))
    if positions is None:
        return base, None
    if not isinstance(positions, list | tuple) or len(positions) != n:
        raise CaseError(_at("positions"), msg("error.positions_count", n=n))
    for i, p in enumerate(positions):
        if isinstance(p, bool) or not isinstance(p, int) or abs(p) > MAX_POSITION:
            where = msg("where.position", position=i + 1, token=tokens[i])
            raise CaseError(where, msg("error.position", limit=MAX_POSITION, value=excerpt(p)))
    return base, tuple(positions)


def _frequencies(frequencies: object, base: float | None, d_head: int) -> tuple[float, ...] | None:
    """A scaled RoPE's frequencies: one positive number per pair of a head's dims, with a base they were scaled from."""
    if frequencies is None:
        return None
    if base is None:
        raise CaseError(_at("rope_frequencies"), msg("error.frequencies_no_rope"))
    if not isinstance(frequencies, list | tuple) or len(frequencies) != d_head // 2:
        raise CaseError(_at("rope_frequencies"), msg("error.frequencies_count", pairs=d_head // 2, d=d_head))
    out = []
    for p, f in enumerate(frequencies):
        where = msg("where.frequency", pair=p + 1)
        f = _number(f, where, 1.0)
        if f <= 0:
            raise CaseError(where, msg("error.positive", value=excerpt(f)))
        out.append(f)
    return tuple(out)


def _norms(o: Options, widths: Widths, heads: int) -> dict:
    """The q/k norm's weights, both or neither, and its ε (positive, at most 1), as options: per head (Qwen3's) d_head
    numbers each; over the width (OLMo 2's) q_norm one per column of w_query, k_norm one per column of w_key."""
    q_norm, k_norm, width = o.q_norm, o.k_norm, _flag(o.norm_width, _at("norm_width"))
    if (q_norm is None) != (k_norm is None):
        raise CaseError(_at("q_norm" if q_norm is None else "k_norm"), msg("error.norm_pair"))
    eps = _number(o.norm_eps, _at("norm_eps"), 1.0)
    if eps <= 0:
        raise CaseError(_at("norm_eps"), msg("error.positive", value=excerpt(eps)))
    if q_norm is None:
        return {"q_norm": None, "k_norm": None, "norm_eps": eps, "norm_width": width}
    d_head = widths.d_k // heads
    counts = (widths.d_k, widths.d_key) if width else (d_head, d_head)
    out = []
    for name, weights, count in (("q_norm", q_norm, counts[0]), ("k_norm", k_norm, counts[1])):
        if not isinstance(weights, list | tuple) or len(weights) != count:
            raise CaseError(_at(name), msg("error.norm_width_count" if width else "error.norm_count", d=count))
        where = _at(name)  # a number's place is only written when it is wrong (OLMo 2's γ: a layer's width of them)
        out.append(
            tuple(_number(v, partial(msg, "where.norm_weight", name=where, dim=i + 1)) for i, v in enumerate(weights))
        )
    return {"q_norm": out[0], "k_norm": out[1], "norm_eps": eps, "norm_width": width}


MAX_REST = MAX_WIDE_D * MAX_ABS**2  # a token's sum of squares over a layer's other heads, every number within MAX_ABS
MAX_REST_WIDTH = 1 << 16  # a layer's query (key) width: 2,048 in OLMo 2 1B, 5,120 in its 32B


def _norm_rest(value: object, norms: dict, widths: Widths, counts: tuple[int, int], labels: tuple) -> NormRest | None:
    """The other heads' share of the norm over the width: with norm_width and its weights, a sum of squares ≥ 0 per
    token (n for the queries, n_kv for the keys) and the layer's widths, each at least the case's own."""
    if value is None:
        return None
    where = _at("norm_rest")
    if not norms["norm_width"] or norms["q_norm"] is None:
        raise CaseError(where, msg("error.norm_rest_width"))
    if isinstance(value, NormRest):
        value = value.as_dict()
    if not isinstance(value, dict) or set(value) != {"q", "k", "q_width", "k_width"}:
        raise CaseError(where, msg("error.norm_rest_object"))
    sums, sizes = [], []
    for part, count, own, tokens in zip(("q", "k"), counts, (widths.d_k, widths.d_key), labels, strict=True):
        at = msg("where.norm_rest_part", name=where, part=part)
        size = value[f"{part}_width"]
        if isinstance(size, bool) or not isinstance(size, int) or not own <= size <= MAX_REST_WIDTH:
            width_at = msg("where.norm_rest_part", name=where, part=f"{part}_width")
            raise CaseError(width_at, msg("error.norm_rest_width_range", low=own, high=MAX_REST_WIDTH,
                                          value=excerpt(size)))  # fmt: skip
        given = value[part]
        if not isinstance(given, list | tuple) or len(given) != count:
            raise CaseError(at, msg("error.norm_rest_count", count=count, given=_kind(given) if not isinstance(
                given, list | tuple) else len(given)))  # fmt: skip
        row = []
        for i, v in enumerate(given):
            place = (partial(msg, "where.row_token", name=at, row=i + 1, token=tokens[i]) if tokens
                     else partial(msg, "where.row", name=at, row=i + 1))  # fmt: skip
            number = _number(v, place, MAX_REST)
            if number < 0:
                raise CaseError(place, msg("error.norm_rest_negative", value=number))
            if number and size == own:  # one key/value head (multi-query): the key has no other heads
                raise CaseError(place, msg("error.norm_rest_no_others", value=number, width=size))
            row.append(number)
        sums.append(tuple(row))
        sizes.append(size)
    return NormRest(sums[0], sums[1], sizes[0], sizes[1])


def _bounded(value: object, option: str, low: float, high: float) -> float:
    """A number of an option within [low, high]: its place and both limits said when it is not."""
    number = _number(value, _at(option), high)
    if number < low:
        raise CaseError(_at(option), msg("error.at_least", low=low, value=number))
    return number


def _modern(o: Options, heads: int, d_head: int) -> dict:
    """The options of today's models (MODERN), checked: the window, the cap, a number per head, the fraction."""
    return {
        "window": _window(o.window),
        "softcap": None if o.softcap is None else _bounded(o.softcap, "softcap", MIN_SOFTCAP, MAX_SOFTCAP),
        "alibi": _per_head(o.alibi, "alibi", heads, MAX_SLOPE),
        "sinks": _per_head(o.sinks, "sinks", heads, MAX_SINK),
        "rope_fraction": _fraction(o.rope_fraction, o.rope_base, d_head),
        **_relative(o.relative_bias, o.relative_max_distance, o.relative_bidirectional, heads),
    }


def _latent(o: Options, n: int, widths: Widths) -> dict:
    """Multi-head latent attention's W_DKV (d_in rows, as many columns as w_key and w_value have rows) and the
    latent's norm weights (at most one per column: the first ones are normed), or neither."""
    if o.w_latent is None:
        if o.latent_norm is not None:
            raise CaseError(_at("latent_norm"), msg("error.latent_norm_alone"))
        if widths.d_c != widths.d_in:  # w_key made for a latent, the latent taken away
            raise CaseError("w_key", msg("error.latent_rows", rows=widths.d_c, d_in=widths.d_in))
        return {"w_latent": None, "latent_norm": None}
    d_in, d_c = widths.d_in, widths.d_c
    w_latent = _matrix(o.w_latent, _at("w_latent"), rows=(d_in, d_in), cols=(1, max_d(n, d_in)))
    if len(w_latent[0]) != d_c:
        raise CaseError(_at("w_latent"), msg("error.latent_columns", count=len(w_latent[0]), d_c=d_c))
    norm = o.latent_norm
    if norm is not None:
        if not isinstance(norm, list | tuple) or not 1 <= len(norm) <= d_c:
            count = len(norm) if isinstance(norm, list | tuple) else excerpt(norm)
            raise CaseError(_at("latent_norm"), msg("error.latent_norm_count", d_c=d_c, count=count))
        where = _at("latent_norm")
        norm = tuple(_number(v, partial(msg, "where.norm_weight", name=where, dim=i + 1)) for i, v in enumerate(norm))
    return {"w_latent": w_latent, "latent_norm": norm}


def _window(window: object) -> int | None:
    """A sliding window: how many keys each query sees, itself included (a whole number, at least 1)."""
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_N:
        raise CaseError(_at("window"), msg("error.window", high=MAX_N, value=excerpt(window)))
    return window


def _per_head(values: object, option: str, heads: int, bound: float) -> tuple[float, ...] | None:
    """One number per head (ALiBi's slopes, the sink logits), each within ±bound."""
    if values is None:
        return None
    if not isinstance(values, list | tuple) or len(values) != heads:
        count = len(values) if isinstance(values, list | tuple) else excerpt(values)
        raise CaseError(_at(option), msg("error.per_head", heads=heads, count=count))
    return tuple(_number(v, msg("where.of_head", name=_at(option), head=i + 1), bound) for i, v in enumerate(values))


def _relative(table: object, max_distance: object, bidirectional: object, heads: int) -> dict:
    """T5's relative bias: a row of buckets per head (at least 2 for keys behind alone, 4 both ways, as many in
    each), the largest distance told apart (more than the exact buckets: half of a direction's), both ways or not.
    Without a table, the other two are the defaults (nothing reads them)."""
    if table is None:
        return {"relative_bias": None, "relative_max_distance": 128, "relative_bidirectional": True}
    both = _flag(bidirectional, _at("relative_bidirectional"))
    exact = 4 if both else 2  # T5's num_buckets // 2, halved again both ways: a bucket per distance below
    table = _table(table, heads, exact)
    low = 1 + len(table[0]) // exact
    if isinstance(max_distance, bool) or not isinstance(max_distance, int) or not low <= max_distance <= MAX_N:
        raise CaseError(_at("relative_max_distance"), msg("error.max_distance", low=low, high=MAX_N,
                                                          value=excerpt(max_distance)))  # fmt: skip
    return {"relative_bias": table, "relative_max_distance": max_distance, "relative_bidirectional": both}


def _table(table: object, heads: int, fewest: int) -> Matrix:
    """T5's table: a row per head, as many buckets in each (fewest … MAX_BUCKETS), a bad number named by its head
    and its bucket (counted from 0, as T5 and the steps count them)."""
    name = _at("relative_bias")
    if not isinstance(table, list | tuple) or not table:
        raise CaseError(name, msg("error.not_rows", kind=_kind(table)))
    if len(table) != heads:
        raise CaseError(name, msg("error.rows_per_head", heads=heads, count=len(table)))
    width = len(table[0]) if isinstance(table[0], list | tuple) else 0
    if not fewest <= width <= MAX_BUCKETS:
        raise CaseError(name, msg("error.column_count", count=width, expected=_range((fewest, MAX_BUCKETS), "columns")))
    out = []
    for h, row in enumerate(table):
        where = msg("where.of_head", name=name, head=h + 1)
        if not isinstance(row, list | tuple) or len(row) != width:
            raise CaseError(where, msg("error.row_width", count=len(row) if isinstance(row, list | tuple) else 0,
                                       width=width))  # fmt: skip
        out.append(tuple(_number(v, msg("where.bucket", where=where, bucket=b), MAX_BUCKET_BIAS)
                         for b, v in enumerate(row)))  # fmt: skip
    return tuple(out)


def _fraction(fraction: object, base: object, d_head: int) -> float | None:
    """Partial rotary's fraction of a head's dims: in (0, 1], with RoPE, turning an even number of at least 2 dims."""
    if fraction is None:
        return None
    if base is None:
        raise CaseError(_at("rope_fraction"), msg("error.fraction_no_rope"))
    fraction = _number(fraction, _at("rope_fraction"), 1.0)
    d_rot = rotary_dims(d_head, fraction)
    if fraction <= 0 or d_rot < 2 or d_rot % 2:
        raise CaseError(_at("rope_fraction"), msg("error.fraction", value=fraction, d=d_head, dims=d_rot))
    return None if fraction == 1 else fraction


def _zero_one(value: object, where: str | Callable[[], str]) -> float:
    if isinstance(value, bool) or value not in (0, 1):
        raise CaseError(where, msg("error.zero_one", value=excerpt(value)))
    return float(value)
