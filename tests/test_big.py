"""Big n: heatmaps sent as one-byte-per-cell images, and the pages working from the on-demand broadcast."""

import base64
import json
import struct
import zlib

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import attend
from attention.base.presets import random_case
from attention.forward.compute import Broadcast
from attention.forward.figures import tensor_heatmap, weighted_heatmap
from attention.forward.files import dump_trace
from attention.show.describe import describe
from attention.show.heatmap import heatmap, highlight
from attention.show.image import IMAGE_TICKS
from tests.apptest import APP, current_trace, edit, session


def decode_png(uri: str) -> tuple[np.ndarray, bytes, bytes]:
    """Pixels (palette indices), palette and transparency of an 8-bit palette PNG data URI, read by hand."""
    raw = base64.b64decode(uri.removeprefix("data:image/png;base64,"))
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, pos = {}, 8
    while pos < len(raw):
        (length,) = struct.unpack(">I", raw[pos : pos + 4])
        kind, data = raw[pos + 4 : pos + 8], raw[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", raw[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + data), kind
        chunks[kind] = chunks.get(kind, b"") + data
        pos += 12 + length
    width, height, depth, colour_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour_type) == (8, 3)
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, width + 1)
    assert not rows[:, 0].any()  # filter type 0 on every row
    return rows[:, 1:], chunks[b"PLTE"], chunks[b"tRNS"]


