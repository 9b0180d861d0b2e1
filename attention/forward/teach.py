"""Why each step and each option is there, in plain words, with the case's own numbers where they tell the story;
and where the article departs from textbook attention, as variants of a case."""

from __future__ import annotations

import math

import torch

from ..base.case import MODERN, Case, with_options
from ..base.i18n import Message, msg, text
from .compute import Trace, attend, option_tensors, relative_bucket


def sqrt_dk_effect(trace: Trace, head: int | None = None) -> dict[str, float]:
    """What dividing by √d_k does to this trace's raw scores (one head's, or every head's): their spread (standard
    deviation over the keys each query may see) and the largest weight of a row on average, without and with it."""
    d, heads = trace.case.d_head, trace.case.options.heads
    every = head is None and trace.has_head("scores_raw")
    # A head at a time, each temporary changed in place: every head's float64 scores at once made several
    # (h, n, n) temporaries alive together, at the limits (16 heads of n = 1024) over 0.9 GB for four numbers.
    count, mean, squares, rows, top_raw, top_scaled = 0, 0.0, 0.0, 0, 0.0, 0.0
    for one in range(heads) if every else (head,):
        raw = trace.view("scores_raw", one).to(torch.float64, copy=True)  # (n, n): changed in place below
        seen = torch.isfinite(trace.view("scores", one))  # a masked key is not part of a query's softmax
        kept = raw[seen]
        if m := kept.numel():  # Chan's pairwise update of the count, mean and sum of squared deviations
            delta, total = kept.mean().item() - mean, count + m
            squares += kept.var(correction=0).item() * m + delta**2 * count * m / total
            count, mean = total, mean + delta * m / total
        del kept
        some = seen.any(dim=-1)
        rows += int(some.sum())
        scaled = raw / math.sqrt(d)
        top_raw, top_scaled = top_raw + _top_weights(raw, seen, some), top_scaled + _top_weights(scaled, seen, some)
    spread = math.sqrt(squares / count) if count > 1 else 0.0
    return {
        "d": d,
        "spread_raw": spread,
        "spread_scaled": spread / math.sqrt(d),  # a standard deviation scales with its numbers
        "top_raw": top_raw / rows if rows else 0.0,
        "top_scaled": top_scaled / rows if rows else 0.0,
    }


def _top_weights(scores: torch.Tensor, seen: torch.Tensor, some: torch.Tensor) -> float:
    """The sum over the rows that see some key of each row's largest softmax weight, 1 / Σ_j e^(s_j − max s),
    made in `scores` itself (changed in place)."""
    scores.masked_fill_(~seen, float("-inf"))
    scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()  # a row that sees no key is NaN here: left out below
    return scores.sum(dim=-1).reciprocal_()[some].sum().item()


def whys(trace: Trace, step: str, lang: str = "en", head: int | None = None) -> list[str]:
    """The why of a step, then of each option in effect there, one or two sentences each, in `lang`."""
    o = trace.case.options
    out = [text(lang, f"why.{step}")]
    if step == "qkv" and o.heads > 1:
        out.append(text(lang, "why.heads"))
    if step == "scores":
        out.append(text(lang, "why.sqrt_dk", **sqrt_dk_effect(trace, head)))  # on or off: the case's numbers say why
        if o.mask is not None:
            out.append(text(lang, "why.causal" if o.mask == "causal" else "why.custom_mask"))
        if o.temperature != 1:
            out.append(text(lang, "why.temperature"))
    if step == "outputs" and o.mask == "causal":
        out.append(text(lang, "why.causal_outputs"))
    if step == "softmax" and o.weights_override is not None:
        out.append(text(lang, "why.rounded"))
    out += [text(lang, f"why.{option}", **numbers) for option, numbers in modern_whys(trace, step, head)]
    if step == "qkv" and o.latent_norm is not None:  # DeepSeek's norm of the latent, after the latent's why
        out.append(text(lang, "why.latent_norm", d=len(o.latent_norm), d_c=trace.case.d_c))
    return out


MODERN_STEP = {"window": "scores", "softcap": "scores", "alibi": "scores", "relative_bias": "scores",
               "sinks": "softmax", "rope_fraction": "rope", "w_latent": "qkv"}  # fmt: skip


