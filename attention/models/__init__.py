"""The real models, registered: the shipped packages (shipped.py) and every model the server offers (offered.py: the
Hugging Face cache, ATTENTION_MODELS), each known by a stable id ("smollm2", "hf:org/name", "local:relative/path").
`spec(id)` gives any offered model's spec without loading it (from its config or its file's header), `loaded(id)` the
model, from the process's one cache (offered.open_offer: two at most, shared by every session). Nothing outside this
registry, shipped.py, offered.py, sources.py and the adapters names a model: the rest asks these functions.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

from ..base.case import CaseError, rotary_dims
from ..base.i18n import Message, msg
from ..base.numbers import size_text
from . import offered as offering
from . import sources
from .model import (
    MAX_SENTENCE_CHARS,
    MAX_SENTENCE_TOKENS,
    Model,
    Run,
    Spec,
    head_case,
    head_weights,
    latent_too_wide,
    layer_case,
)
from .shipped import INSTALL, MINILM, SMOLLM2, SPECS, ModelMissing, files, install_message, load, missing

EXAMPLES = (
    "The cat sat on the mat because it was tired",
    "The capital of France is",
    "Alice gave Bob the book, and he thanked her",
    "Attention is all you need",
)


# The offered models, by id ---------------------------------------------------------------------------------------

RESCAN = 30  # seconds an answer of offers() stands: a model added to a folder shows up after this
ENVIRONMENT = ("ATTENTION_MODELS", "HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME")  # where offers are looked for


def offers() -> dict[str, offering.Offer]:
    """Every model offered here (offered.offered), by its id; looked for again after RESCAN seconds."""
    return _offers(tuple(os.environ.get(k) for k in ENVIRONMENT), int(time.monotonic() // RESCAN))


@functools.lru_cache(maxsize=4)
def _offers(where: tuple, _period: int) -> dict[str, offering.Offer]:
    env = {k: v for k, v in zip(ENVIRONMENT, where, strict=True) if v is not None}
    return {offer.id: offer for offer in offering.offered(env)}


def ids() -> tuple[str, ...]:
    """The models a person can pick: every offered one, then a shipped one not installed (picked, it says how)."""
    found = offers()
    return (*found, *(name for name in SPECS if name not in found))


def spec(id: str) -> Spec:
    """The spec of any model a person can pick, from its config or its file's header (no weights read); KeyError
    for an id not offered here, CaseError (naming the file) for one that cannot be opened."""
    if id in SPECS:
        return SPECS[id]
    found = offers()[id]
    if found.problem is not None:
        raise CaseError(found.id, found.problem)
    return found.spec


def problem(id: str) -> Message | None:
    """Why the model cannot be loaded here (not installed, broken, past the budget), before anything is read."""
    if id in SPECS and (absent := install_message(id)) is not None:
        return absent
    try:
        found = spec(id)  # a broken one: the file and what is wrong with it
        offering.check_budget(offers()[id])  # both numbers
        if found.latent is not None and (wide := latent_too_wide(found)) is not None:  # W_Q or W_DKV past a case
            raise CaseError(found.title, wide)
    except CaseError as e:
        return msg("notice.model_refused", model=title(id), error=e.problem)  # its problem names the file
    return None


def title(id: str) -> str:
    """The model as people name it: a shipped one's title, another's id without its kind ("org/name")."""
    return SPECS[id].title if id in SPECS else id.partition(":")[2] or id


def default_id() -> str:
    """The model a person sees first: the first offered one whose heads open, the first shipped one otherwise."""
    return next((id for id in ids() if problem(id) is None), next(iter(SPECS)))


def causal_id(id: str | None = None) -> str | None:
    """This model when it is causal (it generates), else the first offered causal one that opens; None when none."""
    for each in (id, *ids()):
        if each is not None and each in ids() and problem(each) is None and spec(each).causal:
            return each
    return None


def about(spec: Spec) -> Message:
    """The model in one caption: a shipped one's own words, another's made from its spec."""
    if spec.name in SPECS:
        return msg(f"real.about_{spec.name}")
    if spec.decoder_layers:  # an encoder-decoder: its two stacks (the pages show its encoder's heads)
        return msg("real.about_encoder_decoder", family=spec.model_type, layers=spec.layers,
                   decoder_layers=spec.decoder_layers, heads=spec.heads, head_dim=spec.head_dim,
                   positions=_positions(spec))  # fmt: skip
    return msg(
        "real.about_model", kind=msg("real.about_causal" if spec.causal else "real.about_encoder"),
        family=spec.model_type, layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads, head_dim=spec.head_dim,
        positions=_positions(spec),
    )  # fmt: skip


def _positions(spec: Spec) -> Message:
    """How the model knows where a token is: ALiBi's bias, T5's relative bias, learned embeddings, RoPE (scaled or
    not)."""
    if spec.alibi is not None:
        return msg("real.about_alibi")
    if spec.relative_buckets:
        return msg("real.about_relative")
    if spec.rope_base is None:
        return msg("real.about_learned")
    return msg("real.about_rope_scaled", kind=spec.rope_scaling) if spec.rope_scaling else msg("real.about_rope")


def label(id: str) -> Message:
    """The picker's line for a model: its name, family, layers × heads, size on disk and in float32."""
    found, name = offers().get(id), title(id)
    if found is None:  # a shipped model not installed
        return msg("real.pick_absent", model=name)
    if found.problem is not None:
        return msg("real.pick_broken", model=name)
    over = found.float32_bytes > offering.budget()  # said before it is picked
    family = found.family if found.spec is None else family_line(found.spec)  # its attention said with its family
    return msg(
        "real.pick_over" if over else "real.pick", model=name, family=family, layers=found.layers,
        heads=found.heads, disk=size_text(found.disk_bytes), float32=size_text(found.float32_bytes),
    )  # fmt: skip


