"""The Decoding page's rooms: a causal model's generation (the sentence, Generate and Stop, the tokens as they come, the
timing), the player over a decoding's steps with its cache, scores and output, and the work and memory each way."""

from __future__ import annotations

import streamlit as st

from .. import models
from ..app import charts, links, pickers
from ..app.language import lang, t
from ..app.text import plain
from ..base.explain import explain
from ..base.i18n import msg, render
from . import figures, state
from .compute import (
    Sizes,
    cache_bytes,
    cache_bytes_per_token,
    cache_numbers_per_token,
    full_heads,
    model_sizes,
    without_latent,
)


def generation_controls(session) -> None:
    """The sentence, how many new tokens, Generate; the tokens as they come; the layer and head to step through."""
    view, id = session.view(state.DecodingView), state.generator(session)
    if id is None:  # no causal model offered (or none installed): what the shipped one needs, else why
        absent = next((m for m in map(models.install_message, models.SPECS) if m is not None), None)
        st.error(plain(render(lang(), absent or msg("decoding.no_causal"))))
        return
    st.caption(t("decoding.generator", model=plain(models.title(id))))
    left, right = st.columns([4, 1])
    typed = left.text_input(t("decoding.sentence"), state.sentence(session), key="decoding_sentence", max_chars=400)
    count = right.number_input(t("decoding.new_tokens"), 1, 16, view.new_tokens, key="decoding_new_tokens")
    state.choose(session, **{k: v for k, v in {"sentence": typed, "new_tokens": count}.items() if v is not None})
    asked = {"on_click": st.session_state.__setitem__, "args": ("decoding_asked", True)}  # heard before the run
    st.button(t("decoding.generate"), key="decoding_go", icon=":material/play_arrow:", type="primary", **asked)
    if st.session_state.pop("decoding_asked", False) or view.pending:  # a click, or a link's generation
        with st.status(t("decoding.generating", model=plain(models.title(id))), expanded=True) as status:
            # a click while the script runs starts a new run, which ends this one at its next element: Stop is a
            # button that does nothing but be clicked (what was heard so far is kept)
            st.button(t("decoding.stop"), key="decoding_stop", icon=":material/stop:")
            shown = st.empty()
            heard = lambda _: shown.markdown(plain("".join(session.view(state.DecodingView).heard)))  # noqa: E731
            timing = lambda k: status.update(label=t("decoding.timing_uncached", k=k, n=view.new_tokens))  # noqa: E731
            run = state.made_pending if view.pending else state.run_generation
            error = run(session, heard, timing)
            status.update(label=t("decoding.generated"), state="complete" if error is None else "error")
        links.keep(session)  # the URL links to the generation made in this run
        if error is not None:
            st.error(t("error.last_valid", error=plain(render(lang(), error.message))))
    if heard := session.view(
        state.DecodingView
    ).heard:  # a generation stopped before it ended (Stop, or a click elsewhere)
        st.warning(t("decoding.stopped", tokens=plain("".join(heard)), count=len(heard), asked=view.new_tokens))
    if (made := session.view(state.DecodingView).generation) is None:
        return
    st.markdown(f"**{plain(made.sentence)}** {plain(made.text)}")
    timing = {
        "cached": sum(made.seconds) / len(made.seconds),
        "count": len(made.seconds),
        "mib": made.cache_bytes / 2**20,
    }
    if uncached := session.view(state.DecodingView).uncached_seconds:
        timing |= {"uncached": sum(uncached) / len(uncached)}
        same = (
            t("decoding.same_tokens") if session.view(state.DecodingView).uncached_same else t("decoding.other_tokens")
        )
        st.caption(t("decoding.timing", **timing, ratio=timing["uncached"] / timing["cached"], same=same))
    else:  # stopped while it was timed without the cache
        st.caption(t("decoding.timing_cached", **timing))
    left, right = st.columns(2)
    spec = models.spec(made.run.model)  # the model that made it (the session's may have changed since)
    shown_layer, shown_head = state.layer_head(session, spec)
    layer = left.number_input(t("real.layer"), 1, spec.layers, shown_layer, key="decoding_layer")
    head = right.number_input(t("real.head"), 1, spec.heads, shown_head, key="decoding_head")
    state.choose(session, layer=int(layer), head=int(head))


