"""Bad input of every kind: one error type, a message naming the place, nothing computed (core, files and CLI)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attention import CaseError, attend, case_to_dict, parse_case, resolve_device
from attention.base.case import Widths, head_counts
from attention.base.files import MAX_LINK_CHARS, case_from_link, case_to_link, dump_case, load_case
from attention.base.i18n import render
from attention.base.presets import article, random_case
from attention.forward.compute import Broadcast
from attention.forward.files import dump_trace
from attention.show.heatmap import labels

ROOT = Path(__file__).resolve().parents[1]


def good() -> dict:
    return json.loads(dump_case(article()))


def edit(path: str, value) -> dict:
    """The article's case with one place changed: 'x.1.2' is x[1][2]; 'options.heads' an option; value None deletes."""
    case = good()
    *parents, last = path.split(".")
    node = case
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    if value is DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return case


DELETE = object()

# (what a careless user or an attacker sends, the start of the message it must give)
BAD = [
    (edit("x.1.2", float("nan")), "x, row 2 (Input 2), column 3: is not a number (NaN)"),
    (edit("x.1.2", float("inf")), "x, row 2 (Input 2), column 3: is infinite"),
    (edit("x.1.2", float("-inf")), "x, row 2 (Input 2), column 3: is -infinite"),
    (edit("x.1.2", 1e308), "x, row 2 (Input 2), column 3: 1e+308 is larger than the limit 1e+06"),
    (edit("x.1.2", 10**400), "x, row 2 (Input 2), column 3: is larger than the limit"),
    (edit("x.1.2", "abc"), "x, row 2 (Input 2), column 3: 'abc' is not a number"),
    (edit("x.1.2", None), "x, row 2 (Input 2), column 3: is empty"),
    (edit("x.1.2", True), "x, row 2 (Input 2), column 3: 'True' is not a number"),
    (edit("w_query.3.0", -2e6), "w_query, row 4, column 1: -2e+06 is larger than the limit"),
    (edit("w_key.0.2", [1]), "w_key, row 1, column 3: '[1]' is not a number"),
    (edit("w_value.2", [1, 2]), "w_value, row 3: has 2 numbers, expected 3 like row 1"),
    (edit("x.0", 5), "x, row 1 (Input 1): must be a list of numbers"),
    (edit("x", []), "x: must be a non-empty list of rows"),
    # a sentence of up to 64 tokens may be as wide as a real model (up to 2,049 with its bias column:
    # attention/models/), its weights within 577 × 576 numbers each; a longer input 64
    (edit("x", [[]] * 3), "x: has 0 columns, expected between 1 and 2049"),
    (edit("x", [[1.0] * 4] * 1025), "x: has 1025 rows, expected between 1 and 1024"),
    (edit("x", [[1.0] * 2050] * 3), "x: has 2050 columns, expected between 1 and 2049"),
    (edit("w_query", [[1.0] * 2050] * 4), "w_query: has 2050 columns, expected between 1 and 2049"),
    ({**edit("x", [[1.0] * 65] * 65), "tokens": None}, "x: has 65 columns, expected between 1 and 64"),
    (edit("w_query", [[1.0] * 3] * 3), "w_query: has 3 rows, expected 4"),
    (edit("w_key", [[1.0] * 2] * 4), "w_key: has 2 columns, expected 3"),
    (edit("w_value", "abc"), "w_value: must be a non-empty list of rows, not text"),
    (edit("w_value", DELETE), "w_value: is missing"),
    (edit("format", "attention-case/3"), "format: must be 'attention-case/1' or 'attention-case/2'"),
    (edit("extra", 1), "case: unknown key 'extra'"),
    (edit("tokens", ["a", "b"]), "token labels: must be a list of 3 labels"),
    (edit("tokens", ["a", "a", "b"]), "token label 2: 'a' appears twice"),
    (edit("tokens", ["a", " ", "b"]), "token label 2: must be non-empty text"),
    (edit("tokens", ["a", "b\nc", "d"]), "token label 2: contains a control character"),
    (edit("tokens", ["a", "b" * 41, "d"]), "token label 2: is longer than 40 characters"),
    (edit("options.heads", 2), "Heads: 2 heads cannot split the 3 columns of the queries and keys (d_k) into equal"),
    (edit("options.heads", 0), "Heads: must be a whole number from 1 to 64"),
    (edit("options.heads", 1.5), "Heads: must be a whole number"),
    (edit("options.temperature", 0), "Temperature: must be at least 0.01"),
    (edit("options.temperature", -1), "Temperature: must be at least 0.01"),
    (edit("options.temperature", 1e9), "Temperature: 1e+09 is larger than the limit 100"),
    (edit("options.scale", "sqrt"), "Scale: must be 'none', 'sqrt_dk' or a positive number"),
    (edit("options.scale", -1), "Scale: must be at least 0.001, not -1"),
    (edit("options.scale", 1e-4), "Scale: must be at least 0.001, not 0.0001"),
    (edit("options.heads", 64), "Heads: 64 heads cannot split the 3 columns"),
    (edit("options.scale", float("nan")), "Scale: is not a number (NaN)"),
    (edit("options.mask", "upper"), "Mask: must be null, 'causal' or an n×n matrix"),
    (edit("options.mask", [[1, 0], [1, 1]]), "Mask: has 2 rows, expected 3"),
    (edit("options.mask", [[1, 0, 0], [1, 2, 0], [1, 1, 1]]), "Mask, row 2 (Input 2), column 2: 2 must be 0"),
    (
        edit("options.weights_override.2.1", -0.1),
        "Rounded softmax, row 3 (Input 3), column 2: -0.1 is negative",
    ),
    (edit("options.weights_override", [[1, 0], [0, 1]]), "Rounded softmax: has 2 rows, expected 3"),
    (edit("options.w_out", [[1.0]] * 2), "w_out: has 2 rows, expected 3"),
    (edit("options.dtype", "float16"), "dtype: must be 'float32' or 'float64'"),
    (edit("options.device", "tpu"), "Device: must be 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'"),
    (edit("options.colour", "red"), "options: unknown option 'colour'"),
    (edit("options", [1]), "options: must be a JSON object, not a list"),
    ([1, 2], "case: must be a JSON object, not a list"),
]


