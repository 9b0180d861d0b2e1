"""The eight steps by name, as the article counts and titles them: what each axis of their tensors is, what each
tensor is made from, and their formulas."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ..base.case import Case
from ..base.i18n import text
from ..base.record import Step

STEP_NAMES = ("inputs", "weights", "qkv", "scores", "softmax", "weighted", "outputs", "repeat")
# RoPE (rotary position embedding, as in Llama-style models) happens between step 3's projections and step 4's
# scores: a case with rope_base gets this step there, numbered 3 like the projections it turns (the article has none)
ROPE = "rope"
# Qwen3's q/k norm: each head's queries and keys RMS-normed before RoPE turns them (a case with q_norm and k_norm);
# OLMo 2's (norm_width) a token's queries (keys) of every head at once
NORM = "norm"
# Each step's label, as the article counts them: the norm and RoPE are part of step 3 ("3a", "3b"), the steps after
# them keep theirs
LABELS = {name: str(number) for number, name in enumerate(STEP_NAMES, start=1)} | {NORM: "3a", ROPE: "3b"}

# What each axis of a recorded tensor is; with heads > 1, the tensors in PER_HEAD have the head axis first.
AXES = {
    "x": ("token", "feature"),
    "x_kv": ("key token", "feature"),
    "w_query": ("feature", "query dim"),
    "w_key": ("feature", "key dim"),
    "w_value": ("feature", "value dim"),
    "w_latent": ("feature", "latent dim"),
    "latent_unnormed": ("token", "latent dim"),
    "latent": ("token", "latent dim"),
    "queries_unnormed": ("token", "query dim"),
    "keys_unnormed": ("token", "key dim"),
    "queries_unrotated": ("token", "query dim"),
    "keys_unrotated": ("token", "key dim"),
    "queries": ("token", "query dim"),
    "keys": ("token", "key dim"),
    "values": ("token", "value dim"),
    "scores_raw": ("query", "key"),
    "position_bias": ("query", "key"),
    "scores_uncapped": ("query", "key"),
    "scores": ("query", "key"),
    "weights_exact": ("query", "key"),
    "weights_sink": ("query", "sink"),
    "weights": ("query", "key"),
    "weighted": ("key", "query", "value dim"),
    "head_outputs": ("query", "value dim"),
    "concat": ("query", "value dim"),
    "outputs": ("query", "output dim"),
    "outputs_by_query": ("query", "output dim"),
}
PER_HEAD = {"queries", "keys", "values", "scores_raw", "scores", "weights_exact", "weights", "weighted", "head_outputs"}
PER_HEAD |= {"queries_unrotated", "keys_unrotated"}  # with RoPE, step 3's queries and keys before they are turned
PER_HEAD |= {"queries_unnormed", "keys_unnormed"}  # with a q/k norm, step 3's before it
PER_HEAD |= {"position_bias", "scores_uncapped", "weights_sink"}  # ALiBi's bias, before a softcap, a sink's weight
# The tensors whose rows are the keys' tokens: in cross-attention x_kv's ("key token", its own labels), else x's
KEY_ROWS = {"keys", "values", "keys_unrotated", "keys_unnormed", "latent", "latent_unnormed"}

# What each tensor is made from (its parents): what its step read. Step 7's concat and outputs are made from the
# first of theirs that the step has (the heads joined, or the one head's sum over the keys), and the outputs from the
# case's w_out too when it has one (an option, named as errors name it).
MADE_FROM = {
    "queries": ("x", "w_query"),
    "keys": ("x", "w_key"),
    "queries_unrotated": ("x", "w_query"),
    "keys_unrotated": ("x", "w_key"),
    "queries_unnormed": ("x", "w_query"),
    "keys_unnormed": ("x", "w_key"),
    "values": ("x", "w_value"),
    "latent_unnormed": ("x", "w_latent"),
    "latent": ("x", "w_latent"),
    "scores_raw": ("queries", "keys"),
    "position_bias": ("options.alibi", "options.relative_bias"),
    "scores_uncapped": ("scores_raw", "position_bias"),
    "scores": ("scores_uncapped", "scores_raw", "position_bias"),
    "weights_exact": ("scores", "options.sinks"),
    "weights_sink": ("scores", "options.sinks"),
    "weights": ("weights_exact",),
    "weighted": ("weights", "values"),
    "head_outputs": ("weighted",),
    "concat": ("head_outputs", "weighted"),
    "outputs": ("concat", "weighted"),
    "outputs_by_query": ("queries", "keys", "values"),
}
QUERIES = ("queries", "queries_unrotated", "queries_unnormed")  # step 3's that read x (cross-attention's queries)
TURNED = {"queries": ("queries_unrotated",), "keys": ("keys_unrotated",)}  # the RoPE step's
NORMED = {f"{m}{after}": (f"{m}_unnormed",) for m in ("queries", "keys") for after in ("", "_unrotated")}  # the norm's

# The article's step titles and a line on each, in English (the CLI, trace files); pages show the catalogue's
# step.<name>.title / step.<name>.explanation in the reader's language.
FORMULA_WIDTH = 70  # the characters of a formula that fit the page's column at its usual width, roughly
TITLES = {name: text("en", f"step.{name}.title") for name in (*STEP_NAMES, NORM, ROPE)}
EXPLANATIONS = {name: text("en", f"step.{name}.explanation") for name in (*STEP_NAMES, NORM, ROPE)}


def step_names(case: Case) -> tuple[str, ...]:
    """The steps a case's trace holds, in order: the article's eight, and the q/k norm and RoPE after step 3 when the
    case has them."""
    o, after = case.options, STEP_NAMES.index("qkv") + 1
    extra = (NORM,) * (o.q_norm is not None) + (ROPE,) * (o.rope_base is not None)
    return (*STEP_NAMES[:after], *extra, *STEP_NAMES[after:])


def step_of(case: Case, said: str) -> str | None:
    """The step a link or a person names: by its name ("scores"), its label ("3b"), or, as links held it before
    steps had names, its place among the case's steps from 1 ("4"); None when the case has no such step."""
    names = step_names(case)
    if said in names:
        return said
    parts = {LABELS[NORM]: NORM, LABELS[ROPE]: ROPE}  # "3a", "3b"
    if said in parts:
        return parts[said] if parts[said] in names else None
    if said.isascii() and said.isdigit() and len(said) < 3 and 1 <= int(said) <= len(names):  # not "²", not 9⁵⁰⁰⁰
        return names[int(said) - 1]
    return None


