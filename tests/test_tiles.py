"""Attention in tiles (issue 23): the online softmax against step 7 and SDPA, skipped tiles, memory, input, page."""

import contextlib
import io
import math
import random
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch
from streamlit.testing.v1 import AppTest
from torch.overrides import TorchFunctionMode

from attention import attend
from attention.__main__ import main
from attention.app.links import open_link
from attention.app.session import Session
from attention.base.case import MODERN, CaseError, case_to_dict, parse_case, with_options
from attention.base.explain import explain
from attention.base.files import case_to_link, dump_case
from attention.base.numbers import approx
from attention.base.presets import article, random_case
from attention.base.record import compare
from attention.forward import oracle
from attention.forward.compute import tolerance
from attention.forward.oracle import fused_outputs
from attention.tiles import figures as tiles_figures
from attention.tiles import room as tiles_room
from attention.tiles import script as tiles_script
from attention.tiles import state as tiles_state
from attention.tiles.compute import check, check_blocks, default_block, estimates, tiled
from attention.tiles.script import tiles_text, to_script
from attention.tiles.state import Tiling, default_blocks, first_rescale, link
from tests.apptest import APP, charts, session
from tests.cases import QK_NORM, olmo_head, with_keys_sentence, with_latent

BLOCKED = [[1, 0, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]]  # rows 2, 4: nothing
CASES = {
    "plain": random_case(n=7, seed=1),
    "causal, sqrt_dk": random_case(n=9, d_k=4, seed=2, mask="causal", scale="sqrt_dk"),
    "fully masked rows, temperature": random_case(n=5, seed=3, mask=BLOCKED, temperature=0.3),
    "scale, temperature 4": random_case(n=6, seed=4, scale=0.7, temperature=4.0),
    "2 heads, w_out, causal": random_case(
        n=8, d_k=4, d_v=4, seed=5, heads=2, mask="causal", w_out=[[1, 0, 2], [0, 1, 0], [0.5, 0, 1], [0, -1, 0]]
    ),
    "grouped kv heads, RoPE, sqrt_dk, causal": random_case(
        n=11, d_in=6, d_k=8, d_v=6, seed=6, heads=4, kv_heads=2, rope_base=10_000.0, scale="sqrt_dk", mask="causal"
    ),
    "RoPE with positions, float64": random_case(
        n=6, d_k=4, seed=7, rope_base=100.0, positions=[5, 3, -2, 7, 0, 1], dtype="float64"
    ),
    "scaled RoPE (a model's own frequency per pair), 2 heads": random_case(
        n=7, d_k=8, d_v=4, seed=9, heads=2, rope_base=500.0, rope_frequencies=[0.7, 0.02], mask="causal"
    ),
    "q/k norm, RoPE, 2 heads": random_case(
        n=7,
        d_k=8,
        d_v=4,
        seed=10,
        heads=2,
        rope_base=500.0,
        mask="causal",
        **QK_NORM,
    ),
    "OLMo 2's head (norm_rest), RoPE": random_case(
        n=7, d_k=4, d_v=4, seed=12, rope_base=500.0, mask="causal", **olmo_head(7)
    ),
    "big scores (exp would overflow without the running maximum)": random_case(n=6, seed=8, scale=60.0),
    "MLA: latent with its norm, decoupled RoPE key, grouped, causal": parse_case(
        with_latent(
            case_to_dict(
                random_case(
                    n=7, d_k=8, d_v=4, seed=11, heads=2, kv_heads=1, rope_base=100.0, rope_fraction=0.5, mask="causal"
                )
            ),
            random.Random(11),
            norm=True,
        )
    ),
    "MLA: latent, no norm": parse_case(
        with_latent(case_to_dict(random_case(n=6, d_k=4, seed=12)), random.Random(12), norm=False)
    ),
}
BLOCKS = [(1, 1), (2, 3), (3, 2), (4, 4), (None, None), ("n", "n"), (5, 1)]


def blocks_for(case, blocks):
    return tuple(case.n if b == "n" else None if b is None else min(b, case.n) for b in blocks)


@pytest.mark.parametrize("blocks", BLOCKS, ids=str)
@pytest.mark.parametrize("name", CASES)
def test_tiled_outputs_equal_step_7_and_sdpa(name, blocks):
    case = CASES[name]
    run = tiled(case, *blocks_for(case, blocks))
    agreement = check(run, attend(run.case))  # the case as tiled: the exact softmax
    assert agreement.agrees, agreement
    tolerance = {"float32": {"rtol": 1.3e-6, "atol": 1e-5}, "float64": {"rtol": 1e-10, "atol": 1e-10}}
    torch.testing.assert_close(run.outputs, fused_outputs(case), **tolerance[case.options.dtype])


def test_a_wrong_result_is_called_wrong():
    case = CASES["plain"]
    run = tiled(case, 2, 3)
    trace = attend(case)
    reference = trace.outputs.clone()
    reference[2, 1] += 1e-4 * reference.abs().max()  # far past the float rounding of 3 terms
    assert not check(run, replace(trace, outputs=reference)).agrees
    assert check(run, trace).agrees