def family_line(spec: Spec) -> str | Message:
    """The model's family and, where its layers differ from plain causal attention, how: "mistral · sliding 3 on every
    layer", "smollm3 · NoPE on every 4th layer", "gemma2 · sliding 4096 on odd layers · softcap 50", "bloom · ALiBi",
    "gpt_neox · RoPE on 25% of each head", "phi3 · RoPE on 75% of each head", "gpt_oss · sliding 128 on odd layers ·
    sinks", "olmo2 · q/k norm over the width", "t5 · encoder-decoder · relative bias 32 buckets",
    "deepseek_v3 · latent 512 + rotary 64 · MoE 64 experts, 6 active"."""
    parts = [msg("real.attention_alibi")] if spec.alibi is not None else []
    if spec.decoder_layers:  # BART's, Marian's, T5's: an encoder, a decoder and its cross-attention
        parts.append(msg("real.attention_encoder_decoder"))
    if spec.relative_buckets:  # T5's learned bias by distance
        parts.append(msg("real.attention_relative", buckets=spec.relative_buckets))
    if spec.norm_width:  # OLMo 2's: a head's q and k normed with every other head's
        parts.append(msg("real.attention_norm_width"))
    if spec.latent is not None:  # DeepSeek's MLA: its latent, and its rotary key (the dims RoPE turns in each head)
        parts.append(msg("real.attention_latent", latent=spec.latent,
                         rotary=rotary_dims(spec.head_dim, spec.rope_fraction)))  # fmt: skip
    elif spec.rope_fraction is not None:
        parts.append(msg("real.attention_partial_rope", percent=f"{spec.rope_fraction * 100:g}"))
    windows = {w for w in spec.windows or () if w is not None}
    for window in sorted(windows):  # one part per size of window (a model has one)
        layers = tuple(i for i, w in enumerate(spec.windows) if w == window)
        parts.append(msg("real.attention_sliding", window=window, layers=_layers(layers, spec.layers)))
    if spec.no_rope:
        parts.append(msg("real.attention_nope", layers=_layers(spec.no_rope, spec.layers)))
    if spec.sinks:  # gpt-oss's learned sink logit per head
        parts.append(msg("real.attention_sinks"))
    if spec.softcap is not None:  # Gemma 2's cap on the scores
        parts.append(msg("real.attention_softcap", cap=spec.softcap))
    if spec.experts is not None:  # a mixture of experts' feed-forward: how many, and how many a token takes
        parts.append(msg("real.attention_moe", experts=spec.experts[0], active=spec.experts[1]))
    if not parts:
        return spec.model_type
    attention = parts[0]
    for part in parts[1:]:
        attention = msg("real.attention_both", first=attention, second=part)
    return msg("real.family_with", family=spec.model_type, attention=attention)