@pytest.mark.parametrize(("case", "message"), BAD, ids=[m.split(":")[0] + ":" + m.split(":")[1][:30] for _, m in BAD])
def test_bad_input_names_the_place(case, message):
    with pytest.raises(CaseError) as e:
        parse_case(case)
    assert str(e.value).startswith(message), str(e.value)


def test_messages_name_places_in_words_never_a_files_key():
    """A place reads "Heads", as the sidebar says, not the file's options.heads (issue 29); a count of heads that
    does not split the sizes says why and which counts do."""
    for case, _ in BAD:
        with pytest.raises(CaseError) as e:
            parse_case(case)
        place = str(e.value.where)  # (a file's unknown key is answered with the keys a file may have: its problem)
        assert not place.startswith(("options.", "tokens")) and "." not in place, str(e.value)
    with pytest.raises(CaseError) as e:
        parse_case(edit("options.heads", 2))
    assert render("zh", e.value.message).startswith("头数：2 个头无法把查询和键（d_k）的 3 列分成相等的块")
    assert render("zh", e.value.message).endswith("头数可以是 1, 3")
    wide = random_case(4, 4, 12, 6, seed=0)  # d_k = 12, d_v = 6: 1, 2, 3 and 6 heads split both
    assert head_counts(4, Widths.of(wide)) == (1, 2, 3, 6)
    assert head_counts(1024, Widths.of(wide), dtype="float64") == (1, 2, 3, 6)  # 6 × 1024² is within the limit
    assert head_counts(3, Widths(8, 4, 8), kv_heads=2) == (4,)  # grouped: w_key holds 2 heads of 8 / 4 columns