def step_near(case: Case, name: str, by: int = 0, wrap: bool = False) -> str:
    """The case's step `by` steps from `name` (one it lacks, the norm or RoPE after a case with them, counts as the
    step it is part of): at the ends it stays, or with `wrap` goes round from the last to the first."""
    names = step_names(case)
    here = names.index(name) if name in names else names.index("qkv") if name in (NORM, ROPE) else 0
    return names[(here + by) % len(names) if wrap else min(len(names) - 1, max(0, here + by))]


def number(name: str) -> int:
    """A step's number as the article counts its eight (the norm and RoPE are part of step 3)."""
    return STEP_NAMES.index("qkv" if name in (NORM, ROPE) else name) + 1


def step(case: Case, name: str, tensors: Mapping, device: str, seconds: float, notes: tuple = ()) -> Step:
    """A step of the trace, with its formula and what each of its tensors was made from."""
    table, reads = MADE_FROM | {ROPE: TURNED, NORM: NORMED}.get(name, {}), {}
    for tensor in tensors:
        parents = table.get(tensor, ())
        if tensor in ("concat", "outputs"):  # the heads joined, or the one head's sum over the keys
            parents = next(((p,) for p in parents if p in tensors), parents[-1:])
        if tensor == "outputs" and case.options.w_out is not None:  # projected by the case's own w_out
            parents += ("options.w_out",)
        if tensor in ("scores", "scores_uncapped"):  # the scores before the cap, else the raw ones and any bias
            parents = tuple(p for p in parents if p in tensors)
            parents = ("scores_uncapped",) if "scores_uncapped" in parents else parents
        if tensor == "position_bias":  # ALiBi's slopes, T5's table, or both
            parents = tuple(p for p in parents if getattr(case.options, p.removeprefix("options.")) is not None)
        if tensor in ("weights_exact", "weights_sink") and case.options.sinks is None:
            parents = ("scores",)
        if parents[:1] == ("x",) and tensor not in QUERIES:  # keys and values (and MLA's latent) read the keys' rows:
            latent = "latent" in tensors and tensor not in ("latent", "latent_unnormed")  # from MLA's latent,
            parents = ("latent" if latent else "x_kv" if case.cross else "x", *parents[1:])  # x_kv's or x's
        if tensor == "latent" and "latent_unnormed" in tensors:  # DeepSeek's: the latent's norm
            parents = ("latent_unnormed",)
        reads[tensor] = parents
    return Step(number(name), name, LABELS[name], TITLES[name], EXPLANATIONS[name], formula(name, case), tensors,
                MappingProxyType(reads), device, seconds, notes)  # fmt: skip