def modern_whys(trace: Trace, step: str, head: int | None = None) -> list[tuple[str, dict]]:
    """The options of today's models in effect at this step (the step each changes), with the case's numbers that
    tell their story: (option, its why's numbers)."""
    case, o = trace.case, trace.case.options
    on = [name for name, at in MODERN_STEP.items() if at == step and getattr(o, name) is not None]
    h, last = head or 0, case.n  # the last token: the one a window cuts most
    far = min(max(last - 1, 2), o.relative_max_distance)  # T5's: the furthest key back, or where the buckets end
    numbers = {
        "window": lambda: {"w": o.window, "n": last, "first": max(1, last - o.window + 1)},
        "softcap": lambda: {"cap": o.softcap, "top": _top_score(trace, head),
                            "capped": o.softcap * math.tanh(_top_score(trace, head) / o.softcap)},
        "alibi": lambda: {"slope": o.alibi[h], "head": h + 1, "far": 3, "penalty": 3 * o.alibi[h]},
        "relative_bias": lambda: {"head": h + 1, "near": o.relative_bias[h][relative_bucket(o, -1)],
                                  "far": o.relative_bias[h][relative_bucket(o, -far)], "n": far},
        "sinks": lambda: {"sink": o.sinks[h], "head": h + 1, "share": _of_head(trace, "weights_sink", h).mean().item()},
        "rope_fraction": lambda: {"d_rot": case.d_rot, "d": case.d_head, "rest": case.d_head - case.d_rot},
        "w_latent": lambda: {"d_c": case.d_c, "kv": len(case.w_key[0]) + case.d_v},  # a token cached: d_c, or k and v
    }  # fmt: skip
    return [(name, numbers[name]()) for name in on]


def _of_head(trace: Trace, name: str, head: int) -> torch.Tensor:
    """One head's slice of a recorded tensor (the tensor itself with one head)."""
    return trace[name][head] if trace.case.options.heads > 1 else trace[name]


def _top_score(trace: Trace, head: int | None) -> float:
    """The largest score before the softcap, by size (of one head, or every head's)."""
    uncapped = trace["scores_uncapped"] if head is None else trace.view("scores_uncapped", head)
    return max(uncapped.max().item(), uncapped.min().item(), key=abs)


def variants(case: Case) -> dict[str, Case]:
    """Where the article departs from textbook attention, side by side on one case's numbers, keyed by id: "rounded"
    (when the case has the article's rounded weights), "exact", "textbook", "temperature" (when it is not 1) and
    "causal", each without today's sliding window, cap, ALiBi, T5's bias and sinks. A variant's name is
    variant_name(id, case)."""
    exact = {"scale": None, "temperature": None, "mask": None, "weights_override": None}
    exact |= dict.fromkeys(("window", "softcap", "alibi", "relative_bias", "sinks"))  # today's: the page's next part
    changes = {"exact": {}, "textbook": {"scale": "sqrt_dk"}, "causal": {"mask": "causal"}}
    if case.options.weights_override is not None:
        changes = {"rounded": {"weights_override": case.options.weights_override}} | changes
    if case.options.temperature != 1:  # at 1 it is the exact softmax again
        changes["temperature"] = {"temperature": case.options.temperature}
    order = ("rounded", "exact", "textbook", "temperature", "causal")
    return {v: with_options(case, **exact | changes[v]) for v in order if v in changes}


def variant_name(variant: str, case: Case) -> Message:
    """A variant's name in the catalogue (variant.<id>), with the case's temperature where it says it."""
    return msg(f"variant.{variant}", temperature=case.options.temperature)


EXACT = "exact"  # the variant the others are compared with

# Today's models' variants (the variants page), by id: each an option of the case; NoPE is RoPE left out; latent:
# multi-head latent attention's W_DKV (plain attention of a latent case needs its keys and values made plain first)
MODERN_VARIANTS = ("window", "softcap", "alibi", "relative", "sinks", "partial", "nope", "latent")
PLAIN = dict.fromkeys(MODERN)  # plain attention: every option of today's models off


def modern_chosen(case: Case, nope: bool = False) -> tuple[str, ...]:
    """The variants of today's models the case has, in MODERN_VARIANTS' order (`nope`: its RoPE was left out)."""
    o = case.options
    has = {"window": o.window, "softcap": o.softcap, "alibi": o.alibi, "relative": o.relative_bias, "sinks": o.sinks,
           "partial": o.rope_fraction, "latent": o.w_latent}  # fmt: skip
    return tuple(v for v in MODERN_VARIANTS if (nope if v == "nope" else has[v] is not None))


