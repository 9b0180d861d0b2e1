"""Decoding with a KV cache against the whole causal computation (the core's causal trace and PyTorch's SDPA with
is_causal), for every option; its refusal of other masks, its work and memory, the session, link, CLI, script,
notebook, and the Decoding page."""

import contextlib
import io
import json
import random
import runpy
from dataclasses import replace

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import attend
from attention.__main__ import main
from attention.app.links import open_link
from attention.app.session import Session
from attention.base.case import MODERN, CaseError, case_to_dict, parse_case, with_options
from attention.base.explain import Context, explain
from attention.base.files import case_to_link, dump_case
from attention.base.i18n import render
from attention.base.presets import article, random_case
from attention.base.record import compare
from attention.decoding import figures
from attention.decoding.compute import (
    MAX_DECODE_N,
    Sizes,
    cache_bytes,
    cache_bytes_per_token,
    cache_numbers_per_token,
    decodable,
    decode,
    full_heads,
    measured_cache_bytes,
    model_sizes,
    multiply_adds,
    without_latent,
)
from attention.decoding.script import decoding_script
from attention.decoding.state import DecodingView, link
from attention.forward import oracle
from attention.forward.compute import tolerance
from attention.forward.oracle import flex_outputs
from attention.models import SMOLLM2
from tests.apptest import APP, charts, session
from tests.cases import QK_NORM, olmo_head, with_keys_sentence, with_latent


def latent_case(seed: int, norm: bool | None = None, **options):
    """A random case made multi-head latent attention (tests.cases.with_latent: W_DKV, W_UK, W_UV, the decoupled
    rotary key where it has partial rotary, maybe the latent's norm)."""
    d_k, d_v = options.pop("d_k", 8), options.pop("d_v", 4)
    plain = random_case(n=options.pop("n", 6), d_k=d_k, d_v=d_v, seed=seed, **options)
    return parse_case(with_latent(case_to_dict(plain), random.Random(seed), norm=norm))


W_OUT = [[0.5, -1.0, 0.25], [1.5, 0.0, -0.5], [-2.0, 1.0, 0.75], [0.1, 0.2, -0.3]]  # (d_v = 4, d_out = 3)
CASES = {
    "article (no mask, rounded weights)": article(),
    "one head, causal": random_case(n=6, seed=1, mask="causal"),
    "sqrt_dk, temperature 0.5": random_case(n=5, seed=2, scale="sqrt_dk", temperature=0.5, mask="causal"),
    "scale 0.3, float64": random_case(n=7, seed=3, scale=0.3, dtype="float64", mask="causal"),
    "2 heads, w_out": random_case(n=5, d_k=4, d_v=4, seed=4, heads=2, w_out=W_OUT, mask="causal"),
    "4 heads sharing 2 (grouped)": random_case(n=6, d_k=8, d_v=8, seed=5, heads=4, kv_heads=2, scale="sqrt_dk"),
    "RoPE": random_case(n=6, d_k=4, seed=6, rope_base=10_000.0, mask="causal"),
    "RoPE at given positions, grouped, temperature": random_case(
        n=5, d_k=8, d_v=4, seed=7, heads=4, kv_heads=1, rope_base=100.0, positions=[3, 9, 4, 20, 21], temperature=2.0
    ),
    "scaled RoPE (a model's own frequency per pair)": random_case(
        n=5, d_k=4, seed=9, rope_base=500.0, rope_frequencies=[0.7, 0.02], mask="causal"
    ),
    "q/k norm, RoPE, grouped": random_case(
        n=6,
        d_k=8,
        d_v=4,
        seed=10,
        heads=2,
        kv_heads=1,
        rope_base=100.0,
        mask="causal",
        **QK_NORM,
    ),
    "OLMo 2's head (norm_rest), RoPE": random_case(
        n=6, d_k=4, d_v=4, seed=12, rope_base=100.0, mask="causal", **olmo_head(6)
    ),
    "n = 40, 8 heads sharing 2": random_case(n=40, d_in=16, d_k=32, d_v=32, seed=8, heads=8, kv_heads=2),
    "MLA: latent with its norm, decoupled RoPE key, grouped": latent_case(
        15, norm=True, heads=2, kv_heads=1, rope_base=100.0, rope_fraction=0.5, mask="causal"
    ),
}
FP32 = {"rtol": 1.3e-6, "atol": 1e-5}


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal as float32 sums in another order are: within 1e-5 of the largest number (outputs reach 100 at n = 40)."""
    torch.testing.assert_close(
        actual, expected.to(actual.dtype), rtol=1e-5, atol=1e-5 * (1 + expected.abs().max().item())
    )


def sdpa(case) -> torch.Tensor:
    """PyTorch's fused attention with is_causal on the case's queries, keys and values (the core's, after RoPE)."""
    trace = attend(decodable(case))
    q, k, v = (trace[name] for name in ("queries", "keys", "values"))  # (h?, n, d), keys repeated per query head
    scale = (decodable(case).options.scale, case.options.temperature)
    multiplier = {"none": 1.0, "sqrt_dk": case.d_head**-0.5}.get(scale[0], scale[0]) / scale[1]
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=multiplier)
    out = out.transpose(0, 1).flatten(1) if out.dim() == 3 else out
    w_out = case.options.w_out
    return out if w_out is None else out @ torch.tensor(w_out, dtype=out.dtype)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_each_output_is_the_row_of_the_causal_trace_and_of_sdpa(case):
    made = decode(case)
    assert made.agrees and made.n == case.n
    causal = attend(decodable(case)).outputs
    assert made.outputs.dtype == causal.dtype
    close(made.outputs, causal)
    close(made.outputs, sdpa(case))
    for step in made.steps:  # the status row's number is the largest difference of output t from row t
        assert step.difference == (step["output_t"].double() - causal[step.t].double()).abs().max().item()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_the_cache_grows_a_row_a_step_and_holds_the_causal_traces_keys_turned_once(case):
    made, o = decode(case), case.options
    trace, group = attend(decodable(case)), o.heads // (o.kv_heads or o.heads)
    keys = trace["keys"] if o.heads > 1 else trace["keys"][None]  # (h, n, d): after RoPE, repeated per query head
    values = trace["values"] if o.heads > 1 else trace["values"][None]
    scores = trace["scores"] if o.heads > 1 else trace["scores"][None]
    for step in made.steps:
        t = step.t
        k_cache = step.keys if o.heads > 1 else step.keys[None]  # (g, t + 1, d): the cache's, or made from latents
        v_cache = step.values if o.heads > 1 else step.values[None]
        assert k_cache.shape[-2] == t + 1 and step["q_t"].shape[-2] == 1  # one query; t + 1 cached keys
        close(k_cache, keys[::group, : t + 1])  # a key is turned at its own position
        close(v_cache, values[::group, : t + 1])
        if o.w_latent is not None:  # the cache holds the latents, each token's as step 3 made it
            assert "k_cache" not in step.tensors and step["latent_cache"].shape == (t + 1, case.d_c)
            close(step["latent_cache"], trace["latent"][: t + 1])
        scores_t = step["scores_t"] if o.heads > 1 else step["scores_t"][None]
        close(scores_t[:, 0], scores[:, t, : t + 1])  # row t of the causal scores