def step_view(session, made, causal) -> None:
    """The player over the tokens, then step t: its cache, q_t's scores, weights and output, the causal matrix."""
    n, tokens = made.n, made.case.tokens
    t_shown = state.shown_step(session, n)
    row = st.container(horizontal=True, vertical_alignment="center")
    row.button(
        "◀", key="decoding_previous", on_click=state.go_to, args=(session, t_shown - 1, n), disabled=t_shown == 0
    )
    row.button(
        "▶", key="decoding_next", on_click=state.go_to, args=(session, t_shown + 1, n), disabled=t_shown == n - 1
    )
    st.session_state.decoding_token = t_shown
    st.select_slider(
        t("decoding.token"), range(n), format_func=lambda i: f"{i + 1} · {tokens[i]}", key="decoding_token",
        on_change=lambda: state.go_to(session, st.session_state.decoding_token, n),
    )  # fmt: skip
    step = made.steps[t_shown]
    said = {"t": t_shown + 1, "n": n, "difference": step.difference}
    status = t("decoding.step_status_cross" if made.case.cross else "decoding.step_status", **said)
    (st.success if step.agrees else st.error)(status, icon=":material/verified:")
    _explained(made, step)
    head = pickers.head_picker(causal, "decoding_head_picker", state.chosen_head(session))
    _cache(made, t_shown, head)
    _window(made, step)
    left, right = st.columns(2)
    for where, name in ((left, "scores_t"), (right, "weights_t")):
        charts.chart(figures.step_heatmap(made, t_shown, name, head, lang()), f"chart_{name}", where=where)
    first, keys = step.first, made.case.key_tokens  # the cache's first row is token `first` (0 without a window)
    key = st.selectbox(
        t("decoding.explain_label", t=t_shown + 1), range(len(step.cached)), index=0, key="decoding_explain",
        format_func=lambda j: f"{first + j + 1} · {keys[first + j]}",
    )  # fmt: skip
    index = (*(() if head is None else (head,)), 0, min(key or 0, len(step.cached) - 1))  # the query's row, key j
    for line in explain(made, "scores_t", index, lang(), step=str(t_shown + 1)).lines:
        st.markdown(plain(line))
    _whole(made, causal, step, head)
    shapes = ", ".join(f"{name} {' × '.join(map(str, shape))}" for name, shape in step.shapes().items())
    st.caption(t("decoding.shapes", shapes=shapes))


def _explained(made, step) -> None:
    """What step t computes, in words: one query against the cache it appended to (or its latent), or with
    cross-attention one target token's query against the source's cache, made once."""
    latent = "latent_cache" in step.tensors  # multi-head latent attention: the cache holds latents
    said = {"t": step.t + 1, "keys": len(step.cached), "token": plain(made.case.tokens[step.t])}
    if made.case.cross:
        st.write(t("decoding.step_explained_latent_cross" if latent else "decoding.step_explained_cross", **said))
    else:
        st.write(t("decoding.step_explained_latent" if latent else "decoding.step_explained", **said))


def _whole(made, causal, step, head: int | None) -> None:
    """Output t beside the whole (causal) computation's scores with row t outlined; with cross-attention, then the
    alignment so far: each decoded target token's weights over the source tokens."""
    t_shown, first, cross = step.t, step.first, made.case.cross
    left, right = st.columns(2)
    charts.chart(figures.step_heatmap(made, t_shown, "output_t", None, lang()), "chart_output_t", where=left)
    whole = charts.figure(figures.causal_heatmap, causal, head)  # kept: n × n at the limits
    charts.chart(figures.row_outlined(whole, t_shown, lang(), first, cross), "chart_causal", where=right)
    st.caption(t("decoding.causal_caption_cross" if cross else "decoding.causal_caption", t=t_shown + 1))
    if (window := made.case.options.window) is not None:
        st.caption(t("decoding.window_causal_caption", window=window, t=t_shown + 1, first=first + 1))
    if cross:  # the translation's alignment: which source tokens each target token looked at
        charts.chart(figures.alignment(made, t_shown, head, lang()), "chart_alignment")
        st.caption(t("decoding.alignment_caption", t=t_shown + 1, token=plain(made.case.tokens[t_shown])))


