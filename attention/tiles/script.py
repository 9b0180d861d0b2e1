"""The exported script's tiled loop: the eight steps, then FlashAttention's online softmax checked against step 7."""

from __future__ import annotations

from ..base.case import Case, with_options
from ..base.numbers import approx
from ..forward.compute import attend
from ..forward.script import relative_lines
from ..forward.script import to_script as eight_steps
from .compute import case_blocks, check, tiled

PRINT_TILES_UP_TO = 16  # n: each tile's m and ℓ are printed up to here (at n = 1024 the loop has 256 tiles)


def to_script(case: Case, block_q: int, block_k: int) -> str:
    """The eight steps with the exact softmax (a weights override is not attention), then the tiled loop."""
    case = case if case.options.weights_override is None else with_options(case, weights_override=None)
    body = eight_steps(case).replace("Self-attention in eight steps", "Self-attention in eight steps, then in tiles", 1)
    return body + "\n" + "\n".join(block(case, block_q, block_k)) + "\n"


def shown(case: Case, block_q: int, block_k: int) -> str:
    """The tiled loop as the Tiles page shows it (the exported script runs the eight steps before it)."""
    return "\n".join(block(case, block_q, block_k))


def block(case: Case, block_q: int, block_k: int) -> list[str]:
    """The tiled loop, reading the script's queries, keys, values and step 7's outputs."""
    heads = case.options.heads > 1
    latent = [  # the tiles read step 3's keys and values, which multi-head latent attention made from the latent
        "# Multi-head latent attention: the keys and values the tiles read are step 3's, made from the latent",
        "# (latent @ w_key, latent @ w_value); a tile's keys are as the latent made them, nothing else changes.",
    ]
    cross = [  # step 3 made the keys and values from the source's x_kv: n_kv of them, the key tiles' range
        "# Cross-attention: step 3 made the keys and values from the source's x_kv, so the score matrix is n × n_kv:",
        "# query tiles over the target's n tokens, key tiles over the source's n_kv (no causal mask across them).",
    ]
    lines = [
        "# Attention in tiles (FlashAttention's online softmax): the same outputs, a query tile against a key tile at",
        "# a time, never the n × n score matrix. m: each query's largest score so far; l: the sum of e^(s − m) so far.",
        *(latent if case.options.w_latent is not None else []),
        *(cross if case.cross else []),
        f"B_q, B_k = {block_q}, {block_k}  # queries and keys per tile",
        "q_all, k_all, v_all = queries, keys, values"
        if heads
        else "q_all, k_all, v_all = queries[None], keys[None], values[None]  # (1, n, d): one head",
        "n, n_kv = q_all.shape[1], k_all.shape[1]  # queries and keys (cross-attention: the source's n_kv)",
        "tiled = v_all.new_empty(v_all.shape[0], n, v_all.shape[-1])  # (h, n, d_v/h): filled a query tile at a time",
        "skipped = 0",
        *_constants(case),
        "for q0 in range(0, n, B_q):",
        "    q = q_all[:, q0 : q0 + B_q]  # (h, B_q, d_k/h)",
        *_start(case),
        "    partial = torch.zeros(*q.shape[:-1], v_all.shape[-1], dtype=q.dtype)  # (h, B_q, d_v/h): Σ e^(s − m) · v",
        "    for k0 in range(0, n_kv, B_k):",
    ]
    return lines + _tile(case) + _end(case)


def _constants(case: Case) -> list[str]:
    """The options of today's models the loop reads: the window, ALiBi's slopes, the cap, the sinks, T5's table."""
    o, dtype, lines = case.options, f"torch.{case.options.dtype}", []
    if o.window is not None:
        lines.append(f"WINDOW = {o.window}  # sliding window: query i sees keys i − WINDOW < j ≤ i")
    if o.alibi is not None:
        lines.append(f"SLOPES = torch.tensor({list(o.alibi)!r}, dtype={dtype})  # ALiBi's m_h, one per head")
    if o.softcap is not None:
        lines.append(f"SOFTCAP = {o.softcap!r}  # Gemma 2: s → cap · tanh(s / cap)")
    if o.sinks is not None:
        lines.append(f"SINKS = torch.tensor({list(o.sinks)!r}, dtype={dtype})  # gpt-oss's sink logit s_h, per head")
    return lines + ([] if o.relative_bias is None else ["", *relative_lines(case)])


def _start(case: Case) -> list[str]:
    """Each query's running m and ℓ before the first key tile: −∞ and 0, or under sinks the head's sink."""
    if case.options.sinks is None:
        return [
            '    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)  # (h, B_q)',
            "    l = torch.zeros(q.shape[:-1], dtype=q.dtype)  # (h, B_q)",
        ]
    return [
        "    m = SINKS[:, None].expand(q.shape[:-1]).clone()  # (h, B_q): each query starts from its head's sink s_h",
        "    l = torch.ones(q.shape[:-1], dtype=q.dtype)  # the sink's e^(s_h − m) = 1, with no value (partial: 0)",
    ]