def test_a_changed_cached_key_is_caught_by_the_check(monkeypatch):
    """The check can fail: a cache that turns a key at the wrong position gives other outputs, and says so."""
    from attention.decoding import compute as decoding

    real_rope = decoding.rope
    monkeypatch.setattr(decoding, "rope", lambda m, at, base: real_rope(m, at + 1, base))  # one position off
    made = decoding.decode(CASES["RoPE"])
    assert made.agrees  # a shift of every position leaves every score as it was (RoPE depends on t_i − t_j)
    monkeypatch.setattr(decoding, "rope", lambda m, at, base: real_rope(m, at * 2, base))  # positions doubled
    made = decoding.decode(CASES["RoPE"])
    assert not made.agrees and made.difference > 1e-3
    assert "differs" in str(made.status()) and str(made.worst() + 1) in str(made.status())


def test_no_mask_is_decoded_as_causal_and_the_rounded_weights_as_the_exact_softmax_with_a_note():
    made = decode(article())
    assert made.case.options.mask == "causal" and made.case.options.weights_override is None
    assert [note.key for note in made.notes] == ["decoding.note_made_causal", "decoding.note_exact"]
    assert not decode(random_case(mask="causal")).notes


@pytest.mark.parametrize(
    ("mask", "row", "column", "why"),
    [
        ([[1, 1, 0], [1, 1, 0], [1, 1, 1]], 1, 2, "decoding.mask_future"),  # token 1 would read key 2, not made yet
        ([[1, 0, 0], [0, 1, 0], [1, 1, 1]], 2, 1, "decoding.mask_past"),  # a cached key left out
        ([[1, 1, 1], [1, 1, 1], [1, 1, 1]], 1, 2, "decoding.mask_future"),  # bidirectional
    ],
)
def test_a_custom_mask_that_is_not_causal_is_refused_saying_where_and_why(mask, row, column, why):
    with pytest.raises(CaseError) as refused:
        decode(random_case(mask=mask))
    assert refused.value.problem.key == why and refused.value.where.params == {"row": row, "column": column}
    assert "look back" in str(refused.value) or "every earlier key" in str(refused.value)
    assert "只能向前看" in render("zh", refused.value.message) or "缓存" in render("zh", refused.value.message)


def test_the_causal_mask_written_out_is_decoded():
    assert decode(random_case(mask=[[1, 0, 0], [1, 1, 0], [1, 1, 1]])).agrees


def test_work_with_the_cache_is_one_row_and_without_it_the_whole_computation():
    s = Sizes.of(CASES["2 heads, w_out"])  # d_in 4, 2 heads of 2, d_out 3
    projections = 4 * (4 + 4 + 4)  # one token through W_Q, W_K, W_V
    assert multiply_adds(s, 0, cache=True) == multiply_adds(s, 0, cache=False)  # the first token: the same work
    assert multiply_adds(s, 4, cache=True) == projections + 5 * 2 * (2 + 2) + 2 * 2 * 3
    assert multiply_adds(s, 4, cache=False) == 5 * projections + 5 * 5 * 2 * (2 + 2) + 5 * 2 * 2 * 3


def test_the_caches_measured_bytes_equal_the_formula_and_smollm2s_numbers():
    for case in CASES.values():
        made = decode(case)
        assert measured_cache_bytes(made) == cache_bytes_per_token(Sizes.of(made.case)) * case.n
    smol = model_sizes(SMOLLM2)
    assert cache_bytes_per_token(smol) == 2 * 30 * 3 * 64 * 4 == 46_080  # float32, as the app's forward pass runs
    assert cache_bytes_per_token(full_heads(smol)) == 3 * 46_080  # 9 key/value heads: grouped-query saves 2/3
    assert cache_bytes_per_token(smol) * 20 == 921_600  # after 20 tokens: 900 KiB


# The session, the link ------------------------------------------------------------------------------------------


def test_a_link_carries_the_decoding_step_and_a_step_past_the_end_is_said():
    s = Session.start()
    open_link(s, {"case": case_to_link(CASES["RoPE"]), "token": "4"})
    assert s.view(DecodingView).t == 3 and not s.notices
    assert link(s) == {"token": "4"}
    again = Session.start()
    open_link(again, {"case": case_to_link(CASES["RoPE"]), **link(s)})
    assert again.view(DecodingView) == s.view(DecodingView)
    for bad in ("7", "0", "x", "99999", "²"):
        past = Session.start()
        open_link(past, {"case": case_to_link(CASES["RoPE"]), "token": bad})
        assert past.view(DecodingView) == DecodingView() and [n.key for n in past.notices] == ["decoding.bad_step"]
        assert past.case == CASES["RoPE"]  # the case is kept


# CLI, script, notebook ---------------------------------------------------------------------------------------------


