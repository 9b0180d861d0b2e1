"""Multi-head latent attention (DeepSeek's MLA) in the session's inputs: the sidebar's latent width d_c made into W_DKV,
W_UK and W_UV factored from the person's own keys and values (presets.with_latent), and plain keys and values back.
Plain Python: the session calls these, and the Variants page reads plain attention's numbers from them."""

from __future__ import annotations

from dataclasses import replace

from ..base import presets
from ..base.case import CASE_FORMAT, Case, case_to_dict, parse_case
from .choices import NUMBERS, Controls, Inputs, options

READ = ("heads", "kv_heads", "rope_base", "rope_fraction", "w_latent", "latent_norm")  # what with_latent reads


def turned(inputs: Inputs, controls: Controls) -> Inputs:
    """The inputs with the latent width the controls ask for: made from the person's keys and values (those the
    latent was made from while it is as made: a narrower latent then a wider one loses nothing), or, for 0, those
    keys and values back (else the latent's product W_DKV W_UK, W_DKV W_UV). CaseError: numbers as typed that are no
    case yet, or a width that cannot be (presets.with_latent says why)."""
    plain = _plain(inputs, controls)
    if not controls.latent:
        return plain
    case = presets.with_latent(_case(plain, controls), controls.latent)
    made = {"w_key": case.w_key, "w_value": case.w_value, "w_latent": case.options.w_latent}
    return replace(plain, **made, latent_norm=None, plain=(plain.w_key, plain.w_value))


def plain_case(inputs: Inputs, case: Case) -> Case:
    """The session's case with plain keys and values: the person's own that its latent was made from (while the
    inputs keep them: the latent as made), else the latent's product (presets.without_latent)."""
    if case.options.w_latent is None:
        return case
    if inputs.plain is None or inputs.w_latent != case.options.w_latent:
        return presets.without_latent(case)
    numbers = case_to_dict(case)
    for name in ("w_latent", "latent_norm"):
        numbers["options"].pop(name, None)
    return parse_case(numbers | dict(zip(("w_key", "w_value"), inputs.plain, strict=True)))


def _plain(inputs: Inputs, controls: Controls) -> Inputs:
    """The inputs without a latent: the keys and values it was made from, else its product."""
    if inputs.w_latent is None:
        return inputs
    if inputs.plain is not None:
        w_key, w_value = inputs.plain
    else:
        case = presets.without_latent(_case(inputs, controls))
        w_key, w_value = case.w_key, case.w_value
    return replace(inputs, w_key=w_key, w_value=w_value, w_latent=None, latent_norm=None, plain=None)


def _case(inputs: Inputs, controls: Controls) -> Case:
    """The inputs' numbers as a case with the options with_latent and without_latent read (heads, RoPE, a latent)."""
    chosen = options(controls, inputs)
    kept = {name: chosen[name] for name in READ if chosen[name] is not None}
    numbers = {name: getattr(inputs, name) for name in NUMBERS}
    return parse_case({"format": CASE_FORMAT, **numbers, "tokens": inputs.tokens, "options": kept})