def lines(formula: str, width: int = FORMULA_WIDTH) -> str:
    """A formula too wide for the page (about `width` characters as read) broken into lines at its top-level
    ",\\quad" separators, centred one under another: KaTeX does not wrap, and a clipped formula hides its last part."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(formula):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth == 0 and formula.startswith(r",\quad", i):
            parts.append(formula[start:i] + ",")
            start = i + len(r",\quad")
    parts.append(formula[start:])
    if _read(formula) <= width or len(parts) == 1 or formula.startswith(r"\begin"):  # already in lines: as it is
        return formula
    rows, row = [], ""
    for part in parts:  # as many parts a row as fit
        if row and _read(row + part) > width:
            rows.append(row)
            row = ""
        row += (r"\quad " if row else "") + part
    return r"\begin{gathered}" + r" \\ ".join([*rows, row]) + r"\end{gathered}"


def _read(formula: str) -> int:
    """Roughly how many characters the eye reads in a formula: its commands and braces left out."""
    return len(re.sub(r"\\[a-zA-Z]+|[{}^_ ]", "", formula))


def _rest_formula(case: Case, words, eps: str) -> str:
    """OLMo 2's norm of a case that holds some of its layer's heads: the root over the layer's width D, with ρ, the
    other heads' share of the token's sum of squares (norm_rest), and, a line each below, where ρ_Q and ρ_K come from
    (one line would run past the page)."""
    o, r = case.options, case.options.norm_rest
    g = o.kv_heads or o.heads
    sums = r"\textstyle\sum_{c,\,\text{head}} q_c^2" if o.heads > 1 else r"\textstyle\sum_c q_c^2"
    root = rf"\sqrt{{\tfrac{{1}}{{{r.q_width}}} \left({sums} + \rho_Q\right) + \varepsilon}}"
    others = words("norm_rest", heads=r.q_width // case.d_head - o.heads, width=r.q_width)
    keys = words("norm_rest_keys", heads=r.k_width // case.d_head - g, width=r.k_width)
    likewise = rf"k\ {words('likewise')}\ (\gamma_K, \rho_K)"
    norm = rf"q \leftarrow \gamma_Q \odot \frac{{q}}{{{root}}},\quad {likewise},\quad \varepsilon = {eps}"
    return rf"\begin{{gathered}} {norm} \\ \rho_Q: {others} \\ \rho_K: {keys} \end{{gathered}}"


def formula(name: str, case: Case, lang: str = "en") -> str:
    """The step's formula in LaTeX, with this case's sizes and options (its few words in `lang`)."""
    o, n, h = case.options, case.n, case.options.heads

    def words(key: str, **params) -> str:
        return rf"\text{{{text(lang, f'formula.{key}', **params)}}}"

    if name == "inputs":
        keys = rf",\quad X_{{kv}} \in \mathbb{{R}}^{{{case.n_kv} \times {case.d_in}}}" if case.cross else ""
        return rf"X \in \mathbb{{R}}^{{{n} \times {case.d_in}}}{keys}"
    if name == "weights":
        return _weights(case)
    if name == "qkv":
        return _qkv(case, words)
    if name == NORM:  # each head's query (key) over its root mean square, then times the model's weights γ
        mantissa, _, power = f"{o.norm_eps:.3g}".partition("e")  # 1e-06 → 10^{-6}
        times = "" if mantissa == "1" else mantissa + r" \cdot "
        eps = mantissa if not power else rf"{times}10^{{{int(power)}}}"
        root = rf"\sqrt{{\tfrac{{1}}{{{case.d_head}}} \textstyle\sum_c q_c^2 + \varepsilon}}"
        over = ""
        if o.norm_width and h > 1:  # OLMo 2's: the mean runs over a token's numbers of every head (its whole q; k's
            # over every key/value head's: w_key's width)
            root = rf"\sqrt{{\tfrac{{1}}{{{case.d_k}}} \textstyle\sum_{{c,\,\text{{head}}}} q_c^2 + \varepsilon}}"
            over = rf",\quad {words('every_head', d=case.d_k)}\ (k: {len(case.w_key[0])})"
        if o.norm_rest is not None:  # a head cut from its layer: the other heads' share ρ joins, over the layer's width
            return _rest_formula(case, words, eps)
        likewise = rf"k\ {words('likewise')}\ (\gamma_K)"
        return rf"q \leftarrow \gamma_Q \odot \frac{{q}}{{{root}}},\quad {likewise}{over},\quad \varepsilon = {eps}"
    if name == ROPE:  # the rotation R_t turns pair p of a query or key at position t by the angle t·θ_p
        theta = rf"\theta_p = {o.rope_base:g}^{{-2p/{case.d_head}}}"
        if o.rope_frequencies is not None:  # a model's scaled RoPE: its own θ_p, the paper's rescaled
            theta = rf"\theta_p = {words('scaled')}\ {o.rope_base:g}^{{-2p/{case.d_head}}}"
        q = r"\begin{pmatrix} q_{2p} \\ q_{2p+1} \end{pmatrix}"
        turn = r"\begin{pmatrix} \cos t\theta_p & -\sin t\theta_p \\ \sin t\theta_p & \cos t\theta_p \end{pmatrix}"
        pair = rf"{q} \leftarrow {turn} {q}"
        if case.d_rot < case.d_head:  # partial rotary: the pairs of the first d_rot dims, the rest as they are
            theta = theta.replace(f"/{case.d_head}", f"/{case.d_rot}")
            pair += rf",\ p < {case.d_rot // 2}\ ({words('rotary_part', d_rot=case.d_rot, d=case.d_head)})"
        return rf"{pair},\quad {theta},\quad k\ {words('likewise')}"
    if name == "scores":
        return _scores(case, words)
    if name == "softmax":
        exact = r"A_{ij} = \frac{e^{S_{ij}}}{\sum_k e^{S_{ik}}}"
        if o.sinks is not None:  # the sink's e^s_h in the denominator, no value in the sum after
            exact = r"A_{ij} = \frac{e^{S_{ij}}}{e^{s_h} + \sum_k e^{S_{ik}}}"
        return exact + (rf",\quad A := \tilde{{A}}\ {words('rounded')}" if o.weights_override is not None else "")
    if name == "weighted":
        return r"\mathcal{W}_{j,i,:} = A_{ij}\, V_{j,:}"
    if name == "outputs":
        heads = r",\quad O = [O^{(1)} \cdots O^{(h)}]" if h > 1 else ""
        project = r",\quad O \leftarrow O\, W_O" if o.w_out is not None else ""
        return r"O_{i,:} = \sum_j \mathcal{W}_{j,i,:} = (A V)_{i,:}" + heads + project
    return rf"o_i = {words('with')}\ q_i\ {words('alone')} = O_{{i,:}} \quad {words('each_query')}\ i"


def _weights(case: Case) -> str:
    """Step 2's formula: the weights' sizes; with multi-head latent attention, W_DKV and the up-projections."""
    if case.options.w_latent is not None:  # keys and values from the latent's d_c numbers
        return (
            rf"W_Q \in \mathbb{{R}}^{{{case.d_in} \times {case.d_k}}},\quad "
            rf"W_{{DKV}} \in \mathbb{{R}}^{{{case.d_in} \times {case.d_c}}},\quad "
            rf"W_{{UK}} \in \mathbb{{R}}^{{{case.d_c} \times {len(case.w_key[0])}}},\quad "
            rf"W_{{UV}} \in \mathbb{{R}}^{{{case.d_c} \times {case.d_v}}}"
        )
    return (
        rf"W_Q, W_K \in \mathbb{{R}}^{{{case.d_in} \times {case.d_k}}},\quad "
        rf"W_V \in \mathbb{{R}}^{{{case.d_in} \times {case.d_v}}}"
    )


def _qkv(case: Case, words: Callable[..., str]) -> str:
    """Step 3's formula: the projections, the heads' split and any sharing; with MLA, the latent they read."""
    o, h = case.options, case.options.heads
    g = o.kv_heads or h
    sizes = f"{case.d_head}, {case.d_head}, {case.d_v // g}"
    split = rf",\quad {words('heads', heads=h)}\ {sizes}\ {words('columns')}" if h > 1 else ""
    shared = rf",\quad {words('kv_heads', kv_heads=g, group=h // g)}" if g < h else ""
    kv = "X_{kv}" if case.cross else "X"  # cross-attention: keys and values from the other sentence
    if o.w_latent is not None:  # DeepSeek's MLA: the latent C is all the cache keeps
        norm = r"\operatorname{RMSNorm}_\gamma" if o.latent_norm is not None else ""
        return (rf"Q = X W_Q,\quad C = {norm}({kv} W_{{DKV}})\ ({words('latent', d_c=case.d_c)}),\quad "
                rf"K = C W_{{UK}},\quad V = C W_{{UV}}{split}{shared}")  # fmt: skip
    return rf"Q = X W_Q,\quad K = {kv} W_K,\quad V = {kv} W_V{split}{shared}"


def _scores(case: Case, words: Callable[..., str]) -> str:
    """Step 4's formula: the scale and temperature, then what today's models add (ALiBi, a softcap, a window)."""
    o = case.options
    scale = {"none": "", "sqrt_dk": rf"\frac{{1}}{{\sqrt{{{case.d_head}}}}}\,"}.get(o.scale)
    scale = rf"{o.scale:g}\," if scale is None else scale
    temperature = "" if o.temperature == 1 else rf" \,/\, {o.temperature:g}"
    mask = rf",\quad S_{{ij}} = -\infty\ {words('where')}\ M_{{ij}} = 0" if o.mask is not None else ""
    bias = r" - m_h\,(i - j)" if o.alibi is not None else ""
    bias += r" + t_h[\mathrm{bucket}(j - i)]" if o.relative_bias is not None else ""
    cap = rf",\quad S \leftarrow {o.softcap:g} \tanh(S / {o.softcap:g})" if o.softcap is not None else ""
    window = ""
    if o.window is not None:  # the keys outside the window: after the query, or window or more before it
        window = rf",\quad S_{{ij}} = -\infty\ {words('where')}\ j > i\ {words('or')}\ i - j \ge {o.window}"
    return rf"S = {scale}Q K^\top{temperature}{bias}{cap}{mask}{window}"