def test_the_article_with_the_rounded_softmax_is_tiled_with_the_exact_one():
    run = tiled(article())  # the article's case holds the rounded weights: not attention
    assert run.case.options.weights_override is None
    exact = attend(with_options(article(), weights_override=None))
    assert check(run, exact).agrees
    with pytest.raises(ValueError, match="not of the case as tiled"):
        check(run, attend(article()))


def test_the_defaults_make_the_article_two_key_tiles_and_a_causal_mask_skips_one():
    run = tiled(with_options(article(), mask="causal"))
    assert (run.block_q, run.block_k, run.key_tiles, run.query_tiles) == (2, 2, 2, 2)
    assert run.skipped == ((0, 1),)  # queries 1-2 may not see key 3
    assert run.visit(0, 1).skipped and not run.visit(0, 1).tensors
    assert default_block(1024) == 64 and default_block(1) == 1


def test_causal_tiles_above_the_diagonal_are_skipped_about_half():
    case = random_case(n=64, d_in=4, seed=9, mask="causal")
    run = tiled(case, 8, 8)
    assert set(run.skipped) == {(i, j) for i in range(8) for j in range(8) if j > i}  # 28 of 64
    assert len(run.skipped) / run.tiles == pytest.approx(28 / 64)
    assert check(run, attend(case)).agrees


def test_each_visit_records_the_online_softmax_and_its_rescaling():
    case = CASES["scale, temperature 4"]
    run = tiled(case, 2, 2)
    trace = attend(case)
    scores = trace["scores"]
    for v in run.visits:
        t = v.tensors
        torch.testing.assert_close(t["scores"][0], scores[v.queries.start : v.queries.stop, v.keys.start : v.keys.stop])
        torch.testing.assert_close(t["m"], torch.maximum(t["m_before"], t["scores"].amax(-1)))
        torch.testing.assert_close(t["rescale"], torch.exp(t["m_before"] - t["m"]))
        torch.testing.assert_close(
            t["l"], t["l_before"] * t["rescale"] + torch.exp(t["scores"] - t["m"][..., None]).sum(-1)
        )
        row_max = scores[v.queries.start : v.queries.stop, : v.keys.stop].amax(-1)  # m: the row's max so far
        torch.testing.assert_close(t["m"][0], row_max)
    for q in range(case.n):  # the last estimate of every query is its row of step 7
        torch.testing.assert_close(estimates(run, q, 0)[-1], trace.outputs[q])


def test_the_explanation_of_l_adds_up_with_its_terms():
    run = tiled(CASES["scale, temperature 4"], 3, 2)
    v = run.visit(1, 1)
    lines = explain(run, "l", (0, 1), step=v.name).lines  # head 0, the tile's second query
    t = {k: x[0, 1].item() for k, x in v.tensors.items() if x.dim() == 2}
    assert lines[0].startswith("m₂ = max(m₁")
    ell = next(line for line in lines if line.startswith("ℓ after key tile 2: ℓ₂ = ℓ₁ · e^(m₁ − m₂) + Σ e^(s − m₂)"))
    total = sum(math.exp(s - t["m"]) for s in v.tensors["scores"][0, 1].tolist())
    assert t["l"] == pytest.approx(t["l_before"] * t["rescale"] + total, rel=1e-6)
    assert ell.endswith(f"= {approx(t['l'])}")
    assert explain(run, "l", (0, 1), "zh", step=v.name).lines[2].startswith("处理完键块 2 后的 ℓ")
    skipped = tiled(with_options(article(), mask="causal"))
    assert skipped.visit(0, 1).skipped and skipped.visit(0, 1).name == "1.2"
    with pytest.raises(ValueError, match="cannot explain 'l'"):  # nothing was computed: the page says it was skipped
        explain(skipped, "l", (0, 0), step=skipped.visit(0, 1).name)