def _cache(made, t_shown: int, head: int | None) -> None:
    """The cache after step t: its keys and values; or with multi-head latent attention its latents, then the keys
    and values made from them, and what that saves (N numbers a token instead of M)."""
    pair, cross = ("k_cache", "v_cache"), made.case.cross
    if "latent_cache" in made.steps[t_shown].tensors:
        charts.chart(figures.step_heatmap(made, t_shown, "latent_cache", None, lang()), "chart_latent_cache")
        sizes = Sizes.of(made.case)
        plain_sizes = without_latent(sizes)
        said = {"d_c": made.case.d_c, "kv": cache_numbers_per_token(plain_sizes), "kv_heads": sizes.kv_heads,
                "d_head": sizes.d_head, "d_value_head": sizes.d_value_head, "t": t_shown + 1}  # fmt: skip
        said |= {"n_kv": made.case.n_kv}
        st.caption(t("decoding.latent_cache_caption_cross" if cross else "decoding.latent_cache_caption", **said))
        pair = ("k_from_latent", "v_from_latent")
    left, right = st.columns(2)
    for where, name in zip((left, right), pair, strict=True):
        charts.chart(figures.step_heatmap(made, t_shown, name, head, lang()), f"chart_{name}", where=where)
    said = {"t": t_shown + 1, "n_kv": made.case.n_kv}
    if cross:  # the source's, made once: the same at every step
        st.caption(t("decoding.from_latent_caption_cross" if pair[0] == "k_from_latent" else
                     "decoding.cache_caption_cross", **said))  # fmt: skip
    else:
        st.caption(t("decoding.from_latent_caption" if pair[0] == "k_from_latent" else "decoding.cache_caption",
                     **said))  # fmt: skip


def _window(made, step) -> None:
    """Under a sliding window: which tokens the cache holds after this step, how many it evicted, and the one it
    evicted at this step (the key and value of token t − window)."""
    window = made.case.options.window
    if window is None:
        return
    said = {"window": window, "t": step.t + 1, "first": step.first + 1, "held": len(step.cached)}
    latent, said = "latent_cache" in step.tensors, said | {"evicted": step.evicted}  # it holds latents, or k and v
    st.info(t("decoding.window_caption_latent", **said) if latent else t("decoding.window_caption", **said),
            icon=":material/info:")  # fmt: skip
    if step.t >= window:  # the cache was full: the oldest key and value (or latent) left as token t's came in
        gone = step.t - window
        label = plain(made.case.tokens[gone])
        said = {"window": window, "token": gone + 1, "label": label, "t": step.t + 1}
        gone_now = (
            t("decoding.window_evicted_now_latent", **said) if latent else t("decoding.window_evicted_now", **said)
        )
        st.caption(gone_now)


def work_and_memory(session, made) -> None:
    """Multiply-adds per token with and without the cache; the cache's bytes, here and for the model that
    generates."""
    st.subheader(t("decoding.work_header"))
    sizes = Sizes.of(made.case)
    st.dataframe(figures.work_table(sizes, made.case.n, lang()), hide_index=True, key="decoding_work")
    st.caption(t("decoding.work_caption_cross" if sizes.source is not None else "decoding.work_caption"))
    if sizes.latent is not None:  # the keys and values made again from the latents at each step: counted
        st.caption(t("decoding.work_latent_caption"))
    st.subheader(t("decoding.memory_header"))
    st.dataframe(figures.memory_table(sizes, made.case.n, lang()), hide_index=True, key="decoding_memory")
    if sizes.latent is not None:  # what the latent saves: both numbers, and why DeepSeek caches it
        per_token, plain_per_token = cache_bytes_per_token(sizes), cache_bytes_per_token(without_latent(sizes))
        said = {"d_c": sizes.latent, "kv": cache_numbers_per_token(without_latent(sizes)), "per_token": per_token,
                "plain": plain_per_token, "share": per_token / plain_per_token}  # fmt: skip
        st.caption(t("decoding.memory_latent_caption", **said))
    if sizes.source is not None:  # the source's keys and values: made once, fixed however long the target
        said = {"n_kv": sizes.source, "held": cache_bytes(sizes, made.case.n), "tokens": made.case.n}
        st.caption(t("decoding.memory_cross", **said))
    if sizes.window is not None:  # the cache's size stops growing at the window
        n, full = made.case.n, cache_bytes_per_token(sizes) * made.case.n
        st.caption(t("decoding.memory_window", window=sizes.window, held=cache_bytes(sizes, n), tokens=n, full=full))
    if (id := state.generator(session)) is None:
        return
    sizes, tokens = model_sizes(models.spec(id)), 20
    per_token, full = cache_bytes_per_token(sizes), cache_bytes_per_token(full_heads(sizes))
    sizes_said = {"layers": sizes.layers, "kv_heads": sizes.kv_heads, "heads": sizes.heads, "d_head": sizes.d_head}
    after = {"after_kib": per_token * tokens / 1024, "full_kib": full * tokens / 1024, "saved": 1 - per_token / full}
    said = {"model": plain(models.title(id)), "per_token": per_token, "tokens": tokens, **sizes_said, **after}
    st.write(t("decoding.model_memory", **said))
    st.dataframe(figures.memory_table(sizes, tokens, lang()), hide_index=True, key="decoding_memory_model")