def _layers(chosen: tuple[int, ...], layers: int) -> Message:
    """Some of a model's layers (0-based) as people count them: every layer, every k-th (k ≥ 4), the odd ones (from
    1, of 4 or more), all but every k-th (k ≥ 4), or a list from 1."""
    if len(chosen) == layers:
        return msg("real.layers_every")
    if layers >= 4 and chosen == tuple(range(0, layers, 2)):  # Gemma 2's sliding layers
        return msg("real.layers_odd")
    others = tuple(i for i in range(layers) if i not in chosen)  # Gemma 3's: all but every k-th (its global ones)
    if others and others[0] >= 3 and others == tuple(range(others[0], layers, others[0] + 1)):
        return msg("real.layers_but_nth", k=others[0] + 1)
    k = chosen[0] + 1
    if k >= 4 and chosen == tuple(range(k - 1, layers, k)):
        return msg("real.layers_nth", k=k)
    return msg("real.layers_list", layers=", ".join(str(i + 1) for i in chosen))


def sizes(id: str) -> Message | None:
    """The model's weights on disk and in float32, against this server's budget; None for one not offered."""
    found = offers().get(id)
    if found is None or found.problem is not None:
        return None
    return msg(
        "real.sizes",
        disk=size_text(found.disk_bytes),
        float32=size_text(found.float32_bytes),
        budget=size_text(offering.budget()),
    )


# Loading ---------------------------------------------------------------------------------------------------------


def open(where: str) -> Model:  # models.open, as an exported script reads it (no builtin open is used here)
    """A shipped model by its name, a model in this machine's Hugging Face cache by its id ("hf:org/name"), or a
    model's folder or .gguf file (an exported script's)."""
    if where in SPECS:
        return loaded(where)
    if where.startswith("hf:"):
        snapshot = offering.cached(where.removeprefix("hf:"))
        if snapshot is None:
            raise CaseError(where, msg("error.model_not_cached", cache=str(offering.hub_cache(os.environ))))
        return sources.open_model(snapshot)
    return sources.open_model(Path(where))


def home(id: str) -> str | None:
    """How an exported script names the model: None for a shipped one (its package finds it), a cached one's id (the
    person's own Hugging Face cache finds it), else its folder's or file's name, which the person sets to where it
    is on their machine."""
    found = offers().get(id)
    if id in SPECS or found is None or found.path is None:
        return None
    return id if id.startswith("hf:") else found.path.name


def loaded(id: str, progress=None) -> Model:
    """Any offered model, from the process's one cache of loaded models (offered.open_offer: two at most, shared by
    every session); progress(read, total) told while it loads. ModelMissing for a shipped one not installed,
    CaseError for one broken or past the budget."""
    message = install_message(id) if id in SPECS else None
    if message is not None:
        raise ModelMissing(message)
    return offering.open_offer(offers()[id], progress=progress)


__all__ = [
    "EXAMPLES", "INSTALL", "MAX_SENTENCE_CHARS", "MAX_SENTENCE_TOKENS", "MINILM", "SMOLLM2", "SPECS", "Model",
    "ModelMissing", "Run", "Spec", "about", "causal_id", "default_id", "files", "head_case", "head_weights", "home",
    "ids", "install_message", "label", "layer_case", "load", "loaded", "missing", "offers", "open", "problem", "size",
    "sizes", "spec", "title",
]  # fmt: skip
