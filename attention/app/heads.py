"""The Heads widget's steps: the counts of heads the sidebar's sizes allow, and − and + going on to the next one."""

from __future__ import annotations

from ..base.case import Widths, head_counts
from ..base.i18n import Message, msg
from .choices import Controls, Inputs


def head_choices(c: Controls, i: Inputs) -> tuple[int, ...]:
    """The numbers of heads the controls' sizes allow (the inputs' grouped key/value heads, if any, too): their
    n × n_kv scores a head (cross-attention's n_kv keys) within the limit."""
    d_key = len(i.w_key[0]) if i.kv_heads else c.d_k  # grouped heads keep w_key narrower than d_k
    return head_counts(c.n, Widths(c.d_k, d_key, c.d_v), i.kv_heads, c.dtype, c.n_kv or None)


def stepped_heads(before: int, asked: int, counts: tuple[int, ...]) -> int | None:
    """Heads as the widget's − and + step it: one off `before` goes on to the next count the sizes allow that way
    (None: there is none); any other value stays as asked, for the case to say why it cannot be used."""
    if abs(asked - before) != 1 or asked in counts:
        return asked
    way = [h for h in counts if (h > before if asked > before else h < before)]
    return (way[0] if asked > before else way[-1]) if way else None


def stepped(before: Controls, asked: int, inputs: Inputs, notices: list[Message]) -> int | None:
    """Heads stepped (−, +) to the next count the sizes allow; None, with a notice, when there is none."""
    counts = head_choices(before, inputs)
    heads = stepped_heads(before.heads, asked, counts)
    if heads is None:
        allowed = ", ".join(map(str, counts))
        notices.append(msg("notice.heads_kept", heads=before.heads, allowed=allowed, d_k=before.d_k, d_v=before.d_v))
    return heads