def labels(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


def test_a_big_heatmap_is_an_image_of_its_values_on_the_colour_bar_scale():
    z = torch.randn(300, 200, generator=torch.Generator().manual_seed(0))
    z[7, 9] = float("-inf")  # a masked score: a transparent cell
    fig = heatmap(z, labels(300), labels(200), "query", "key", "scores")
    image, bar = fig.data
    pixels, palette, alpha = decode_png(image.source)
    assert pixels.shape == (300, 200)
    finite = z[torch.isfinite(z)]
    top = float(finite.abs().max())  # signed: centred on zero
    assert list(bar.z[0]) == [-top, top] and bar.colorscale and bar.reversescale
    expected = np.rint((z.numpy() + top) / (2 * top) * 254)
    expected[7, 9] = 255
    assert np.array_equal(pixels, expected.astype(np.uint8))
    assert alpha[255] == 0 and set(alpha[:255]) == {255}
    assert len(palette) == 256 * 3
    assert fig.layout.meta["image"] and image.x0 == 1 and image.y0 == 1  # cells counted from 1


def test_a_one_signed_big_heatmap_spans_its_range_and_small_ones_stay_heatmaps():
    w = torch.softmax(torch.randn(200, 200, generator=torch.Generator().manual_seed(1)), dim=-1)
    fig = heatmap(w, labels(200), labels(200), "query", "key")
    pixels, _, _ = decode_png(fig.data[0].source)
    assert pixels.min() == 0 and pixels.max() == 254  # Viridis from the smallest to the largest weight
    assert not fig.data[1].reversescale
    small = heatmap(w[:64, :64], labels(64), labels(64), "query", "key")
    assert small.data[0].type == "heatmap" and not small.layout.meta["image"]


def test_image_ticks_name_the_tokens_escaped_and_highlights_land_on_the_cells():
    names = labels(500)
    names[0] = "<b>bold</b>"
    fig = heatmap(torch.rand(500, 64), names, labels(64), "token", "feature")
    assert fig.layout.yaxis.ticktext[0] == "&lt;b&gt;bold&lt;/b&gt;" and fig.layout.yaxis.tickvals[0] == 1
    assert len(fig.layout.yaxis.tickvals) == IMAGE_TICKS and fig.layout.yaxis.tickvals[-1] == 500
    highlight(fig, (3,), (5,))  # 0-based cell (3, 5) is the pixel centred at (6, 4)
    rect = fig.layout.shapes[0]
    assert (rect.x0, rect.x1, rect.y0, rect.y1) == (5.5, 6.5, 3.5, 4.5)


def test_at_n_1024_the_heaviest_step_sends_less_than_the_raw_float32():
    trace = attend(random_case(1024, 64, 64, 64))
    assert isinstance(trace["weighted"], Broadcast)
    shown = [tensor_heatmap(trace, "scores_raw"), tensor_heatmap(trace, "scores")]
    sent = sum(len(f.to_json()) for f in shown)
    assert sent < 2 * 1024 * 1024 * 4 * 0.5, sent  # two n × n float32 matrices: under half their raw bytes


@pytest.fixture(scope="module")
def big_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.session_state["n"] = 100  # with d_v = 64, the broadcast's 640,000 numbers are past WHOLE_MAX_NUMBERS
    at.session_state["d_v"] = 64
    return at.run()


@pytest.mark.parametrize("step", ["weighted", "outputs", "repeat"])
def test_walkthrough_steps_6_to_8_at_big_n_say_what_was_not_kept(big_app, step):
    session(big_app).step = step
    big_app.switch_page("pages/walkthrough.py").run()
    assert not big_app.exception and not big_app.error
    notes = " ".join(i.value for i in big_app.info)
    if step == "weighted":
        assert "would hold 640,000 numbers" in notes
    if step == "repeat":
        assert "for queries 1-16 of 100" in notes
    assert big_app.get("plotly_chart")


@pytest.mark.parametrize("page", ["broadcasting", "explain", "one_query"])
def test_pages_that_slice_the_broadcast_work_at_big_n(big_app, page):
    if page == "explain":
        big_app.session_state["explain_tensor"] = "weighted"
    big_app.switch_page(f"pages/{page}.py").run()
    assert not big_app.exception and not big_app.error
    if page == "explain":
        t = current_trace(big_app)
        j, i = big_app.session_state["explain_weighted_0"], big_app.session_state["explain_weighted_1"]
        value = float(t["weights"][i, j] * t["values"][j, 0])  # weighted[j, i, 0], made here as the oracle
        assert value != 0
        last = big_app.code[0].value.splitlines()[-1]  # the arithmetic's last line ends "= <the number>"
        assert float(last.rsplit("=", 1)[1]) == pytest.approx(value, rel=1e-6), last
    if page == "broadcasting":
        product = json.loads(big_app.get("plotly_chart")[2].proto.spec)["data"][0]
        assert product["type"] == "heatmap"  # (n_q, d_v) = 100 × 64 cells: still a heatmap


def test_the_text_version_of_an_image_reads_its_numbers_from_the_summary_it_carries():
    z = torch.randn(200, 150, generator=torch.Generator().manual_seed(2))
    z[4] = float("-inf")  # a fully masked row
    rows, cols = labels(200), labels(150)
    fig = heatmap(z, rows, cols, "query", "key", "scores")
    assert fig.layout.meta["image"]
    _, summary, table = describe(fig)
    finite = torch.where(z.isfinite(), z, float("nan"))
    i, j = divmod(int(torch.where(z.isfinite(), z, -float("inf")).argmax()), 150)
    assert f"Smallest {float(finite.nan_to_num(float('inf')).min()):.4g}" in summary
    assert f"largest {float(z[i, j]):.4g} (at query t{i}, key t{j})" in summary
    assert "150 cells are masked" in summary and "30,000 cells are too many" in summary
    assert list(table.index) == rows and table.iloc[4].tolist() == ["−∞"] * 3
    assert table.iloc[7, 1] == f"{float(z[7].max()):.4g}"


def test_a_big_trace_file_has_the_broadcasts_shape_and_no_numbers():
    trace = attend(random_case(70, 4, 4, 64, seed=3))
    steps = {step["name"]: step for step in json.loads(dump_trace(trace))["steps"]}
    weighted = steps["weighted"]["tensors"]["weighted"]
    assert weighted["shape"] == [70, 70, 64] and weighted["data"] is None
    assert "would hold 313,600 numbers" in steps["weighted"]["notes"][0]
    assert len(steps["repeat"]["tensors"]["outputs_by_query"]["data"]) == 16


def test_images_of_odd_matrices_draw_without_garbage():
    labels_200 = labels(200)
    constant = heatmap(np.full((200, 200), 3.0), labels_200, labels_200, "query", "key")
    assert set(decode_png(constant.data[0].source)[0].ravel()) == {127}  # mid-scale, as one value has no range
    masked = heatmap(np.full((200, 200), -np.inf), labels_200, labels_200, "query", "key")
    assert set(decode_png(masked.data[0].source)[0].ravel()) == {255} and not masked.data[1].showscale
    spikes = np.zeros((200, 200))
    spikes[0, 0], spikes[1, 1] = np.inf, -1.0
    pixels = decode_png(heatmap(spikes, labels_200, labels_200, "query", "key").data[0].source)[0]
    assert pixels.max() <= 255 and pixels[1, 1] == 0  # +inf is clipped into the scale, not wrapped around


def test_step_6_as_an_image_hovers_with_cell_positions_not_pixel_colours():
    trace = attend(random_case(32, 4, 4, 64, seed=4))  # 32 · 32 rows × 64 columns: an image
    fig = weighted_heatmap(trace)
    assert fig.layout.meta["image"] and "%{z" not in fig.data[0].hovertemplate
    small = weighted_heatmap(attend(random_case(4, 4, 4, 3, seed=4)))
    assert "%{z" in small.data[0].hovertemplate


def test_highlights_leave_out_rows_the_figure_does_not_draw():
    trace = attend(random_case(100, 4, 4, 64, seed=5))
    fig = weighted_heatmap(trace)  # 1024 // 100 = 10 keys of 100 queries drawn
    assert fig.layout.meta["rows"] == 1000
    highlight(fig, tuple(j * 100 + 3 for j in range(100)), (0,))  # query 3's row under every key
    assert len(fig.layout.shapes) == 2 * 10  # an outline and its halo for the 10 keys drawn


def test_a_broadcast_takes_any_integer_as_a_head_and_keeps_float64():
    trace = attend(random_case(70, 8, 8, 64, seed=6, heads=2, dtype="float64"))
    weighted = trace["weighted"]
    whole = trace["values"][..., :, None, :] * trace["weights"].mT[..., :, :, None]
    for head in (1, -1, np.int64(1), torch.tensor(1)):
        one = weighted[head]
        assert isinstance(one, Broadcast) and tuple(one.shape) == (70, 70, 32)
        torch.testing.assert_close(one[5], whole[int(head)][5], rtol=0, atol=0)
    assert weighted[0][2, 3].dtype == torch.float64


def test_a_new_option_checks_the_options_alone_and_a_cell_edit_checks_everything(monkeypatch):
    from attention.app import session as state

    calls = []
    real = state.parse_case
    monkeypatch.setattr(state, "parse_case", lambda candidate: calls.append(1) or real(candidate))
    at = AppTest.from_file(APP, default_timeout=60).run()
    calls.clear()
    at.number_input(key="temperature").set_value(0.5).run()
    assert not calls and current_trace(at).case.options.temperature == 0.5
    at.number_input(key="heads").set_value(4).run()  # d_k = 3 does not divide by 4: refused, said in words
    assert not calls and "Heads: 4 heads cannot split" in at.error[0].value
    at.number_input(key="heads").set_value(1).run()
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 1, "2", 5.0)
    assert calls and current_trace(at).case.x[1][1] == 5.0
    assert current_trace(at).case.options.temperature == 0.5


def test_a_rerun_that_changes_no_number_reuses_the_figures_and_an_edit_makes_new_ones(monkeypatch):
    from attention.forward import figures  # the pages draw through this module's tensor_heatmap

    made = []
    real = tensor_heatmap
    monkeypatch.setattr(
        figures, "tensor_heatmap", lambda *args, **kwargs: made.append(args[1]) or real(*args, **kwargs)
    )
    at = AppTest.from_file(APP, default_timeout=60).run()  # the overview draws the outputs
    at.switch_page("pages/walkthrough.py").run()
    assert made == ["outputs", "x"]  # step 1 draws x
    at.run()
    at.switch_page("pages/inputs.py").run()
    assert made == ["outputs", "x"]  # the same numbers: the same figures, from the session's cache
    edit(at, "x", 1, "2", 5.0)
    assert made == ["outputs", "x", "outputs"]  # new numbers: a new figure
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert chart["type"] == "heatmap"