def test_the_cli_decodes_a_case_file_and_refuses_a_mask_it_cannot_decode(tmp_path, capsys):
    path = tmp_path / "case.json"
    path.write_text(dump_case(CASES["4 heads sharing 2 (grouped)"]))
    assert main(["decode", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["agrees"] and len(out["steps"]) == 6 and out["steps"][2]["shapes"]["k_cache"] == "2 × 3 × 2"
    bad = case_to_dict(random_case(n=2))
    bad["options"]["mask"] = [[1, 1], [1, 1]]
    path.write_text(json.dumps(bad))
    assert main(["decode", str(path)]) == 2
    assert "decoding can only look back" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["article (no mask, rounded weights)", "RoPE at given positions, grouped, temperature",
                                  "2 heads, w_out", "scale 0.3, float64"])  # fmt: skip
def test_the_exported_script_decodes_with_its_cache_and_asserts_the_causal_computation(name, capsys):
    case = CASES[name]
    namespace = runpy.run_path(_write(decoding_script(case)))
    close(namespace["decoded"], decode(case).outputs)
    assert "equals the causal computation" in capsys.readouterr().out


def test_a_broken_script_would_fail_its_own_assertion():
    text = decoding_script(CASES["RoPE"]).replace("POSITIONS[t : t + 1])  # turned once", "POSITIONS[:1])  # turned")
    with pytest.raises(AssertionError), contextlib.redirect_stdout(io.StringIO()):
        runpy.run_path(_write(text))


def _write(text: str) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    return f.name


def test_a_decoding_shows_itself_in_a_notebook_with_its_steps_and_escaped_labels():
    case = replace(CASES["one head, causal"], tokens=("<b>", *CASES["one head, causal"].tokens[1:]))
    html = decode(case)._repr_html_()
    assert html.count("<tr><td>") == 6 and "&lt;b&gt;" in html and "<code>k_cache</code> (4 × 3)" in html


# The page ----------------------------------------------------------------------------------------------------------


def decoding_page(query: dict | None = None, lang: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    if lang:
        session(at).lang = lang
    at.switch_page("pages/decoding.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_page_steps_through_the_tokens_showing_the_cache_and_row_t_of_the_causal_scores():
    at = decoding_page({"case": case_to_link(CASES["4 heads sharing 2 (grouped)"]), "token": "3"})
    assert "Step 3 of 6" in at.success[0].value
    z = {title.split(":")[0]: matrix for title, matrix in charts(at).items()}
    made = decode(CASES["4 heads sharing 2 (grouped)"])
    assert z["k_cache"].shape == (3, 2)  # three cached keys of the first key/value head
    close(torch.tensor(z["scores_t"]), made.steps[2]["scores_t"][0].double())
    at.button(key="decoding_next").click().run()
    assert "Step 4 of 6" in at.success[0].value
    assert charts(at)["k_cache: the keys of tokens 1 … 4 (new row: k_4)"].shape == (4, 2)  # one row more
    assert at.query_params["token"] == "4"
    said = " ".join(m.value for m in at.markdown)  # SmolLM2's cache after 20 tokens, and what grouped-query saves
    assert "46,080 bytes a token" in said and "900 KiB" in said and "2,700 KiB" in said and "saves 67%" in said


def test_a_link_with_a_step_past_the_end_says_so_and_shows_the_last_token():
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["case"], at.query_params["token"] = case_to_link(CASES["RoPE"]), "9"
    at.run()  # the page the link opens says it (each notice once, on the first page drawn)
    assert any("decoding step '9' is not a token of this case (it has 6)" in w.value for w in at.warning)
    at.switch_page("pages/decoding.py").run()
    assert "Step 6 of 6" in at.success[0].value and session(at).case == CASES["RoPE"]


def test_a_case_with_a_mask_decoding_cannot_follow_is_refused_on_the_page_and_the_case_kept():
    masked = with_options(random_case(n=3, seed=1), mask=((1, 1, 1), (1, 1, 1), (1, 1, 1)))
    at = decoding_page({"case": case_to_link(masked)})
    assert any("decoding can only look back" in e.value for e in at.error)
    assert session(at).case == masked and not at.get("plotly_chart")


def test_the_page_in_chinese():
    at = decoding_page(lang="zh")
    assert at.header[0].value == "用 KV 缓存解码：一次一个词元" and "第 3 步" in at.success[0].value


@pytest.mark.parametrize("name", ["RoPE at given positions, grouped, temperature", "one head, causal"])
def test_a_cached_score_is_explained_with_its_own_numbers_and_equals_the_causal_score(name):
    made = decode(CASES[name])
    o = made.case.options
    t, j, head = 4, 1, (3 if o.heads > 1 else None)
    index = (0, j) if head is None else (head, 0, j)  # the step's one query, key j
    said = explain(made, "scores_t", index, step=str(t + 1))
    lines = said.lines
    assert "k_2 comes from the cache: it was computed once, at decoding step 2" in lines[0]
    assert ("turned by RoPE at its position 9" in lines[0]) == (o.rope_base is not None)  # positions 3, 9, …
    scores_t = made.steps[t]["scores_t"]
    value = (scores_t[head, 0, j] if head is not None else scores_t[0, j]).item()
    assert said.value == value and said.head == head
    written = Context.of(made, made.steps[t]).num(value)  # a recorded number: the shortest float32 that reads back
    assert written in lines[-1] and lines[-1].count(written) == 2  # decoding's and the causal one
    assert lines[1].startswith("q_5 · k_2 = ")


def test_past_a_sentences_worth_the_first_tokens_are_decoded_said_and_the_given_causal_trace_is_used():
    case = random_case(n=100, d_in=8, d_k=8, d_v=8, seed=9, heads=2, mask="causal")
    causal = attend(case)
    made = decode(case, causal)
    assert made.n == MAX_DECODE_N and made.agrees
    close(made.causal_scores, causal["scores"][:, :MAX_DECODE_N])
    close(made.outputs, causal.outputs[:MAX_DECODE_N])
    assert [note.key for note in made.notes] == ["decoding.note_first"] and "first 64 of the 100" in made.notes[0]
    with pytest.raises(ValueError):
        decode(case, attend(random_case(n=100, d_in=8, d_k=8, d_v=8, seed=10, heads=2, mask="causal")))


def test_the_sessions_cache_counts_what_a_decoding_holds():
    from attention.app.cache import nbytes

    made = decode(CASES["n = 40, 8 heads sharing 2"])
    scores_t = sum(step["scores_t"].numel() + step["weights_t"].numel() for step in made.steps) * 4
    assert nbytes(made) >= scores_t + made.causal_scores.numel() * 4


# Today's attention: sliding window (the cache evicts), softcap, ALiBi, sinks, partial rotary ------------------------


MODERN_DRAWN = tuple(name for name in MODERN if name != "w_latent")  # the latent: with_latent, from its own draws
# What a cross-attention case refuses (a key placed by its distance in one sentence), dropped from its draws
WITHIN_ONE_SENTENCE = ("window", "alibi", "relative_bias", "relative_max_distance", "relative_bidirectional",
                       "rope_base", "rope_fraction")  # fmt: skip


def modern_case(seed: int):
    """A small random case (n ≤ 10, one or two heads, maybe grouped) with a random combination of today's options;
    every third one multi-head latent attention, every fourth cross-attention (a source of its own, without the
    options of one sentence's positions), each drawn apart, so that each seed's other options stay."""
    g = random.Random(seed)
    n, heads, d_head = g.randint(2, 10), g.choice([1, 2]), g.choice([2, 4])
    options = {"heads": heads, "scale": g.choice(["none", "sqrt_dk"])}
    chosen = [name for name in MODERN_DRAWN if g.random() < 0.6] or [g.choice(MODERN_DRAWN)]
    values = {
        "window": g.randint(1, n),
        "softcap": g.choice([0.5, 2.0, 5.0]),
        "alibi": [round(g.uniform(0.05, 1.0), 2) for _ in range(heads)],
        "sinks": [round(g.uniform(-2.0, 2.0), 1) for _ in range(heads)],
        "rope_fraction": 0.5,
        "relative_bias": [[round(g.uniform(-2.0, 2.0), 1) for _ in range(8)] for _ in range(heads)],
    }
    options |= {name: values[name] for name in chosen}
    if "relative_bias" in chosen:  # decoding is causal: at least 1 + its 4 exact buckets
        options["relative_max_distance"] = g.randint(5, 12)
        options["relative_bidirectional"] = g.random() < 0.5
    if "rope_fraction" in chosen or g.random() < 0.3:
        options["rope_base"] = 100.0
        options["rope_fraction"] = 0.5 if d_head == 4 else None  # a head of 2 dims turns both (one pair)
    cross = seed % 4 == 1  # every fourth seed: cross-attention (seeds 9 and 21 with a latent too)
    options = {k: v for k, v in options.items() if v is not None and not (cross and k in WITHIN_ONE_SENTENCE)}
    d_k = d_head * heads
    case = random_case(n=n, d_in=g.randint(2, 5), d_k=d_k, d_v=2 * heads, seed=seed, **options)
    case_file = with_keys_sentence(case_to_dict(case), random.Random(seed + 2000)) if cross else case_to_dict(case)
    if seed % 3:  # every third seed: multi-head latent attention (every other one with the latent's norm)
        return parse_case(case_file) if cross else case
    return parse_case(with_latent(case_file, random.Random(seed + 1000), norm=seed % 6 == 0))


MODERN_SEEDS = range(24)


@pytest.mark.parametrize("seed", MODERN_SEEDS)
def test_random_variants_each_step_equals_the_traces_row_and_flex_attention_and_the_window_evicts(seed):
    case = modern_case(seed)
    made, trace = decode(case), attend(decodable(case))
    assert made.agrees, (case.options, made.check)  # each step's output t is row t of the trace, within the rule
    allowed = tolerance(made.case, trace.__getitem__, projected=True)
    assert compare("flex_attention", made.outputs, flex_outputs(made.case), allowed).agrees
    window, o = case.options.window, case.options
    group = o.heads // (o.kv_heads or o.heads)
    keys = trace["keys"] if o.heads > 1 else trace["keys"][None]  # (h, n, d): turned (partial rotary: d_rot dims)
    for step in made.steps:
        k_cache = step.keys if o.heads > 1 else step.keys[None]  # the cache's keys, or made from the latent cache
        held = step.t + 1 if window is None else min(step.t + 1, window)  # never more rows than the window
        held = case.n_kv if case.cross else held  # cross-attention: the source's, all of them from step 1
        cached = slice(step.cached.start, step.cached.stop)  # first … t, or the source's 0 … n_kv − 1
        assert k_cache.shape[-2] == held == len(step.cached)
        assert step.evicted == (0 if case.cross else step.t + 1 - held)
        close(k_cache, keys[::group, cached])  # the last `window` tokens' keys, as turned
        if o.w_latent is not None:  # the cache holds the last `window` tokens' latents: an evicted one is dropped
            assert step["latent_cache"].shape == (held, made.case.d_c)
            close(step["latent_cache"], trace["latent"][cached])
        scores_t = step["scores_t"] if o.heads > 1 else step["scores_t"][None]
        trace_scores = trace["scores"] if o.heads > 1 else trace["scores"][None]
        close(scores_t[:, 0], trace_scores[:, step.t, cached])  # the row's allowed scores
        if step.first:  # what the window evicted is masked in the whole computation too
            assert torch.isinf(trace_scores[:, step.t, : step.first]).all()


def test_a_window_of_3_evicts_token_1_at_step_4_and_the_cache_stays_3_rows():
    case = random_case(n=6, d_k=4, d_v=4, seed=11, heads=2, window=3, alibi=[0.5, 0.25], sinks=[0.5, -1.0])
    made = decode(case)
    assert [step.first for step in made.steps] == [0, 0, 0, 1, 2, 3] and made.steps[3].cached == range(1, 4)
    assert [note.key for note in made.notes] == ["decoding.note_window"]  # a window is causal: no "made causal" note
    assert (
        measured_cache_bytes(made)
        == cache_bytes(Sizes.of(made.case), 6)
        == cache_bytes_per_token(Sizes.of(made.case)) * 3
    )
    table = figures.memory_table(Sizes.of(made.case), 6)
    assert table.iloc[0, 3] == cache_bytes_per_token(Sizes.of(made.case)) * 3  # after 6 tokens: 3 rows held
    s = Sizes.of(made.case)
    assert multiply_adds(s, 5, cache=True) < multiply_adds(replace(s, window=None), 5, cache=True)  # 3 keys, not 6
    assert "tokens 2 … 4" in figures.step_heatmap(made, 3, "k_cache", 0).layout.title.text


def test_a_wrong_eviction_is_caught_by_the_check(monkeypatch):
    """The check can fail: a cache that keeps one key too many (the window off by one) differs from the trace."""
    from attention.decoding import compute as decoding

    case = random_case(n=6, d_k=4, d_v=4, seed=12, heads=2, window=2)
    real = decoding.attend_cached

    def kept_one_more(q_t, keys, values, cached, case_, per_head, w_out, allowed=None):
        t = cached[-1]
        if cached.start > 0:  # the evicted key put back
            keys = torch.cat((step_keys[cached.start - 1], keys), dim=1)
            values = torch.cat((step_values[cached.start - 1], values), dim=1)
            cached = range(cached.start - 1, t + 1)
        step_keys[t], step_values[t] = keys[:, -1:], values[:, -1:]
        return real(q_t, keys, values, cached, case_, per_head, w_out, allowed)

    step_keys, step_values = {}, {}
    monkeypatch.setattr(decoding, "attend_cached", kept_one_more)
    made = decoding.decode(case)
    assert not made.agrees and made.worst() >= 2


@pytest.mark.parametrize("heads", [1, 2])
def test_a_cached_score_is_explained_with_alibis_bias_the_cap_and_the_sinks_weight(heads):
    options = {"alibi": [0.5, 0.25][:heads], "sinks": [1.0, -0.5][:heads], "softcap": 2.0, "window": 3}
    case = random_case(n=6, d_k=2 * heads, d_v=2 * heads, seed=13, heads=heads, **options)
    made = decode(case)
    t, j, head = 4, 1, (1 if heads > 1 else None)  # step 5 caches tokens 3, 4, 5: row 1 is token 4
    index = (0, j) if head is None else (head, 0, j)
    said = explain(made, "scores_t", index, step=str(t + 1))
    text = "\n".join(said.lines)
    assert "k_4 comes from the cache" in said.lines[0] and said.title.startswith("scores_t[5, 4]")
    slope = options["alibi"][head or 0]
    assert f"−{slope} × (5 − 4)" in text and "tanh" in text and "sink logit s_h" in text
    causal = made.causal_scores if head is None else made.causal_scores[head]
    assert said.value == causal[t, 3].item()  # the whole computation's score of token 4
    assert "逐出" in render("zh", made.notes[0])


@pytest.mark.parametrize("options", [
    {"window": 3, "softcap": 2.0, "alibi": [0.5, 0.25], "sinks": [0.5, -1.0], "rope_base": 100.0,
     "rope_fraction": 0.5},
    {"window": 2, "kv_heads": 1, "sinks": [0.0, 2.0], "mask": "causal"},
])  # fmt: skip
def test_the_exported_script_carries_every_option_and_asserts_the_causal_computation(options, capsys):
    case = random_case(n=7, d_k=8, d_v=4, seed=14, heads=2, **options)
    text = decoding_script(case)
    namespace = runpy.run_path(_write(text))
    close(namespace["decoded"], decode(case).outputs)
    out = capsys.readouterr().out
    assert "equals the causal computation" in out and "evicted" in out
    # nothing evicted: the cache keeps keys the window masks in the whole computation, and the assert says so
    kept = text.replace("k_cache.pop(0)", "pass").replace("v_cache.pop(0)", "pass")
    kept = kept.replace("    assert len(k_cache) <= WINDOW", "    pass")
    assert kept.count("pass") == text.count("pass") + 3
    with pytest.raises(AssertionError, match="decoding differs"), contextlib.redirect_stdout(io.StringIO()):
        runpy.run_path(_write(kept))
    if "SLOPES" in text:  # ALiBi's distance counted from the cache's first row, not from token j: wrong once evicted
        shifted = text.replace("t - torch.arange(first, t + 1)", "len(k_cache) - 1 - torch.arange(0, len(k_cache))")
        assert shifted != text
        runpy.run_path(_write(shifted))  # the same distances: t − j = (cached − 1) − (j − first)
        wrong = text.replace("t - torch.arange(first, t + 1)", "t - torch.arange(0, len(k_cache))")
        with pytest.raises(AssertionError, match="decoding differs"), contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(_write(wrong))


def test_the_page_shows_the_window_evicting_and_the_cache_of_window_rows():
    case = random_case(n=6, d_k=4, d_v=4, seed=11, heads=2, window=3, alibi=[0.5, 0.25])
    at = decoding_page({"case": case_to_link(case), "token": "5"})
    said = " ".join(i.value for i in at.info)
    assert "the cache holds the keys and values of tokens 3 … 5 (3 rows, never more than 3); 2 evicted" in said
    assert any("evicted the key and value of token 2" in c.value for c in at.caption)
    z = {title.split(":")[0]: matrix for title, matrix in charts(at).items()}
    assert z["k_cache"].shape == (3, 2) and z["scores_t"].shape == (1, 3)


# Multi-head latent attention: the cache holds each token's latent, d_c numbers, not its keys and values ------------


MLA = "MLA: latent with its norm, decoupled RoPE key, grouped"


@pytest.mark.parametrize("window", [None, 3])
def test_a_latent_cache_holds_d_c_numbers_a_token_fewer_than_keys_and_values(window):
    latent = latent_case(16, norm=True, n=7, d_k=8, d_v=8, heads=2, rope_base=100.0, rope_fraction=0.5,
                         window=window)  # fmt: skip
    plain = random_case(n=7, d_k=8, d_v=8, seed=16, heads=2, rope_base=100.0, rope_fraction=0.5, window=window)
    d_c, held = latent.d_c, 7 if window is None else window
    made, made_plain = decode(latent), decode(plain)
    assert made.agrees and {"latent_cache", "k_from_latent"} <= set(made.steps[-1].tensors)
    assert made.steps[-1]["latent_cache"].shape == (held, d_c)  # a row a token, d_c numbers: all the cache holds
    sizes, plain_sizes = Sizes.of(made.case), Sizes.of(made_plain.case)
    assert sizes.latent == d_c and cache_numbers_per_token(sizes) == d_c
    assert cache_numbers_per_token(plain_sizes) == cache_numbers_per_token(without_latent(sizes)) == 2 * 2 * 4
    assert cache_bytes_per_token(sizes) == d_c * 4 < cache_bytes_per_token(plain_sizes) == 2 * 2 * 4 * 4
    # the bytes the page reports are the bytes the decoding really filled, and fewer than keys and values take
    assert measured_cache_bytes(made) == cache_bytes(sizes, 7) == d_c * 4 * held
    assert measured_cache_bytes(made) < measured_cache_bytes(made_plain) == cache_bytes(plain_sizes, 7)
    table = figures.memory_table(sizes, 7)
    assert table.iloc[0, 2] == d_c * 4 and table.iloc[0, 3] == d_c * 4 * held  # the latent's row first
    assert table.iloc[1, 2] == cache_bytes_per_token(plain_sizes)  # then keys and values of the same heads
    assert "d_c = " in table.iloc[0, 0] and "潜向量" in figures.memory_table(sizes, 7, "zh").iloc[0, 0]
    s = replace(sizes, window=None)  # each step makes the cached tokens' keys and values from their latents
    assert multiply_adds(s, 3, cache=True) < multiply_adds(s, 3, cache=False)
    assert multiply_adds(s, 0, cache=True) == multiply_adds(s, 0, cache=False)


def test_a_cache_of_wrong_latents_is_caught_by_the_check(monkeypatch):
    """The check can fail: a cache of latents left unnormed, or made one part in a thousand off, differs."""
    from attention.decoding import compute as decoding

    case = CASES[MLA]
    assert decoding.decode(case).agrees
    real = decoding.latent_of
    monkeypatch.setattr(decoding, "latent_of", lambda o, x, w: real(replace(o, latent_norm=None), x, w))
    assert not decoding.decode(case).agrees  # DeepSeek's norm of the latent left out
    monkeypatch.setattr(decoding, "latent_of", lambda o, x, w: real(o, x, w * 1.001))
    made = decoding.decode(case)
    assert not made.agrees and "differs" in str(made.status())


def test_a_cached_score_of_a_latent_cache_is_explained_from_the_cached_latent():
    made = decode(CASES[MLA])
    t, j, head = 4, 1, 1
    said = explain(made, "scores_t", (head, 0, j), step=str(t + 1))
    assert (
        "token 2's latent c_2" in said.lines[0] and "k_2 = c_2 W_UK, turned by RoPE at its position 1" in said.lines[0]
    )
    assert said.value == made.causal_scores[head, t, 1].item()
    assert "潜向量" in explain(made, "scores_t", (head, 0, j), "zh", step=str(t + 1)).lines[0]


def test_the_exported_script_of_a_latent_case_caches_latents_and_asserts_the_causal_computation(capsys):
    case = latent_case(17, norm=True, n=7, heads=2, kv_heads=1, rope_base=100.0, rope_fraction=0.5, window=3,
                       sinks=[0.5, -1.0])  # fmt: skip
    text = decoding_script(case)
    assert "latent_cache.append(" in text and "k_cache" not in text
    namespace = runpy.run_path(_write(text))
    close(namespace["decoded"], decode(case).outputs)
    assert "equals the causal computation" in capsys.readouterr().out
    assert [tuple(c.shape) for c in namespace["latent_cache"]] == [(1, case.d_c)] * 3  # the window's, d_c each
    for broken in (
        text.replace("latent_cache.append(latent_of(x_t @ w_latent))", "latent_cache.append(x_t @ w_latent)"),
        text.replace("        latent_cache.pop(0)", "        pass").replace(
            "    assert len(latent_cache) <=", "    assert 1 or"
        ),
    ):  # the norm left out of the cached latent; an evicted latent kept
        assert broken != text
        with pytest.raises(AssertionError, match="decoding differs"), contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(_write(broken))


def _latent_room(case_file: dict) -> None:  # an AppTest script: the Decoding room's cache and memory, alone
    import streamlit as st

    from attention.app.session import Session
    from attention.base.case import parse_case
    from attention.decoding import room
    from attention.decoding.compute import decode

    st.session_state["session"] = session = Session.start()  # the frame's session of the tab (app/tab.py)
    made = decode(parse_case(case_file))
    room._cache(made, 3, 1)
    room.work_and_memory(session, made)


def test_the_room_shows_the_latent_cache_both_sizes_and_why():
    case = CASES[MLA]
    at = AppTest.from_function(_latent_room, default_timeout=90, kwargs={"case_file": case_to_dict(case)}).run()
    assert not at.exception, [e.message for e in at.exception]
    z = {title.split(":")[0]: matrix for title, matrix in charts(at).items()}
    assert z["latent_cache"].shape == (4, case.d_c) and z["k_from_latent"].shape == (4, 4) and "k_cache" not in z
    close(torch.tensor(z["latent_cache"]), decode(case).steps[3]["latent_cache"].double())
    said = " ".join(c.value for c in at.caption)
    assert f"{case.d_c} numbers a token instead of 8" in said and "DeepSeek" in said  # N and M, and why
    assert f"{case.d_c * 4:,} bytes a token where keys and values would take 32" in said
    assert "multiplies W_UK into the query" in said  # what the work table counts, and what DeepSeek does instead


def test_the_page_shows_the_latent_cache_and_what_it_saves():
    """Through the app: needs its Inputs to carry the case's latent (attention/app, another change)."""
    case = CASES[MLA]
    at = decoding_page({"case": case_to_link(case), "token": "4"})
    z = {title.split(":")[0]: matrix for title, matrix in charts(at).items()}
    assert z["latent_cache"].shape == (4, case.d_c) and z["k_from_latent"].shape == (4, 4)
    assert "k_cache" not in z and "Step 4 of 6" in at.success[0].value
    said = " ".join(c.value for c in at.caption)
    assert f"{case.d_c} numbers a token instead of 8" in said and "DeepSeek" in said
    assert f"{case.d_c * 4:,} bytes a token where keys and values would take 32" in said


# Cross-attention: the source's keys and values cached once, a target token at a time against all of them -----------


def cross_case(seed: int, n_kv: int, latent: bool | None = None, **options):
    """A random case made cross-attention (tests.cases.with_keys_sentence: a source x_kv of n_kv rows, its own labels),
    and with latent (True or False: with or without its norm) multi-head latent attention too."""
    d_k, d_v = options.pop("d_k", 4), options.pop("d_v", 4)
    plain = case_to_dict(random_case(n=options.pop("n", 5), d_k=d_k, d_v=d_v, seed=seed, **options))
    cross = with_keys_sentence(plain, random.Random(seed), n_kv=n_kv)
    return parse_case(cross if latent is None else with_latent(cross, random.Random(seed), norm=latent))


CROSS = {
    "one head, a longer source": cross_case(20, 8),
    "a shorter source, 2 heads, w_out": cross_case(21, 2, heads=2, w_out=W_OUT),
    "grouped, q/k norm, sqrt_dk": cross_case(22, 6, d_k=8, heads=2, kv_heads=1, scale="sqrt_dk", **QK_NORM),
    "softcap, sinks, temperature": cross_case(23, 5, heads=2, softcap=2.0, sinks=[0.5, -1.0], temperature=0.7),
    "MLA with its norm, grouped": cross_case(24, 7, latent=True, d_k=8, heads=2, kv_heads=1),
    "MLA without a norm, float64": cross_case(25, 3, latent=False, dtype="float64"),
    "a mask hiding source tokens (a row hides all)": with_options(
        cross_case(26, 4, n=3), mask=((1, 0, 1, 0), (0, 0, 0, 0), (1, 1, 1, 1))
    ),
}


def cross_oracle(case) -> torch.Tensor:
    """PyTorch's own attention over every source key (no causal mask: the case's own, where it has one): SDPA, or
    FlexAttention where the case has an option of today's models (a softcap, sinks)."""
    modern = any(getattr(case.options, name) is not None for name in MODERN)
    return oracle.flex_outputs(case) if modern else oracle.fused_outputs(case)


@pytest.mark.parametrize("case", CROSS.values(), ids=CROSS)
def test_a_cross_case_decodes_each_target_token_against_every_source_key_equal_to_the_trace(case):
    made, trace = decode(case), attend(decodable(case))
    assert decodable(case).options.mask == case.options.mask  # never made causal: the source exists before
    assert made.agrees and made.n == case.n and not made.notes  # nothing changed of the case: no note
    assert made.steps[0].check.oracle == "the whole trace" and "whole computation" in str(made.status())
    close(made.outputs, trace.outputs)
    allowed = tolerance(made.case, trace.__getitem__, projected=True)
    assert compare("PyTorch", made.outputs, cross_oracle(made.case), allowed).agrees
    for step in made.steps:
        assert step.cached == range(case.n_kv) and step.first == 0 and step.evicted == 0
        scores_t = step["scores_t"] if case.options.heads > 1 else step["scores_t"][None]
        scores = trace["scores"] if case.options.heads > 1 else trace["scores"][None]
        assert scores_t.shape[-1] == case.n_kv  # one row over all n_kv source keys
        close(scores_t[:, 0], scores[:, step.t])


@pytest.mark.parametrize("case", CROSS.values(), ids=CROSS)
def test_a_cross_cache_holds_the_n_kv_source_keys_and_values_from_step_1_and_never_changes(case):
    made, trace, o = decode(case), attend(decodable(case)), case.options
    group = o.heads // (o.kv_heads or o.heads)
    keys = trace["keys"] if o.heads > 1 else trace["keys"][None]  # (h, n_kv, d): the source's
    values = trace["values"] if o.heads > 1 else trace["values"][None]
    held = "k_cache" if o.w_latent is None else "latent_cache"
    first = made.steps[0]
    for step in made.steps:  # the same source rows from step 1 on: nothing appended, nothing evicted
        assert not {"k_t", "v_t", "latent_t"} & set(step.tensors)  # a target token adds nothing to the cache
        assert torch.equal(step[held], first[held]) and step[held].shape[-2] == case.n_kv
        assert torch.equal(step["x_kv"], torch.tensor(case.x_kv, dtype=step["x_kv"].dtype))
        assert step.reads[held] == ("x_kv",)  # made from the source, not from token t
        close(step.keys if o.heads > 1 else step.keys[None], keys[::group])
        close(step.values if o.heads > 1 else step.values[None], values[::group])
    if o.w_latent is not None:  # the source's latents, as step 3 made them from x_kv
        close(first["latent_cache"], trace["latent"])
    sizes = Sizes.of(made.case)  # the cache's size: the source's n_kv tokens, fixed whatever the target's length
    assert sizes.source == case.n_kv
    assert measured_cache_bytes(made) == cache_bytes(sizes, case.n) == cache_bytes(sizes, 1000)
    assert cache_bytes(sizes, case.n) == cache_bytes_per_token(sizes) * case.n_kv


def test_a_wrong_source_row_in_the_cache_is_caught_by_the_check(monkeypatch):
    """The check can fail: a cache made from a source with one row changed, or with a source token left out, differs
    from the trace."""
    from attention.decoding import compute as decoding

    case = CROSS["grouped, q/k norm, sqrt_dk"]
    assert decoding.decode(case).agrees
    real = decoding._source_cache

    def row_changed(case_, x_kv, w):
        return real(case_, torch.cat((x_kv[:2], x_kv[2:3] + 0.5, x_kv[3:])), w)

    monkeypatch.setattr(decoding, "_source_cache", row_changed)
    made = decoding.decode(case)
    assert not made.agrees and "differs from the trace" in str(made.status())
    monkeypatch.setattr(decoding, "_source_cache", lambda case_, x_kv, w: real(case_, x_kv[:-1], w))
    assert not decoding.decode(case).agrees  # the last source token missing from the cache


def test_a_cross_cases_mask_row_hides_source_tokens_and_a_fully_masked_row_gives_zeros():
    case = CROSS["a mask hiding source tokens (a row hides all)"]
    made = decode(case)
    assert made.agrees and (made.steps[1]["weights_t"] == 0).all() and (made.outputs[1] == 0).all()
    weights = made.steps[0]["weights_t"][0]
    assert weights[1] == weights[3] == 0 and weights[0] > 0 and weights[2] > 0
    said = explain(made, "scores_t", (0, 1), step="1")
    assert any("target token 1 may not look at source token 2 (src1)" in line for line in said.lines)


def test_cross_work_makes_the_sources_keys_and_values_once_with_the_cache_and_every_token_without():
    s = Sizes.of(CROSS["a shorter source, 2 heads, w_out"])  # d_in 4, 2 heads of 2, d_out 3, n_kv 2
    query, source = 4 * 4, 2 * 4 * (4 + 4)  # one target token through W_Q; the source's 2 rows through W_K, W_V
    attention, out = 2 * 2 * (2 + 2), 2 * 2 * 3  # a row of 2 scores and weighted values per head; then w_out
    assert multiply_adds(s, 0, cache=True) == multiply_adds(s, 0, cache=False) == query + source + attention + out
    assert multiply_adds(s, 4, cache=True) == query + attention + out  # the source's are cached: no projection
    assert multiply_adds(s, 4, cache=False) == 5 * query + source + 5 * (attention + out)
    table = figures.memory_table(s, 5)
    assert "2 source tokens (fixed)" in table.columns[-1] and table.iloc[0, 3] == 2 * table.iloc[0, 2]
    assert "源词元" in figures.memory_table(s, 5, "zh").columns[-1]


def test_a_cross_cached_score_is_explained_as_made_once_from_the_source_row():
    made = decode(CROSS["grouped, q/k norm, sqrt_dk"])
    t, j, head = 3, 4, 1
    said = explain(made, "scores_t", (head, 0, j), step=str(t + 1))
    assert "made once from the source's row 5 (src4) of x_kv, before the first target token" in said.lines[0]
    assert "src4" in said.title and said.value == made.causal_scores[head, t, j].item()
    assert any("every target token at once" in line for line in said.lines)
    latent = decode(CROSS["MLA with its norm, grouped"])
    assert "source token 5's latent c_5" in explain(latent, "scores_t", (1, 0, 4), step="2").lines[0]
    assert "源句子的第 5 行" in explain(made, "scores_t", (head, 0, j), "zh", step=str(t + 1)).lines[0]


def test_the_cross_figures_label_target_tokens_down_and_source_tokens_across():
    case = CROSS["one head, a longer source"]
    made, trace = decode(case), attend(case)
    cache = figures.step_heatmap(made, 2, "k_cache")
    assert list(cache.data[0].y) == list(case.key_tokens) and not cache.layout.shapes  # no new row: made once
    assert "made once before step 1" in cache.layout.title.text
    aligned = figures.alignment(made, 2)  # target tokens 1 … 3 down, the 8 source tokens across
    assert list(aligned.data[0].y) == list(case.tokens[:3]) and list(aligned.data[0].x) == list(case.key_tokens)
    close(torch.tensor(aligned.data[0].z), trace["weights"][:3].double())
    assert len(aligned.layout.shapes) == 2  # row 3 outlined (a halo, then the line)
    whole = figures.row_outlined(figures.causal_heatmap(trace), 2, cross=True)
    assert list(whole.data[0].x) == list(case.key_tokens) and whole.layout.shapes[0].x1 == case.n_kv - 0.5


@pytest.mark.parametrize("name", list(CROSS))
def test_the_exported_script_of_a_cross_case_caches_the_source_once_and_asserts_the_whole_computation(name, capsys):
    case = CROSS[name]
    text = decoding_script(case)
    assert "x_kv = [" in text and "is_causal" not in text and "x_kv=x_kv" in text
    namespace = runpy.run_path(_write(text))
    close(namespace["decoded"], decode(case).outputs)
    assert "equals the whole computation" in capsys.readouterr().out
    made = "k_cache = norm((x_kv @ w_key)" if case.options.w_latent is None else "latent_cache = latent_of(x_kv @"
    wrong = text.replace(made, made.replace("x_kv @", "(x_kv + torch.eye(*x_kv.shape)) @"))  # source rows changed
    assert wrong != text
    with pytest.raises(AssertionError, match="decoding differs"), contextlib.redirect_stdout(io.StringIO()):
        runpy.run_path(_write(wrong))


def test_the_cli_decodes_a_cross_case_file(tmp_path, capsys):
    path = tmp_path / "case.json"
    path.write_text(dump_case(CROSS["one head, a longer source"]))
    assert main(["decode", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["agrees"] and len(out["steps"]) == 5 and out["steps"][2]["shapes"]["k_cache"] == "8 × 4"


def _cross_room(case_file: dict, lang: str) -> None:  # an AppTest script: the Decoding room's step and memory alone
    import streamlit as st

    from attention.app.session import Session
    from attention.base.case import parse_case
    from attention.base.presets import random_case
    from attention.decoding import room
    from attention.decoding.compute import decode
    from attention.forward.compute import attend

    st.session_state["session"] = session = Session.start(lang)  # the frame's session of the tab (app/tab.py)
    session.load(random_case(n=5, seed=1))  # the step player reads the view; the decoding is the cross case's
    made = decode(parse_case(case_file))
    room.step_view(session, made, attend(made.case))
    room.work_and_memory(session, made)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_room_shows_the_sources_cache_made_once_and_the_alignment(lang):
    case = CROSS["a shorter source, 2 heads, w_out"]
    at = AppTest.from_function(_cross_room, default_timeout=90, kwargs={"case_file": case_to_dict(case), "lang": lang})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    z = {title.replace("：", ":").split(":")[0]: matrix for title, matrix in charts(at).items()}  # zh's colon too
    assert z["k_cache"].shape == (2, 2) and z["scores_t"].shape == (1, 2)  # the 2 source tokens, every step
    assert z["Alignment so far" if lang == "en" else "到目前为止的对齐"].shape == (5, 2)  # 5 target tokens × 2
    said = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    if lang == "en":
        assert "made once from x_kv before the first target token" in said and "alignment" in said
        assert "whatever the target's length" in said and "Step 5 of 5" in at.success[0].value
        assert "row 5 of the whole computation" in at.success[0].value
    else:
        assert "对齐" in said and "源词元" in said


def test_the_page_decodes_a_cross_case_with_the_sources_cache_and_the_alignment():
    """Through the app: needs a link to carry the case's x_kv (attention/app, another change)."""
    case = CROSS["MLA with its norm, grouped"]
    at = decoding_page({"case": case_to_link(case), "token": "2"})
    if not session(at).case.cross:
        pytest.skip("the app does not load a cross-attention case from a link yet (attention/app)")
    said = " ".join(m.value for m in at.markdown)
    assert "This case is cross-attention" in said and "A chat model writes" not in said  # its own introduction
    assert "Step 2 of 5: output 2 equals row 2 of the whole computation" in at.success[0].value
    z = {title.split(":")[0]: matrix for title, matrix in charts(at).items()}
    assert z["latent_cache"].shape == (7, case.d_c) and z["scores_t"].shape == (1, 7)  # the 7 source tokens
    assert z["Alignment so far"].shape == (2, 7)  # target tokens 1 … 2 over the source