def window_readings(case: Case, plain_outputs: torch.Tensor, outputs: torch.Tensor) -> list[Message]:
    """For each query, which tokens it sees (its mask and window) and how far its output moved from plain
    attention's (the largest change of one of its numbers)."""
    allowed = option_tensors(case, torch.device("cpu"))[0]  # (n, n) bool, or None: every key
    moved = (outputs.double() - plain_outputs.double()).abs().amax(dim=-1)  # (n,)
    readings = []
    for i in range(case.n):
        seen = list(range(case.n)) if allowed is None else allowed[i].nonzero().flatten().tolist()
        said = {"i": i + 1, "token": case.tokens[i], "seen": spans(seen), "moved": moved[i].item()}
        if len(seen) > 1:
            readings.append(msg("variants.sees", **said))
        else:
            readings.append(msg("variants.sees_one" if seen else "variants.sees_none", **said))
    return readings


def spans(indices: list[int]) -> str:
    """Token places (from 0) as the numbers a reader counts (from 1), runs as ranges: [2, 3, 4, 7] -> "3–5, 8"."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0] + 1}" if len(r) == 1 else f"{r[0] + 1}–{r[-1] + 1}" for r in runs)


def rounding_gap(case: Case) -> float:
    """How far the case's weights override is from its exact softmax: the largest difference of one weight."""
    exact = attend(with_options(case, weights_override=None, device="cpu"))["weights_exact"]
    return (exact - torch.tensor(case.options.weights_override, dtype=exact.dtype)).abs().max().item()


# The overview's questions: from the case in front of the learner

BY_HAND = 4  # the widest vectors a question prints, and a person multiplies out by hand


def by_hand(width: int) -> bool:
    """Whether vectors this wide are worked out by hand, and printed in a question (a real head's 64 are not)."""
    return width <= BY_HAND


def seen_cell(trace: Trace) -> tuple[int, int]:
    """The score a question asks about: query 2 on key 3 as the article has it, or the nearest one the query sees
    (a masked score is −∞ by definition: nothing to ask)."""
    n, n_kv, scores = trace.case.n, trace.case.n_kv, trace["scores"]
    first = scores.reshape(-1, n, n_kv)[0]  # the first head's, when there are several
    near = ((1, 2), (2, 1), (1, 1), (1, 0), (0, 0))
    for query, key in ((min(q, n - 1), min(k, n_kv - 1)) for q, k in near):
        if first[query, key].item() != float("-inf"):  # NaN: a number an open exercise hides, not a masked one
            return query, key
    return 0, 0


def most_looked_at(trace: Trace) -> tuple[int, int]:
    """The last token (which sees every key, even under a causal mask) and the key it gives its largest weight (in
    cross-attention, a source token)."""
    n = trace.case.n
    row = trace["weights"].reshape(-1, n, trace.case.n_kv)[0][n - 1]
    return n - 1, int(row.nan_to_num(nan=-1.0).argmax())


def questions(trace: Trace) -> dict[str, Message]:
    """The overview's questions, by the id their link carries, each answerable from the screen: a score worked out
    by hand only where its vectors are short, an output only where it is a few numbers, which key a token looks at
    most where they are not; RoPE's turn on a case with it; a causal mask where there is none yet; ÷√d_k always; a
    sliding window (today's models) where there is none yet."""
    case, o = trace.case, trace.case.options
    tokens, keys, out = case.tokens, case.key_tokens, {}  # cross-attention: the keys are x_kv's tokens
    if by_hand(case.d_head):
        query, key = seen_cell(trace)
        score = trace["scores"].reshape(-1, case.n, case.n_kv)[0][query, key].item()
        out["score"] = msg("question.score", query=tokens[query], key=keys[key], value=_number(score))
    else:
        query, key = most_looked_at(trace)
        out["look"] = msg("question.look", token=tokens[query])
    if o.rope_base is not None:
        query, key = most_looked_at(trace)
        out["rope"] = msg("question.rope", query=tokens[query], key=keys[key])
    row = min(2, case.n - 1)
    if by_hand(trace.outputs.shape[-1]):
        output = ", ".join(_number(v) for v in trace.outputs[row].tolist())
        out["output"] = msg("question.output", token=tokens[row], row=f"[{output}]")
    if o.mask is None and not case.cross:  # (a causal mask and a window place keys in x: not across two sentences)
        out["causal"] = msg("question.causal", token=tokens[0])
    out["sqrt_dk"] = msg("question.sqrt_dk", d=case.d_head)
    if o.window is None and not case.cross:  # today's models: the Variants page with a window of 3 on
        out["window"] = msg("question.window", window=QUESTION_WINDOW)
    return out


QUESTION_WINDOW = 3


def _number(v: float) -> str:
    """A number of a question, or "?" where an open exercise hides it (NaN: see exercise.redacted)."""
    return "?" if math.isnan(v) else f"{v:.4g}"