def test_a_wide_x_keeps_each_weight_within_a_real_models_numbers():
    """x as wide as a 2,048-wide model with its bias column; its weights then have as many columns as keep each
    within 577 × 576 numbers (a head of any such model, a whole layer of one up to SmolLM2's width)."""
    wide = {**good(), "x": [[0.5] * 1000] * 3, "tokens": None, "options": {}}
    head = {**wide, "w_query": [[0.1] * 332] * 1000, "w_key": [[0.1] * 332] * 1000, "w_value": [[0.1] * 8] * 1000}
    assert parse_case(head).d_k == 332
    with pytest.raises(CaseError, match="w_query: has 333 columns, expected between 1 and 332"):
        parse_case({**head, "w_query": [[0.1] * 333] * 1000})


def test_heads_with_override_is_refused():
    case = random_case(3, 4, 4, 4, seed=0, heads=2)
    with pytest.raises(CaseError, match=r"Rounded softmax: works with one head only"):
        parse_case({**case_to_dict(case), "options": {"heads": 2, "weights_override": [[1, 0, 0]] * 3}})


def test_absent_device_names_the_available_ones():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(CaseError, match=r"Device: 'cuda' is not available here \(.*\); available: cpu"):
        attend(parse_case(edit("options.device", "cuda")))


def test_bounds_keep_float32_finite():
    """Every number at the bound and every size at the limit: all steps stay finite in float32."""
    big, d = 1e6, 64
    for n, options in ((8, {"w_out": [[big] * d] * d, "scale": 100, "temperature": 0.01}), (1024, {})):
        override = {"weights_override": [[big] * n] * n} if n == 8 else {}
        case = parse_case(
            {
                "format": "attention-case/1",
                "x": [[big] * d] * n,
                "w_query": [[big] * d] * d,
                "w_key": [[-big] * d] * d,
                "w_value": [[big] * d] * d,
                "options": options | override,
            }
        )
        for step in attend(case).steps:
            for name, t in step.tensors.items():
                t = t[...] if isinstance(t, Broadcast) else t  # step 6 at n = 1024: made whole for the check
                assert t.isfinite().all(), (n, name)


def test_files_round_trip():
    case = random_case(4, 3, 2, 2, seed=3, mask="causal", temperature=0.5)
    assert load_case(dump_case(case)) == case
    trace = json.loads(dump_trace(attend(article())))
    assert trace["format"] == "attention-trace/1"
    assert trace["steps"][0]["tokens"] == ["Input 1", "Input 2", "Input 3"]
    assert trace["outputs"] == [[2.0, 7.0, 1.5], [2.0, 8.0, 0.0], [2.0, 7.7999997, 0.3]]  # float32, shortest form
    assert trace["steps"][5]["tensors"]["weighted"]["shape"] == [3, 3, 3]


def test_masked_scores_are_null_in_the_trace_file():
    trace = json.loads(dump_trace(attend(random_case(3, 2, 2, 2, mask="causal"))))
    assert trace["steps"][3]["tensors"]["scores"]["data"][0][1:] == [None, None]


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "case file: is not valid JSON (line 1, column 2"), (b"\xff\xfe", "case file: is not UTF-8 text")],
)
def test_bad_file_text(text, message):
    with pytest.raises(CaseError) as e:
        load_case(text)
    assert str(e.value).startswith(message)


