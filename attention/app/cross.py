"""Cross-attention in the session's inputs: the sidebar's source rows n_kv made into x_kv (kept rows, new ones zeros or
seeded random numbers as the fill says, labelled Source 1, …), set aside when it is turned off (to come back when it
is turned on again), and the options that need one sentence refused while it is on. Plain Python: the session calls
these."""

from __future__ import annotations

from dataclasses import replace

from ..base import presets
from ..base.case import MAX_N
from ..base.i18n import Message, msg
from .choices import Controls, Inputs

# The controls that place a key by its distance from the query within one sentence: the case refuses each for a
# cross case (base/case.py's WITHIN_ONE_SENTENCE and the causal mask), and the sidebar offers none while it is on
ONE_SENTENCE = ("mask", "window", "alibi", "relative", "rope")


def one_sentence(c: Controls) -> tuple[str, ...]:
    """The controls on that need queries and keys from one sentence: a causal mask, a window, ALiBi, T5, RoPE."""
    on = {"mask": c.mask == "causal", "window": c.window > 0, "alibi": c.alibi, "relative": c.relative, "rope": c.rope}
    return tuple(name for name in ONE_SENTENCE if on[name])


def accepted(before: Controls, changes: dict[str, object], notices: list[Message]) -> dict[str, object]:
    """The changes that can be together, with a notice for the others: cross-attention is not turned on while an
    option that needs one sentence is on (the case stays as it was, and the notice names those to turn off first),
    nor is such an option turned on while cross-attention is."""
    after = replace(before, **changes)
    if not after.n_kv or not (names := one_sentence(after)):
        return changes
    if not before.n_kv:
        notices.append(msg("notice.cross_refused", options=listed(names)))
        return {k: v for k, v in changes.items() if k != "n_kv"}
    notices.append(msg("notice.cross_option_refused", options=listed(names)))
    return {k: v for k, v in changes.items() if k not in names}


def listed(names: tuple[str, ...]) -> Message:
    """The controls as the sidebar names them, one after another, in the reader's language."""
    first = msg(f"cross.option_{names[0]}")
    return first if len(names) == 1 else msg("cross.and", first=first, rest=listed(names[1:]))


def turned(inputs: Inputs, c: Controls) -> Inputs:
    """The inputs with the source rows the controls ask for: x_kv at n_kv rows of x's width (its own rows kept, else
    those set aside when it was turned off, new cells as the fill says), or, for 0, x_kv set aside. A custom mask
    (n × n_kv) is made again by choices.to_edit: the keys are others now."""
    if not c.n_kv:
        aside = (inputs.x_kv, inputs.tokens_kv) if inputs.x_kv is not None else inputs.set_aside
        return replace(inputs, x_kv=None, tokens_kv=None, set_aside=aside, mask=None)
    rows, tokens = (inputs.x_kv, inputs.tokens_kv) if inputs.x_kv is not None else inputs.set_aside or (None, None)
    x_kv = presets.source_rows(rows, c.n_kv, c.d_in, c.fill, c.seed)
    if inputs.bias:  # a model's biases come in through x's last column of ones: the new source rows' too
        x_kv = [row if i < len(rows or ()) else [*row[:-1], 1.0] for i, row in enumerate(x_kv)]
    tokens_kv = presets.labels(tokens, c.n_kv, "Source")
    return replace(inputs, x_kv=_grid(x_kv), tokens_kv=tuple(tokens_kv), set_aside=None, mask=None)


def rows_to_turn_on(c: Controls, inputs: Inputs) -> int:
    """The source rows the sidebar's switch turns cross-attention on with: those set aside, else one more than x's
    (a sentence of another length, so that the scores' n × n_kv shape shows it)."""
    return len(inputs.set_aside[0]) if inputs.set_aside is not None else min(c.n + 1, MAX_N)


def _grid(rows: list) -> tuple:
    return tuple(tuple(row) for row in rows)