def _tile(case: Case) -> list[str]:
    """The inner loop's body: one key tile's scores, the new maximum, the rescaling, ℓ and the partial output."""
    o, lines = case.options, []
    scale = {"none": None, "sqrt_dk": f"(1 / math.sqrt({case.d_head}))"}.get(o.scale, repr(o.scale))
    factor = " * ".join(f for f in (scale, f"(1 / {float(o.temperature)!r})" if o.temperature != 1 else None) if f)
    masked = o.mask is not None or o.window is not None
    lines += _tile_mask(case)
    if masked:
        lines += [
            "        if not allowed.any():  # every score of the tile masked: skip it (above the diagonal, behind",
            "            skipped += 1  # the window)",
            "            continue",
        ]
    lines.append("        s = q @ k_all[:, k0 : k0 + B_k].mT  # (h, B_q, B_k): this tile's scores alone")
    if factor:
        lines.append(f"        s = s * {factor}  # as step 4 scales the scores")
    if o.alibi is not None:
        lines.append("        s = s - SLOPES[:, None, None] * (rows[:, None] - cols[None, :])  # ALiBi: i, j absolute")
    if o.relative_bias is not None:
        lines.append("        s = s + relative_bias[:, bucket(cols[None, :] - rows[:, None])]  # T5: t_h[bucket]")
    if o.softcap is not None:
        lines.append("        s = SOFTCAP * torch.tanh(s / SOFTCAP)  # the cap, before the mask")
    if masked:
        lines.append('        s = s.masked_fill(~allowed, float("-inf"))')
    lines += [
        "        m_new = torch.maximum(m, s.amax(dim=-1))  # (h, B_q): the largest score so far",
        '        shift = m_new.masked_fill(m_new == float("-inf"), 0.0)  # no key allowed yet: no −∞ − (−∞)',
        "        rescale = torch.exp(m - shift)  # what was summed under the old maximum, brought to the new one",
        "        terms = torch.exp(s - shift[..., None])  # (h, B_q, B_k): each at most 1, so nothing overflows",
        "        l = l * rescale + terms.sum(dim=-1)",
        "        partial = partial * rescale[..., None] + terms @ v_all[:, k0 : k0 + B_k]",
        "        m = m_new",
    ]
    if case.n <= PRINT_TILES_UP_TO:
        lines.append(
            '        print(f"query tile {q0 // B_q + 1}, key tile {k0 // B_k + 1}: m =", m.tolist(), "l =", l.tolist())'
        )
    return lines


def _tile_mask(case: Case) -> list[str]:
    """The tile's query and key indices (where the mask, the window or a bias needs them) and its part of the mask."""
    o, lines = case.options, []
    if o.mask == "causal" or o.window is not None or o.biased:
        lines.append("        rows, cols = torch.arange(q0, min(q0 + B_q, n)), torch.arange(k0, min(k0 + B_k, n_kv))")
    if o.mask == "causal" or o.window is not None:
        lines.append("        allowed = rows[:, None] >= cols[None, :]  # the causal mask's tile, made for it alone")
    if isinstance(o.mask, tuple):
        given = "mask[q0 : q0 + B_q, k0 : k0 + B_k] != 0  # the case's mask, this tile of it"
        lines.append(f"        allowed = {given}" if o.window is None else f"        allowed &= {given}")
    if o.window is not None:
        lines.append("        allowed &= rows[:, None] - cols[None, :] < WINDOW  # keys within the window: i − j < W")
    return lines


def _end(case: Case) -> list[str]:
    """After the loops: each query tile's partial ÷ ℓ, the heads joined, and the check against step 7."""
    o = case.options
    lines = [
        "    tiled[:, q0 : q0 + B_q] = partial / torch.where(l > 0, l, 1.0)[..., None]  # l = 0: no key allowed, 0",
        "tiled_outputs = tiled.transpose(0, 1).flatten(1)  # (n, d_v): the heads side by side",
    ]
    if o.w_out is not None:
        lines.append("tiled_outputs = tiled_outputs @ w_out")
    lines += [
        "difference = (tiled_outputs - outputs).abs().max().item()",
        "# each number within float rounding of step 7's: the tolerance the eight steps' check computed (the one rule)",
        "assert within(tiled_outputs, outputs, tolerance), difference",
        'print("tiles skipped (wholly masked):", skipped)',
        'print("tiled outputs equal step 7\'s: largest difference", difference)',
    ]
    return lines


def tiles_text(case: Case, block_q: object = None, block_k: object = None) -> tuple[str, bool]:
    """The CLI's report: each tile's m and ℓ (of its first query, head 1; every tile up to KEEP_ALL_MAX_N), the
    skipped tiles, and the check against step 7 of the eight steps; and whether they agree."""
    b_q, b_k = case_blocks(case, block_q, block_k)
    run = tiled(case, b_q, b_k)
    agreement = check(run, attend(run.case))
    lines = [
        f"tiles of {b_q} × {b_k}: {run.query_tiles} query tiles × {run.key_tiles} key tiles = {run.tiles}"
        + (f" (key tiles over the {case.n_kv} source tokens: cross-attention), " if case.cross else ", ")
        + f"{len(run.skipped)} skipped (wholly masked"
        + (
            f", {sum(run.behind_window(*tile) for tile in run.skipped)} of them behind the window of "
            f"{case.options.window})"
            if case.options.window is not None
            else ")"
        )
    ]
    for v in run.visits:
        where = f"query tile {v.query_tile + 1}, key tile {v.key_tile + 1}"
        if v.skipped:
            lines.append(f"{where}: skipped")
            continue
        t = {k: approx(v.tensors[k][0, 0].item()) for k in ("m_before", "m", "rescale", "l_before", "l")}
        lines.append(
            f"{where}: m {t['m_before']} → {t['m']}, rescale e^(m_old − m_new) = {t['rescale']}, "
            f"ℓ {t['l_before']} → {t['l']} (query {v.queries.start + 1}, head 1)"
        )
    verdict = "equal step 7's" if agreement.agrees else "DIFFER from step 7's"
    lines.append(
        f"tiled outputs {verdict}: largest difference {agreement.difference:.3g}, {agreement.relative:.3g} of step 7's "
        f"largest number (float rounding allows {agreement.tolerance:.2g} there)"
    )
    return "\n".join(lines), agreement.agrees