def cli(*args, stdin: str = ""):
    return subprocess.run(
        [sys.executable, "-m", "attention", *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_cli_reproduces_the_article(tmp_path):
    preset = cli("preset", "article")
    assert preset.returncode == 0
    (tmp_path / "case.json").write_text(preset.stdout)
    run = cli("trace", str(tmp_path / "case.json"), "-o", str(tmp_path / "trace.json"))
    assert run.returncode == 0, run.stderr
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["outputs"] == [[2.0, 7.0, 1.5], [2.0, 8.0, 0.0], [2.0, 7.7999997, 0.3]]
    piped = cli("trace", "-", stdin=preset.stdout)
    assert json.loads(piped.stdout)["outputs"] == trace["outputs"]
    random = cli("preset", "random", "--n", "5", "--d-in", "4", "--d-k", "3", "--d-v", "3", "--seed", "0")
    assert load_case(random.stdout) == random_case(5, 4, 3, 3, seed=0)
    devices = cli("devices")
    assert devices.returncode == 0 and devices.stdout.startswith("cpu — ")


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (
            ("trace", "-"),
            json.dumps(edit("x.2.1", "1e400")),
            "error: x, row 3 (Input 3), column 2: '1e400' is not a number",
        ),
        (("trace", "-"), json.dumps(edit("x.2.1", 1e400)), "error: x, row 3 (Input 3), column 2: is infinite"),
        (("trace", "-"), "not json", "error: case file: is not valid JSON"),
        (("trace", "no-such-file.json"), "", "error: no-such-file.json: No such file or directory"),
        (
            ("trace", "-"),
            json.dumps(edit("options.device", "cuda:7")),
            "error: Device: 'cuda:7' is not available",
        ),
        (("preset", "random", "--n", "0"), "", "argument --n: must be a whole number from 1 to 1024"),
        (("preset", "random", "--d-k", "x"), "", "argument --d-k: must be a whole number from 1 to 64"),
        (("preset", "random", "--seed", "9" * 30), "", "argument --seed: must be a whole number from 0 to"),
        (("preset", "nonsense"), "", "argument name: invalid choice"),
        ((), "", "error: the following arguments are required: command"),
        (("trace", "-"), "[" * 100_000, "error: case file: is nested too deeply"),
        (("trace", "-"), '{"x": ' + "9" * 5000 + "}", "error: case file: is not a case"),
    ],
)
def test_cli_bad_input_is_one_line_and_no_traceback(args, stdin, message):
    run = cli(*args, stdin=stdin)
    assert run.returncode == 2
    assert message in run.stderr
    assert run.stderr.count("\n") == 1, run.stderr  # one line
    assert "Traceback" not in run.stderr
    assert run.stdout == ""


# The core: attention/base, each capability's core modules, and the models but their page's part (models/room.py)
CORE_MODULES = {"compute", "steps", "script", "explain", "files", "loss", "training", "teach", "oracle", "measured"}