class Largest(TorchFunctionMode):
    """Every tensor a torch function makes while it is on, its largest numel noted."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_at_scale_no_n_by_n_tensor_is_made_and_nothing_is_recorded():
    case = random_case(n=1024, d_in=64, d_k=64, d_v=64, seed=10, mask="causal", scale="sqrt_dk")
    with Largest() as seen:
        run = tiled(case, 64, 64)
    assert seen.largest < 1024 * 1024 // 8, seen.largest  # a tile of 64 × 64 and the n × 64 matrices
    assert run.visits == () and run.tile_bytes < 1024 * 1024 * 4 // 50  # under 2 % of one score matrix
    with Largest() as seen:  # the watch sees an n × n tensor when one is made
        (torch.ones(1024, 64) @ torch.ones(64, 1024)).sum()
    assert seen.largest == 1024 * 1024
    kept = tiled(case, 64, 64, keep=(3,))  # the page's one query tile, recorded
    assert {v.query_tile for v in kept.visits} == {3} and len(kept.visits) == 16
    assert oracle.check(replace(attend(case), outputs=kept.outputs)).agrees  # SDPA, within the app's own check (scores
    # up to 424 here: float32's rounding of them differs between SDPA's kernel and any matmul, by 2e-4 of outputs of 36)


@pytest.mark.parametrize(
    ("blocks", "field", "words"),
    [
        ((0, 2), "B_q", "not 0"),
        ((2, -1), "B_k", "not -1"),
        ((4, 2), "B_q", "not 4"),
        (("1.5", 2), "B_q", "whole number"),
        ((2, 1.0), "B_k", "whole number"),
        (("abc", 2), "B_q", "'abc'"),
        ((True, 2), "B_q", "whole number"),
        ((2, "²"), "B_k", "whole number"),
        ((2, "9" * 50), "B_k", "whole number"),
    ],
)
def test_bad_block_sizes_are_refused_naming_the_field(blocks, field, words):
    with pytest.raises(CaseError) as bad:
        check_blocks(*blocks, 3)
    assert str(bad.value).startswith(field) and words in str(bad.value)


def test_too_many_tiles_are_refused():
    with pytest.raises(CaseError, match="block sizes: make 1048576 tiles"):
        check_blocks(1, 1, 1024)
    assert check_blocks("16", " 16 ", 1024) == (16, 16)


def test_the_session_keeps_the_last_valid_blocks_and_the_link_round_trips():
    s = Session.start()
    s.view(Tiling).choose_blocks("1", "2", s.case.n)
    s.view(Tiling).tile = (2, 1)
    s.view(Tiling).choose_blocks("0", "2", s.case.n)
    assert s.view(Tiling).blocks == (1, 2) and "B_q" in str(s.view(Tiling).error)
    params = link(s.view(Tiling))
    assert params == {"bq": "1", "bk": "2", "tile": "3.2"}
    other = Session.start()
    open_link(other, params)
    assert (other.view(Tiling).blocks, other.view(Tiling).tile, other.notices) == ((1, 2), (2, 1), [])


@pytest.mark.parametrize(
    "params", [{"bq": "0"}, {"bq": "2", "bk": "x"}, {"tile": "9.9"}, {"tile": "1"}, {"tile": "1.1.1"}, {"bq": "4"}]
)
def test_a_forged_link_is_refused_with_a_notice_and_the_defaults(params):
    s = Session.start()
    open_link(s, params)
    assert (s.view(Tiling).blocks, s.view(Tiling).tile) == (None, None)
    assert len(s.notices) == 1 and "tiles were refused" in s.notices[0]


def test_the_cli_reports_each_tile_and_the_check(tmp_path, capsys):
    path = tmp_path / "case.json"
    path.write_text(dump_case(with_options(article(), mask="causal")))
    assert main(["tiles", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 skipped" in out and "query tile 1, key tile 2: skipped" in out and "equal step 7's" in out
    assert main(["tiles", str(path), "--block-q", "0"]) == 2
    assert "B_q (queries per tile): must be from 1 to n = 3, not 0" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["fully masked rows, temperature", "grouped kv heads, RoPE, sqrt_dk, causal",
                                  "MLA: latent with its norm, decoupled RoPE key, grouped, causal"])  # fmt: skip
def test_the_exported_script_runs_its_tiled_loop_and_asserts_step_7(name, tmp_path):
    path = tmp_path / "tiles.py"
    path.write_text(to_script(CASES[name], 2, 3))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tiled outputs equal step 7's" in done.stdout and "key tile 2: m =" in done.stdout
    broken = path.read_text().replace("l = l * rescale + ", "l = l + ")  # the rescaling left out: it must fail
    path.write_text(broken)
    assert subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120).returncode != 0


# The page, through AppTest ----------------------------------------------------------------------------------------


def tiles_page(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    return at.switch_page("pages/tiles.py").run()


def test_the_page_shows_the_tiles_the_check_and_keeps_the_last_valid_blocks():
    at = tiles_page()
    assert not at.exception
    assert "Tiled outputs = step 7's" in at.success[0].value
    assert any("ℓ after key tile 2" in c.value for c in at.code)  # the tile that rescales, shown first
    at.text_input(key="tiles_bq").set_value("0").run()
    assert "B_q (queries per tile): must be from 1 to n = 3, not 0" in at.error[0].value
    assert session(at).view(Tiling).blocks is None and "6 tiles of 2 × 1" in at.success[0].value  # the last valid view
    at.text_input(key="tiles_bq").set_value("1").run()
    assert not at.error and "9 tiles of 1 × 1" in at.success[0].value
    at.button(key="tiles_next").click().run()  # from the tile that rescales (1.2), the next: 1.3
    assert session(at).view(Tiling).tile == (0, 2) and at.query_params["tile"] == "1.3" and at.query_params["bq"] == "1"
    assert any("ℓ after key tile 3" in c.value for c in at.code)


def test_a_link_opens_the_tile_and_a_forged_one_says_so():
    at = tiles_page({"bq": "1", "bk": "1", "tile": "3.2"})
    assert not at.exception and session(at).view(Tiling).tile == (2, 1)
    assert at.selectbox(key="tiles_query_tile").value == 2
    forged = AppTest.from_file(APP, default_timeout=60)
    forged.query_params["bq"], forged.query_params["tile"] = "1", "7.1"
    forged.run()  # the notice shows on the first page drawn
    assert (
        "The link's tiles were refused (tile: must be 'query tile.key tile', from 1.1 to 3.2" in forged.warning[0].value
    )  # B_k left out: default_block(3) = 2, what a link without it meant when it was made
    assert session(forged).view(Tiling).tile is None and not forged.exception


def test_the_page_in_chinese_and_with_a_causal_mask():
    at = tiles_page({"lang": "zh"})
    s = session(at)
    s.choose(mask="causal")
    at.run()
    assert not at.exception
    assert "分块输出 = 第 7 步的输出" in at.success[0].value
    assert any("对角线以上的块" in i.value for i in at.info)
    s.view(Tiling).tile = (0, 2)  # the skipped tile: its explanation says so (the explain engine has no numbers)
    at.run()
    assert not at.exception and any("键块 3 对这一块的每个查询都被掩码：跳过" in c.value for c in at.code)


def test_a_tiled_run_shows_itself_in_jupyter_with_its_tiles():
    html = tiled(with_options(article(), mask="causal"))._repr_html_()
    assert "4 tiles, 1 skipped" in html and html.count("<tr><td>") == 4 and "skipped: every score" in html
    big = tiled(random_case(n=80, seed=11), 40, 40, keep=(1,))._repr_html_()
    assert "recorded: query tiles 2" in big and big.count("<tr><td>") == 2


def test_the_player_goes_through_the_tiles_in_order_and_round(monkeypatch):
    at = tiles_page()
    at.toggle(key="tiles_playing").set_value(True).run()
    seen = [session(at).view(Tiling).tile]
    for _ in range(6):
        later = time.monotonic() + 60  # the pace has passed
        monkeypatch.setattr(tiles_room.time, "monotonic", lambda later=later: later)
        at.run()
        seen.append(session(at).view(Tiling).tile)
    # from the tile shown first (1.2, where the rescaling is): each query tile's key tiles, then the first again
    assert seen == [(0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 0), (0, 1)]
    assert not at.exception


def test_the_page_opens_on_the_tile_that_rescales_and_says_which():
    """The page's premise on its first screen: the article's tiles of two keys never rescale (e^(4 − 4) = 1), so the
    page's default tiles are of one key, and it opens on tile 1.2, where Input 1's maximum grows from 2 to 4."""
    assert default_blocks(article()) == (2, 1)
    found = first_rescale(tiled(article(), 2, 1))
    assert found.tile == (0, 1) and (found.query, found.m_old, found.m_new) == (0, 2.0, 4.0)
    assert found.factor == pytest.approx(math.exp(-2))
    assert first_rescale(tiled(article(), 2, 2)) is None  # the old default: no tile rescales
    at = tiles_page()
    said = next(i.value for i in at.info if "shows the rescaling" in i.value)
    assert "Tile 1.2 (query tile 1, key tile 2)" in said and "from 2 to 4" in said and "e^(2 − 4) = 0.1353" in said
    assert at.selectbox(key="tiles_query_tile").value == 0 and at.selectbox(key="tiles_key_tile").value == 1
    table = at.dataframe[0].value  # the visit's table: the rescaling of what was summed, below 1
    assert float(table.iloc[0]["e^(m before − m after)"]) == pytest.approx(math.exp(-2), rel=1e-3)
    assert "tile" not in at.query_params and session(at).view(Tiling).tile is None  # the link opens on it again
    at.selectbox(key="tiles_key_tile").set_value(0).run()  # elsewhere: a button back to it
    assert session(at).view(Tiling).tile == (0, 0)
    at.button(key="tiles_show_rescale").click().run()
    assert session(at).view(Tiling).tile == (0, 1) and at.query_params["tile"] == "1.2"
    causal = tiles_page({"case": case_to_link(with_options(article(), mask="causal", weights_override=None))})
    assert any("Tile 1.2 (query tile 1, key tile 2)" in i.value and "Input 2" in i.value for i in causal.info)
    assert causal.selectbox(key="tiles_query").value == 1  # the query that rescales (Input 1 is masked there)
    assert any("e^(4 − 16)" in c.value for c in causal.code)


def test_a_case_that_never_rescales_says_so():
    eye = [[1, 0], [0, 1]]
    case = parse_case({"format": "attention-case/1", "x": [[2, 0], [1, 0]], "w_query": eye, "w_key": eye,
                       "w_value": eye})  # fmt: skip
    assert attend(case)["scores"].tolist() == [[4.0, 2.0], [2.0, 1.0]]  # each query's largest score first
    assert default_blocks(case) == (1, 1) and first_rescale(tiled(case, 1, 1)) is None
    at = tiles_page({"case": case_to_link(case)})
    assert not at.exception and any("No tile of these block sizes rescales" in i.value for i in at.info)


def test_an_old_link_with_a_tile_and_no_block_sizes_opens_the_tile_it_named():
    """Links made before the page's defaults showed the rescaling wrote a tile alone, on default_block(n) × the
    same: it is read on those blocks (on today's 2 × 1 defaults, tile 2.2 would be another tile), and a tile is
    now written with the blocks it is on."""
    s = Session.start()
    open_link(s, {"tile": "2.2"})
    b = default_block(s.case.n)
    assert (s.view(Tiling).blocks, s.view(Tiling).tile, s.notices) == ((b, b), (1, 1), [])
    fresh = Session.start()
    fresh.view(Tiling).tile = (1, 2)  # chosen on the defaults
    assert link(fresh.view(Tiling), default_blocks(fresh.case)) == {"bq": "2", "bk": "1", "tile": "2.3"}


# Today's attention: sliding window (tiles behind it skipped), softcap, ALiBi, sinks, partial rotary ----------------


MODERN_DRAWN = tuple(name for name in MODERN if name != "w_latent")  # the latent: with_latent, from its own draws


# What a cross-attention case refuses (a key placed by its distance in one sentence), dropped from its draws
WITHIN_ONE_SENTENCE = ("window", "alibi", "relative_bias", "relative_max_distance", "relative_bidirectional",
                       "rope_base", "rope_fraction")  # fmt: skip


def modern_case(seed: int):
    """A small random case (n ≤ 10, one or two heads) with a random combination of today's options; every third
    one multi-head latent attention, every fourth cross-attention (a source of its own, without a causal mask or the
    options of one sentence's positions), each drawn apart, so that each seed's other options stay."""
    g = random.Random(seed)
    n, heads, d_head = g.randint(3, 10), g.choice([1, 2]), g.choice([2, 4])
    options = {"heads": heads, "scale": g.choice(["none", "sqrt_dk"]), "mask": g.choice([None, "causal"])}
    chosen = [name for name in MODERN_DRAWN if g.random() < 0.6] or [g.choice(MODERN_DRAWN)]
    values = {
        "window": g.randint(1, n),
        "softcap": g.choice([0.5, 2.0, 5.0]),
        "alibi": [round(g.uniform(0.05, 1.0), 2) for _ in range(heads)],
        "sinks": [round(g.uniform(-2.0, 2.0), 1) for _ in range(heads)],
        "rope_fraction": 0.5 if d_head == 4 else None,
        "relative_bias": [[round(g.uniform(-2.0, 2.0), 1) for _ in range(8)] for _ in range(heads)],
    }
    options |= {name: values[name] for name in chosen}
    if "relative_bias" in chosen:  # at least 1 + the exact buckets: 5 (causal), 3 (both ways)
        options["relative_max_distance"] = g.randint(5, 12)
        options["relative_bidirectional"] = g.random() < 0.5
    if options.get("rope_fraction") or g.random() < 0.3:
        options["rope_base"] = 100.0
    cross = seed % 4 == 1  # every fourth seed: cross-attention (seeds 9 and 21 with a latent too)
    if cross:  # its mask: none, never the causal one (the source exists before the target)
        options = {k: v for k, v in options.items() if k not in WITHIN_ONE_SENTENCE} | {"mask": None}
    options = {k: v for k, v in options.items() if v is not None}
    case = random_case(n=n, d_in=g.randint(2, 5), d_k=d_head * heads, d_v=2 * heads, seed=seed, **options)
    case_file = with_keys_sentence(case_to_dict(case), random.Random(seed + 2000)) if cross else case_to_dict(case)
    if seed % 3:  # every third seed: multi-head latent attention (every other one with the latent's norm)
        return parse_case(case_file) if cross else case
    return parse_case(with_latent(case_file, random.Random(seed + 1000), norm=seed % 6 == 0))


def uneven_blocks(seed: int, n: int) -> tuple[int, int]:
    """Block sizes that split n unevenly where they can (a last tile smaller than the others)."""
    g = random.Random(seed + 1000)
    uneven = [b for b in range(2, n) if n % b] or [1]
    return g.choice(uneven), g.choice(uneven)


@pytest.mark.parametrize("seed", range(24))
def test_random_variants_tiled_equal_step_7_and_flex_attention(seed):
    case = modern_case(seed)
    b_q, b_k = uneven_blocks(seed, case.n)
    b_k = uneven_blocks(seed, case.n_kv)[1] if case.cross else b_k  # key tiles over cross-attention's source
    run = tiled(case, b_q, b_k)
    exact = attend(run.case)
    agreement = check(run, exact)
    assert agreement.agrees, (case.options, run.block_q, run.block_k, agreement)
    assert compare(
        "flex_attention", run.outputs, oracle.flex_outputs(run.case), tolerance(run.case, exact.__getitem__)
    ).agrees
    allowed = exact["scores"] > float("-inf")  # (h?, n, n): the keys each query may see (the mask and the window)
    allowed = allowed if allowed.dim() == 3 else allowed[None]
    expected = {
        (i, j)
        for i in range(run.query_tiles)
        for j in range(run.key_tiles)
        if not allowed[:, i * run.block_q : (i + 1) * run.block_q, j * run.block_k : (j + 1) * run.block_k].any()
    }
    assert set(run.skipped) == expected  # every wholly masked tile skipped, and no other
    for v in run.visits:  # each tile's scores are the trace's, ALiBi's bias from the tile's absolute indices
        if not v.skipped:
            rows, cols = slice(v.queries.start, v.queries.stop), slice(v.keys.start, v.keys.stop)
            scores = exact["scores"] if exact["scores"].dim() == 3 else exact["scores"][None]
            torch.testing.assert_close(v["scores"], scores[:, rows, cols], rtol=1e-5, atol=1e-5)
            if case.options.alibi is not None:
                bias = exact["position_bias"] if case.options.heads > 1 else exact["position_bias"][None]
                torch.testing.assert_close(v["position_bias"], bias[:, rows, cols])


def test_a_small_window_skips_the_tiles_behind_it_and_counts_them():
    case = random_case(n=10, d_k=4, d_v=4, seed=21, heads=2, window=2, alibi=[0.5, 0.25], sinks=[0.5, -1.0])
    run = tiled(case, 3, 2)  # query tiles 1-3, 4-6, 7-9, 10; key tiles of 2
    behind = [tile for tile in run.skipped if run.behind_window(*tile)]
    assert behind == [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (3, 3)]  # keys all more than 1 before
    above = [tile for tile in run.skipped if not run.behind_window(*tile)]
    assert all(j * 2 > (i + 1) * 3 - 1 for i, j in above)  # the rest: every key after every query of the tile
    assert check(run, attend(run.case)).agrees
    assert "of them behind the window of 2" in tiles_text(case, 3, 2)[0]
    first = run.visit(0, 0)  # the online softmax starts from the sink: m = s_h, ℓ = 1
    torch.testing.assert_close(first["m_before"], torch.tensor([[0.5] * 3, [-1.0] * 3]))
    torch.testing.assert_close(first["l_before"], torch.ones(2, 3))
    said = explain(run, "l", (1, 0), step="1.1").lines
    assert "m₀ = s_h = −1" in said[1] and "ALiBi" in said[0] and "The sink's share" in said[-1]


def test_a_wrong_window_in_the_tiles_is_caught(monkeypatch):
    """The check can fail: tiles that let one more key into the window differ from step 7."""
    from attention.tiles import compute as tiles

    case = random_case(n=8, d_k=4, d_v=4, seed=22, heads=2, window=3)
    real = tiles._tile_mask
    monkeypatch.setattr(
        tiles, "_tile_mask", lambda o, rows, cols, device: real(replace(o, window=4), rows, cols, device)
    )
    run = tiles.tiled(case, 3, 2)
    assert not check(run, attend(run.case)).agrees


def test_the_exported_script_with_every_option_asserts_step_7_and_counts_the_skipped(tmp_path):
    options = {"window": 2, "softcap": 2.0, "alibi": [0.5, 0.25], "sinks": [0.5, -1.0], "rope_base": 100.0,
               "rope_fraction": 0.5, "relative_bias": [[0.5, -1.0, 2.0, 0.0] * 2, [1.0, 0.0, -0.5, 0.25] * 2],
               "relative_max_distance": 6}  # fmt: skip
    case = random_case(n=9, d_k=8, d_v=4, seed=23, heads=2, **options)
    path = tmp_path / "tiles.py"
    text = to_script(case, 2, 3)
    path.write_text(text)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    run = tiled(case, 2, 3)
    assert f"tiles skipped (wholly masked): {len(run.skipped)}" in done.stdout and "equal step 7's" in done.stdout
    for broken in (
        text.replace("l = torch.ones(q.shape[:-1]", "l = torch.zeros(q.shape[:-1]"),  # the sink left out
        text.replace("(rows[:, None] - cols[None, :])  # ALiBi", "(rows[:, None] - cols[None, :] - k0)  # ALiBi"),
        text.replace("< WINDOW  # keys within", "< WINDOW + 1  # keys within"),
    ):
        assert broken != text
        path.write_text(broken)
        assert subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120).returncode


def test_the_page_with_a_window_says_how_many_tiles_it_skips():
    case = random_case(n=10, d_k=4, d_v=4, seed=21, heads=2, window=2, softcap=3.0)
    at = tiles_page({"case": case_to_link(case), "bq": "3", "bk": "2"})
    assert not at.exception
    said = " ".join(i.value for i in at.info)
    assert "7 behind the sliding window of 2" in said and "of 20 tiles" in said


def test_a_latent_case_tiles_keys_and_values_made_from_its_latent_and_a_wrong_latent_is_caught(monkeypatch):
    """Multi-head latent attention: the tiles read keys and values made from the latent, as step 3 makes them; tiles
    of an unnormed latent, or one a part in a thousand off, differ from step 7."""
    from attention.tiles import compute as tiles

    case = CASES["MLA: latent with its norm, decoupled RoPE key, grouped, causal"]
    exact = attend(case)
    _, keys, values = tiles._qkv(case, torch.device("cpu"))
    torch.testing.assert_close(keys, exact["keys"])  # (h, n, d): from the latent, turned
    torch.testing.assert_close(values, exact["values"])
    assert check(tiles.tiled(case, 3, 2), exact).agrees
    real = tiles.latent_of
    monkeypatch.setattr(tiles, "latent_of", lambda o, x, w: real(replace(o, latent_norm=None), x, w))
    assert not check(tiles.tiled(case, 3, 2), exact).agrees  # DeepSeek's norm of the latent left out
    monkeypatch.setattr(tiles, "latent_of", lambda o, x, w: real(o, x, w * 1.001))
    assert not check(tiles.tiled(case, 3, 2), exact).agrees


# Cross-attention: an n × n_kv score matrix, query tiles over the target's tokens and key tiles over the source's ------


def cross_case(seed: int, n: int, n_kv: int, latent: bool | None = None, **options):
    """A random case made cross-attention (tests.cases.with_keys_sentence: a source of n_kv rows, its own labels),
    and with latent (True or False: with or without its norm) multi-head latent attention too."""
    plain = case_to_dict(random_case(n=n, d_k=options.pop("d_k", 4), d_v=options.pop("d_v", 4), seed=seed, **options))
    cross = with_keys_sentence(plain, random.Random(seed), n_kv=n_kv)
    return parse_case(cross if latent is None else with_latent(cross, random.Random(seed), norm=latent))


CROSS_BLOCKED = ((1, 0, 1, 0, 0, 0, 1), (0, 0, 0, 0, 0, 0, 0), (1, 1, 0, 0, 0, 0, 0), (1, 1, 1, 1, 1, 1, 1))
CROSS = {
    "a longer source": cross_case(30, 5, 9),
    "a shorter source, 2 heads, w_out": cross_case(
        31, 6, 3, heads=2, w_out=[[1, 0, 2], [0, 1, 0], [0.5, 0, 1], [0, -1, 0]]
    ),
    "grouped, q/k norm, sqrt_dk": cross_case(32, 7, 5, d_k=8, heads=2, kv_heads=1, scale="sqrt_dk", **QK_NORM),
    "softcap, sinks": cross_case(33, 4, 6, heads=2, softcap=2.0, sinks=[0.5, -1.0]),
    "MLA with its norm": cross_case(34, 5, 7, latent=True, d_k=8, heads=2, kv_heads=1),
    "a mask hiding source tokens (a row hides all)": with_options(cross_case(35, 4, 7), mask=CROSS_BLOCKED),
}


@pytest.mark.parametrize("blocks", [(1, 1), (2, 3), (3, 2), (None, None), ("n", "n_kv")], ids=str)
@pytest.mark.parametrize("name", CROSS)
def test_cross_tiles_cover_n_by_n_kv_and_equal_step_7_and_pytorch(name, blocks):
    case = CROSS[name]
    b_q, b_k = (case.n if blocks[0] == "n" else blocks[0], case.n_kv if blocks[1] == "n_kv" else blocks[1])
    run = tiled(case, b_q, b_k)
    exact = attend(run.case)
    assert check(run, exact).agrees
    assert run.key_tiles == math.ceil(case.n_kv / run.block_k) and run.query_tiles == math.ceil(case.n / run.block_q)
    assert run.outputs.shape[0] == case.n and run.head_outputs.shape[1] == case.n  # a row per target token
    modern = any(getattr(case.options, option) is not None for option in MODERN)
    pytorch = oracle.flex_outputs(run.case) if modern else fused_outputs(run.case)
    assert compare("PyTorch", run.outputs, pytorch, tolerance(run.case, exact.__getitem__)).agrees
    scores = exact["scores"] if exact["scores"].dim() == 3 else exact["scores"][None]  # (h, n, n_kv)
    for v in run.visits:  # each tile's scores: the trace's rows and the source's columns
        if not v.skipped:
            rows, cols = slice(v.queries.start, v.queries.stop), slice(v.keys.start, v.keys.stop)
            torch.testing.assert_close(v["scores"], scores[:, rows, cols])
    assert sorted({k for v in run.visits for k in v.keys}) == list(range(case.n_kv))  # every source key, once a row
    if case.options.mask is None:  # no causal mask across two sentences: nothing is skipped
        assert not run.skipped


def test_a_cross_mask_skips_the_tiles_it_hides_wholly_and_no_others():
    case = CROSS["a mask hiding source tokens (a row hides all)"]
    run = tiled(case, 2, 3)  # query tiles 1-2, 3-4; key tiles 1-3, 4-6, 7
    assert set(run.skipped) == {(0, 1)}  # queries 1-2 see no source token 4-6 (row 2 sees none at all)
    assert check(run, attend(run.case)).agrees and (run.outputs[1] == 0).all()


def test_a_wrong_source_row_in_the_tiles_is_caught(monkeypatch):
    """The check can fail: tiles whose keys and values come from a source with one row changed differ from step 7."""
    from attention.tiles import compute as tiles

    case = CROSS["grouped, q/k norm, sqrt_dk"]
    exact = attend(case)
    assert check(tiles.tiled(case, 3, 2), exact).agrees
    real = tiles.latent_of  # what step 3's keys and values are made from: x_kv here (no latent)
    monkeypatch.setattr(tiles, "latent_of", lambda o, x, w: real(o, torch.cat((x[:3], x[3:4] + 0.5, x[4:])), w))
    assert not check(tiles.tiled(case, 3, 2), exact).agrees


def test_cross_block_sizes_are_checked_against_the_source_and_the_link_round_trips():
    case = CROSS["a longer source"]  # 5 target tokens, 9 source tokens
    assert check_blocks(5, 9, case.n, case.n_kv) == (5, 9)  # B_k past n: the source is longer
    with pytest.raises(CaseError) as bad:
        check_blocks(2, 10, case.n, case.n_kv)
    assert str(bad.value) == "B_k (keys per tile): must be from 1 to n_kv = 9 (the source's tokens), not 10"
    with pytest.raises(CaseError, match=r"B_q .*n = 5, not 6"):
        check_blocks(6, 2, case.n, case.n_kv)
    view = Tiling()
    view.choose_blocks("2", "7", case.n, case.n_kv)
    view.tile = (2, 1)
    assert view.error is None and view.blocks_for(case.n, n_kv=case.n_kv) == (2, 7)
    params = link(view)
    assert params == {"bq": "2", "bk": "7", "tile": "3.2"}
    opened, notice = tiles_state.open_link(params, case.n, case.n_kv)
    assert notice is None and (opened.blocks, opened.tile) == ((2, 7), (2, 1))
    _, refused = tiles_state.open_link({"bk": "7", "tile": "1.3"}, case.n, case.n_kv)  # 2 key tiles of 7 (of 9)
    assert "from 1.1 to 2.2" in str(refused)  # B_q left out: default_block(5) = 3, two query tiles
    assert default_blocks(case)[1] <= case.n_kv and Tiling().blocks_for(case.n, n_kv=case.n_kv) == (3, 5)


def test_the_cross_score_figure_labels_target_tokens_down_and_source_tokens_across():
    case = CROSS["a longer source"]
    trace = attend(case)
    fig = tiles_figures.tile_scores(trace, (2, 4), (), None, (2, 1))
    assert list(fig.data[0].y) == list(case.tokens) and list(fig.data[0].x) == list(case.key_tokens)
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    across = {s.x0 for s in lines if s.x0 == s.x1}  # key tiles' borders after source tokens 4 and 8
    assert across == {3.5, 7.5} and all(s.x1 == case.n_kv - 0.5 for s in lines if s.y0 == s.y1)
    box = fig.layout.shapes[-1]  # query tile 3 (token 5), key tile 2 (source tokens 5-8)
    assert (box.x0, box.x1, box.y0, box.y1) == (3.5, 7.5, 3.5, 4.5)
    assert "source tokens across" in fig.layout.title.text


def test_the_cli_tiles_a_cross_case_file(tmp_path, capsys):
    path = tmp_path / "case.json"
    path.write_text(dump_case(CROSS["a longer source"]))
    assert main(["tiles", str(path), "--block-k", "4"]) == 0
    out = capsys.readouterr().out
    assert "3 key tiles" in out and "over the 9 source tokens" in out and "equal step 7's" in out
    assert main(["tiles", str(path), "--block-k", "10"]) == 2
    assert "n_kv = 9 (the source's tokens), not 10" in capsys.readouterr().err


def _block_namespace(case):
    """What the tiled loop of the exported script reads from its eight steps, made by the core: the queries, keys
    and values (cross-attention's from x_kv), step 7's outputs, w_out, the mask, and the rule's tolerance."""
    from attention.base import tolerance as rule

    trace = attend(case)
    o = case.options
    w_out, mask = (None if m is None else torch.tensor(m) for m in (o.w_out, o.mask))
    return {
        "torch": torch, "math": math, "within": rule.within, "queries": trace["queries"], "keys": trace["keys"],
        "values": trace["values"], "outputs": trace.outputs, "tolerance": tolerance(case, trace.__getitem__),
        "w_out": w_out, "mask": mask,
    }  # fmt: skip


@pytest.mark.parametrize("name", list(CROSS))
def test_the_scripts_tiled_loop_runs_over_the_source_keys_and_asserts_step_7(name, capsys):
    case = CROSS[name]
    loop = "\n".join(tiles_script.block(case, 2, 3))
    assert "for k0 in range(0, n_kv, B_k):" in loop and "Cross-attention" in loop
    namespace = _block_namespace(case)
    exec(loop, namespace)  # the loop as the exported script runs it, on the eight steps' tensors
    assert namespace["tiled_outputs"].shape[0] == case.n and "equal step 7's" in capsys.readouterr().out
    short = loop.replace("range(0, n_kv, B_k)", "range(0, n_kv - B_k, B_k)")  # the last key tile left out
    with pytest.raises((AssertionError, RuntimeError, IndexError)), contextlib.redirect_stdout(io.StringIO()):
        exec(short, _block_namespace(case))


def test_the_exported_script_of_a_cross_case_runs_its_tiled_loop_and_asserts_step_7(tmp_path):
    """The whole script: the eight steps, then the loop (needs forward/script.py to make keys from x_kv)."""
    case = CROSS["a mask hiding source tokens (a row hides all)"]
    text = to_script(case, 2, 3)
    if "x_kv = [" not in text:  # the source's rows, as the eight steps' script would write them
        pytest.skip("the eight steps' script does not make cross-attention's keys from x_kv yet (forward/script.py)")
    path = tmp_path / "tiles.py"
    path.write_text(text)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tiles skipped (wholly masked): 1" in done.stdout and "equal step 7's" in done.stdout


def test_the_page_tiles_a_cross_case_with_both_sentences_labels():
    """Through the app: needs a link to carry the case's x_kv (attention/app, another change)."""
    case = CROSS["a longer source"]
    at = tiles_page({"case": case_to_link(case), "bk": "4"})
    if not session(at).case.cross:
        pytest.skip("the app does not load a cross-attention case from a link yet (attention/app)")
    assert not at.exception
    said = " ".join(i.value for i in at.info)
    assert "n × n_kv = 5 × 9" in said and "6 tiles of 3 × 4" in at.success[0].value  # 2 query tiles × 3 key tiles
    key_tiles = at.selectbox(key="tiles_key_tile").options  # over the source, by its own labels
    assert len(key_tiles) == 3 and key_tiles[-1] == f"3: {case.key_tokens[8]} … {case.key_tokens[8]}"
    assert any("source tokens across" in title for title in charts(at))