def core_modules() -> list[str]:
    """Every core module of the package as it is laid out now (found, so a new one is checked too)."""
    found = []
    for path in sorted((ROOT / "attention").glob("**/*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts  # ("attention", capability, …, module)
        if parts[-1] == "__init__":
            continue
        capability_core = parts[1] != "app" and parts[-1] in CORE_MODULES  # the frame (app/) is never the core
        if parts[1] == "base" or (parts[1] == "models" and not parts[-1].endswith("room")) or capability_core:
            found.append(".".join(parts))
    return found


def test_core_never_imports_streamlit_or_plotly():
    modules = core_modules()
    for named in ("attention.base.explain", "attention.forward.compute", "attention.backward.loss",
                  "attention.decoding.compute", "attention.tiles.compute", "attention.devices.measured",
                  "attention.models.llama", "attention.models.script"):  # fmt: skip
        assert named in modules
    assert "attention.models.room" not in modules and "attention.tiles.room" not in modules
    code = (
        f"import sys, attention, runpy\nfor name in {modules!r}:\n    __import__(name)\n"
        "sys.argv = ['attention', 'devices']\n"
        "try:\n    runpy.run_module('attention', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('streamlit', 'plotly', 'pandas')]\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


# Every message that echoes a supplied value quotes a short excerpt of it (a link's field can unpack to millions of
# characters): one case per template.
HUGE_TEXT = "a" * 4_000_000
HUGE_LIST = [0] * 1_000_000
EVEN_D_K = case_to_dict(random_case(3, 4, 4, 2))  # RoPE turns pairs: the article's d_k = 3 is refused before positions
ECHOES = [
    ("format", lambda d: d | {"format": HUGE_TEXT}),
    ("unknown key", lambda d: d | {HUGE_TEXT: 1}),
    ("unknown option", lambda d: d | {"options": {HUGE_TEXT: 1}}),
    ("heads", lambda d: d | {"options": {"heads": HUGE_LIST}}),
    ("scale", lambda d: d | {"options": {"scale": HUGE_TEXT}}),
    ("mask", lambda d: d | {"options": {"mask": HUGE_TEXT}}),
    ("dtype", lambda d: d | {"options": {"dtype": HUGE_LIST}}),
    ("device", lambda d: d | {"options": {"device": HUGE_TEXT}}),
    ("zero or one", lambda d: d | {"options": {"mask": [[HUGE_TEXT, 1, 1], [1, 1, 1], [1, 1, 1]]}}),
    ("a number", lambda d: d | {"x": [[HUGE_TEXT, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]}),
    ("heads as a huge whole number", lambda d: d | {"options": {"heads": 10**5000}}),
    ("kv_heads", lambda d: d | {"options": {"heads": 3, "kv_heads": 10**5000}}),
    ("kv_heads as text", lambda d: d | {"options": {"heads": 3, "kv_heads": HUGE_TEXT}}),
    ("rope_base", lambda d: d | {"options": {"rope_base": HUGE_TEXT}}),
    ("a position", lambda d: EVEN_D_K | {"options": {"rope_base": 100.0, "positions": [0, HUGE_TEXT, 2]}}),
]


@pytest.mark.parametrize(("template", "change"), ECHOES, ids=[name for name, _ in ECHOES])
def test_a_message_quotes_at_most_an_excerpt_of_a_supplied_value(template, change):
    with pytest.raises(CaseError) as e:
        parse_case(change(case_to_dict(article())))
    assert len(str(e.value)) < 300, (template, len(str(e.value)))
    assert "…" in str(e.value) or "..." in str(e.value) or "bits" in str(e.value), str(e.value)


def test_a_repeated_token_and_an_absent_device_are_quoted_short():
    with pytest.raises(CaseError) as e:
        parse_case(case_to_dict(article()) | {"tokens": ["a" * 40, "a" * 40, "b"]})
    assert "appears twice" in str(e.value) and len(str(e.value)) < 200
    with pytest.raises(CaseError) as e:
        resolve_device("cuda:99")
    assert "'cuda:99' is not available here" in str(e.value)


def test_a_link_whose_field_unpacks_to_millions_of_characters_gets_a_short_message():
    import base64
    import json
    import zlib

    bomb = {**case_to_dict(article()), "format": "x" * 3_900_000}
    token = base64.urlsafe_b64encode(zlib.compress(json.dumps(bomb).encode(), 9)).decode().rstrip("=")
    assert len(token) < MAX_LINK_CHARS  # 3.9 million characters deflate to a short link
    with pytest.raises(CaseError) as e:
        case_from_link(token)
    assert str(e.value).startswith("format: must be 'attention-case/1' or 'attention-case/2', not 'xxx")
    assert len(str(e.value)) < 160


def test_the_bias_option_labels_xs_last_column_and_travels_in_a_file_and_a_link():
    case = random_case(3, 4, 3, 3, seed=1, bias=True)
    assert case.options.bias and case_to_dict(case)["options"] == {"bias": True}
    assert load_case(dump_case(case)) == case and case_from_link(case_to_link(case)) == case
    assert labels(attend(case), "feature", 4)[-1] == "1 (bias)"
    assert labels(attend(random_case(3, 4, 3, 3, seed=1)), "feature", 4)[-1] == "4"
    with pytest.raises(CaseError, match=r"Bias: is 'yes', not true or false"):
        parse_case({**case_to_dict(case), "options": {"bias": "yes"}})
