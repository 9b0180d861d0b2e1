"""Languages: the two catalogues agree, every key the code names exists, every visible text comes from them."""

import ast
import json
import re
import string
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attention import parse_case
from attention.app.registry import PAGES as REGISTRY
from attention.base import i18n
from attention.base.case import CaseError
from attention.base.files import case_from_link, case_to_link
from attention.base.i18n import LANGUAGES, Message, excerpt, language_for, msg, render, text
from attention.base.presets import article
from attention.forward.compute import AXES
from attention.forward.script import shown as shown_code
from attention.forward.steps import STEP_NAMES
from tests.apptest import APP, MASKED_CASE, PAGES, component_data, current_trace, edit, open_share_panel, session

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "attention").glob("**/*.py"))]
LOCALES = ROOT / "attention" / "base" / "locales"  # the message catalogues, one per language
TABLES = {lang: json.loads((LOCALES / f"{lang}.json").read_text()) for lang in LANGUAGES}


def fields(template: str) -> list[tuple[str, str | None, str]]:
    """The {name!conversion:spec} fields of a str.format template."""
    return sorted((name, conversion, spec) for _, name, spec, conversion in string.Formatter().parse(template) if name)


# The catalogues ---------------------------------------------------------------------------------------------------


def test_every_language_has_exactly_the_same_keys():
    english = set(TABLES["en"])
    for lang, table in TABLES.items():
        assert not english - set(table), f"{lang} lacks {sorted(english - set(table))}"
        assert not set(table) - english, f"{lang} has keys English lacks: {sorted(set(table) - english)}"


def test_every_template_has_the_same_fields_in_every_language():
    different = [
        f"{key}: en {fields(TABLES['en'][key])} vs {lang} {fields(table[key])}"
        for lang, table in TABLES.items()
        for key in table
        if fields(table[key]) != fields(TABLES["en"][key])
    ]
    assert not different, "\n".join(different)


def test_every_template_is_non_empty_and_chinese_where_it_has_words():
    for key, template in TABLES["zh"].items():
        assert template.strip(), key
        words = re.sub(r"\{[^}]*\}", "", TABLES["en"][key])
        if re.search(r"\b(the|a|is|of|to|and|on|by)\b", words):  # an English sentence: its translation has Chinese
            assert re.search(r"[\u4e00-\u9fff]", template), f"zh {key} looks untranslated: {template!r}"


# One Chinese term per concept (issue 29): a learner who reads 词元 on one page and "token" on the next wonders whether
# they differ. Each concept's other forms, as they once crept in; code (`…`) and {fields} are not words.
ZH_TERMS = {
    "词元 (token)": r"(?<![A-Za-z])tokens?(?![A-Za-z])",  # not \b: a CJK character is a word character to re
    "轨迹 (trace)": r"(?<![A-Za-z])traces?(?![A-Za-z])|追踪|计算记录",
    "用例 (case)": r"案例|例子",
    "四舍五入 (the article's rounded softmax)": r"取整",
    "键/值头 (key/value head)": r"键值头",
    "潜向量 (MLA's latent)": r"潜变量",
}


def test_chinese_uses_one_term_for_each_concept():
    mixed = []
    for key, template in TABLES["zh"].items():
        words = re.sub(r"\{[^}]*\}|`[^`]*`", "", template)
        mixed += [f"{key}: {term}: {m[0]!r}" for term, other in ZH_TERMS.items() for m in re.finditer(other, words)]
    assert not mixed, "\n".join(mixed)


# Keys named in the code: t("…"), _t("…"), msg("…"), text(lang, "…"), i18n.text(lang, "…"), hover(lang, "…").
# A key built by an f-string (t(f"step.{name}.title")) is a pattern; any other computed key is only allowed inside
# the catalogue's own plumbing.
KEY_ARGUMENT = {"t": 0, "_t": 0, "msg": 0, "Message": 0, "text": 1, "hover": 1}
PLUMBING = {("i18n.py", "text"), ("i18n.py", "render"), ("i18n.py", "__new__"), ("i18n.py", "_rebuild")}
PLUMBING |= {("language.py", "t"), ("heatmap.py", "hover"), ("navigation.py", "pages")}  # pages: the registry's


def _keys_in_code() -> tuple[dict[str, str], dict[str, str], list[str]]:
    literal, patterns, computed = {}, {}, []
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        inside = {}  # call -> the name of the innermost function it is in (ast.walk goes outer to inner)
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            inside |= {id(n): function.name for n in ast.walk(function)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            named = isinstance(f, ast.Name) or (
                isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("language", "i18n")
            )
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            if not named or name not in KEY_ARGUMENT or len(node.args) <= KEY_ARGUMENT[name]:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            arg = node.args[KEY_ARGUMENT[name]]
            for a in [arg.body, arg.orelse] if isinstance(arg, ast.IfExp) else [arg]:
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    literal.setdefault(a.value, where)
                elif isinstance(a, ast.JoinedStr):
                    parts = [re.escape(v.value) if isinstance(v, ast.Constant) else "[^.]+" for v in a.values]
                    patterns.setdefault("".join(parts), where)
                elif (path.name, inside.get(id(node), "")) not in PLUMBING:
                    computed.append(f"{where}: {ast.unparse(a)}")
    return literal, patterns, computed


def test_every_key_the_code_names_exists_and_every_key_is_used():
    literal, patterns, computed = _keys_in_code()
    literal |= {page.title: "attention/app/registry.py" for page in REGISTRY}  # the pages' titles: the registry's
    assert not computed, f"keys the test cannot read; name them literally: {computed}"
    missing = [f"{key} ({where})" for key, where in literal.items() if key not in TABLES["en"]]
    assert not missing, f"keys the code uses but the catalogue lacks: {missing}"
    unmatched = [f"{p} ({where})" for p, where in patterns.items() if not any(re.fullmatch(p, k) for k in TABLES["en"])]
    assert not unmatched, f"key patterns that match no key: {unmatched}"
    unused = [k for k in TABLES["en"] if k not in literal and not any(re.fullmatch(p, k) for p in patterns)]
    assert not unused, f"keys no code uses: {unused}"
    assert len(literal) > 200  # the scan found the app's calls


@pytest.mark.parametrize(
    ("locale", "lang"),
    [
        ("zh-CN", "zh"),
        ("zh-TW", "zh"),
        ("zh-Hans", "zh"),
        ("zh_CN", "zh"),
        ("zh", "zh"),
        ("ZH-cn", "zh"),
        ("en-US", "en"),
        ("en", "en"),
        ("fr-FR", "en"),
        ("", "en"),
        (None, "en"),
    ],
)
def test_language_for_a_browser_locale(locale, lang):
    assert language_for(locale) == lang


def test_a_missing_key_is_an_error_not_a_fallback():
    with pytest.raises(KeyError):
        text("zh", "no.such.key")
    with pytest.raises(KeyError):
        text("xx", "app.title")


def test_messages_read_as_english_and_render_in_any_language():
    error = CaseError(msg("where.column", where=msg("where.row_token", name="x", row=2, token="Input 2"), column=3),
                      msg("error.not_a_number", value=excerpt("abc")))  # fmt: skip
    assert str(error) == "x, row 2 (Input 2), column 3: 'abc' is not a number"  # the CLI's and str(e)'s English
    assert render("zh", error.message) == "x 第 2 行（Input 2），第 3 列：'abc' 不是数字"
    assert render("zh", 3) == 3 and render("zh", "scores") == "scores"  # data stays as it is
    assert Message("app.title") == "Attention, step by step"
    import copy
    import pickle

    for twin in (copy.deepcopy(error.message), pickle.loads(pickle.dumps(error.message))):
        assert twin == error.message and render("zh", twin) == render("zh", error.message)


def test_core_errors_name_the_place_in_chinese_too():
    with pytest.raises(CaseError) as bad:
        case_from_link(case_to_link(article())[:-12])
    assert render("zh", bad.value.message) == "链接：不是用例链接（无法解码）"
    d = json.loads(json.dumps({"format": "attention-case/1", "x": [[1]], "w_query": [[1]], "w_key": [[1]]}))
    with pytest.raises(CaseError) as missing:
        parse_case({**d, "w_value": [[1]], "options": {"heads": 0}})
    assert render("zh", missing.value.message) == "头数：必须是 1 到 64 之间的整数，而不是 0"


# Visible text: a pseudo language whose every template is wrapped in ⟦…⟧ --------------------------------------------

PSEUDO = "qps"
OPEN, CLOSE = "⟦", "⟧"
# What may show outside the catalogue: names of tensors, steps, dims, dtypes, devices, oracles and file formats, as
# in the code and the formulas; math symbols (one letter with subscripts); numbers and punctuation.
IDENTIFIERS = {*AXES, *STEP_NAMES, "d_in", "d_k", "d_v", "n_q", "n_k", "W_Q", "W_K", "W_V", "W_O", "None", "exp"}
IDENTIFIERS |= {"NaN", "float32", "float64", "cpu", "png", "svg", "scaled_dot_product_attention", "nn"}
IDENTIFIERS |= {"MultiheadAttention", "concat", "head_outputs"}
SUBSCRIPTS = re.compile(r"[ₐ-ₜⱼ₀-₉]")  # k₂, Σₖ, vⱼ: the explanations' math, one letter once these go
SYMBOL = re.compile(r"[A-Za-zΣ]")


@pytest.fixture
def pseudo(monkeypatch) -> None:
    """A language "qps" whose templates are the English ones inside ⟦…⟧ (AppTest runs the app in this process)."""
    english = i18n.table("en")
    table = {key: f"{OPEN}{template}{CLOSE}" for key, template in english.items()}
    monkeypatch.setitem(i18n.LANGUAGES, PSEUDO, "Pseudo")
    monkeypatch.setattr(i18n, "table", lambda lang: table if lang == PSEUDO else english if lang == "en" else {})


def leftover(shown: str, tokens: tuple[str, ...]) -> str:
    """What of a visible text is neither inside the markers nor allowed as it is; "" when all is well."""
    rest = shown
    while True:  # innermost first: a message may hold messages (a place inside an error)
        inner = re.sub(f"{OPEN}[^{OPEN}{CLOSE}]*{CLOSE}", " ", rest)
        if inner == rest:
            break
        rest = inner
    rest = re.sub(r"%\{[^}]*\}|<extra></extra>|:material/\w+:", " ", rest)  # Plotly placeholders, icons
    rest = SUBSCRIPTS.sub("", rest)
    for token in sorted(tokens, key=len, reverse=True):  # the user's token labels are data
        rest = rest.replace(token, " ")
    words = re.findall(r"[^\W\d_][\w.]*", rest)
    words = [w for part in words for w in re.split(r"\.", part) if w]
    return " ".join(w for w in words if w not in IDENTIFIERS and not SYMBOL.fullmatch(w))


def _is_link(code: str) -> bool:
    return re.fullmatch(r"\S*\?(\w+=[\w.-]*&?)+", code) is not None or code == ""  # explain=scores_raw.2.2


def visible_texts(at: AppTest) -> list[tuple[str, str]]:
    """(where, text) for every text a reader sees in this run, except LaTeX and Python code."""
    out: list[tuple[str, str]] = []

    def walk(node, where: str) -> None:
        kind = getattr(node, "type", "")
        if hasattr(node, "children"):
            if kind == "expandable" or getattr(node, "label", None):
                out.append((f"{where} expander", node.label))
            for child in node.children.values():
                walk(child, where)
            return
        key = getattr(node, "key", None) or ""
        label = f"{where} {kind}{f' {key}' if key else ''}"
        if kind in (
            "markdown",
            "caption",
            "header",
            "subheader",
            "title",
            "text",
            "error",
            "warning",
            "info",
            "success",
        ):
            out.append((label, node.value))
        elif kind == "code":
            if node.proto.language != "python" and not _is_link(node.value):  # explain's arithmetic, not code
                out.extend((label, line) for line in node.value.splitlines())
        elif kind == "dataframe":
            frame, config = node.value, json.loads(node.proto.columns or "{}")
            if node.proto.editing_mode:  # a data editor: its headers are the column config's labels
                out.extend((f"{label} column", c["label"]) for c in config.values() if "label" in c)
            else:
                out.extend((f"{label} column", str(c)) for c in frame.columns)
                out.extend((f"{label} cell", v) for v in frame.to_numpy().ravel() if isinstance(v, str))
            out.extend((f"{label} index", str(i)) for i in frame.index)
            out.append((f"{label} index name", str(frame.index.name or "")))
        elif kind == "table":  # a chart's text version
            frame = node.value
            out.extend((f"{label} column", str(c)) for c in frame.columns)
            out.extend((f"{label} cell", v) for v in frame.to_numpy().ravel() if isinstance(v, str))
            out.append((f"{label} index name", str(frame.index.name or "")))
        elif kind == "plotly_chart":
            spec = json.loads(node.proto.spec)
            out.append((f"{label} alt", node.proto.alt))
            layout = spec["layout"]
            out.append((f"{label} title", (layout.get("title") or {}).get("text", "")))
            for axis in ("xaxis", "yaxis"):
                out.append((f"{label} {axis}", ((layout.get(axis) or {}).get("title") or {}).get("text", "")))
            out.extend((f"{label} hover", d["hovertemplate"]) for d in spec["data"] if "hovertemplate" in d)
        elif kind == "bidi_component":  # a matrix editor: the words it shows or reads out (and its message)
            data = component_data(node) or {}
            out.extend((f"{label} {name}", text) for name, text in (data.get("text") or {}).items())
            out.append((f"{label} message", data.get("message", "")))
        elif kind in ("page_link", "download_button", "file_uploader", "button"):
            out.append((label, node.proto.label))
            out.append((f"{label} help", getattr(node.proto, "help", "")))
        else:  # widgets: their label, help and (formatted) options
            for name in ("label", "help"):
                if isinstance(value := getattr(node, name, None), str):
                    out.append((f"{label} {name}", value))
            if key != "lang":  # the language picker names each language in itself
                out.extend((f"{label} option", str(o)) for o in getattr(node, "options", []) or [])

    walk(at._tree, "")
    return [(where, t) for where, t in out if t]


def offenders(at: AppTest, scene: str) -> list[tuple[str, str, str, str]]:
    """(scene, where, text, the words outside the catalogue) for each such text of this run."""
    assert not at.exception, (scene, at.exception)
    tokens = current_trace(at).case.tokens
    texts = visible_texts(at)
    assert len(texts) > 40, (scene, texts)  # the walk found the page and the sidebar
    return [(scene, where, shown, bad) for where, shown in texts if (bad := leftover(shown, tokens))]


def report(found: list[tuple[str, str, str, str]]) -> str:
    """One line per text outside the catalogue: where it showed first, how often, and the words that gave it away."""
    seen: dict[tuple[str, str], list[str]] = {}
    for scene, where, shown, bad in found:
        seen.setdefault((where.strip(), shown), [bad, scene, 0])[2] += 1
    lines = [
        f"{shown!r} ({where}; first in {scene}, {n}×): {bad!r}" for (where, shown), (bad, scene, n) in seen.items()
    ]
    return f"{len(seen)} texts outside the catalogue:\n" + "\n".join(lines)


def open_app(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"] = PSEUDO
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.session_state["share_panel"] = True  # the Share and export panel open from the start: its texts too
    return at.run()


def every_page(at: AppTest, scene: str) -> list[str]:
    found = []
    for page in PAGES:
        at.switch_page(f"pages/{page}.py").run()
        for version in (e for e in at.expander if (e.key or "").endswith("_text")):
            at.session_state[version.key] = True  # every chart's text version open
        found += offenders(at.run(), f"{scene}/{page}")
    return found


def test_the_leftover_check_catches_words_and_allows_data():
    tokens = ("Input 1", "the cat")
    assert leftover("⟦Step {number}⟧ · scores_raw (3, 3) float32 q₂ · k₃ = −1", tokens) == ""
    assert leftover("⟦⟦x, row 2 (Input 1)⟧, column 3: ⟦'abc' is not a number⟧⟧", tokens) == ""
    assert leftover("weights: the cat sat", tokens) == "sat"
    assert leftover("Step 1 · ⟦Prepare inputs⟧", tokens) == "Step"
    assert leftover("第 1 步", tokens) == "第 步"  # Chinese outside the markers is not from the pseudo catalogue


def test_every_text_the_pages_show_comes_from_the_catalogue(pseudo):
    found = []
    at = open_app()
    found += every_page(at, "article")
    at.switch_page("pages/walkthrough.py").run()
    for step in STEP_NAMES:
        at.radio(key="step_picker").set_value(step).run()
        found += offenders(at, f"walkthrough step {step}")
    at.switch_page("pages/explain.py").run()
    for name in at.selectbox(key="explain_tensor").options:
        at.selectbox(key="explain_tensor").set_value(name).run()
        found += offenders(at, f"explain {name}")
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 1, "3", "abc")  # an invalid edit: the error names the place
    assert len(at.error) == 1
    found += offenders(at, "invalid edit")
    edit(at, "x", 1, "3", "1,5")  # a decimal comma: the message says what to change
    found += offenders(at, "decimal comma")
    edit(at, "x", 1, "3", 1.0)
    at.selectbox(key="mask").set_value("custom").run()  # the mask editor, and a value no mask takes
    edit(at, "mask", 0, "2", "2")
    found += offenders(at, "bad mask")
    at.selectbox(key="mask").set_value("none").run()

    # several heads (d_k = d_v = 3), textbook scaling, a temperature and w_out: every page, every explanation
    at.toggle(key="use_rounded").set_value(False).run()
    at.number_input(key="heads").set_value(3).run()
    at.selectbox(key="scale").set_value("sqrt_dk").run()
    at.number_input(key="temperature").set_value(0.5).run()
    assert not at.error
    found += every_page(at, "3 heads")
    at.switch_page("pages/multi_head.py").run()
    at.toggle(key="use_w_out").set_value(True).run()
    found += offenders(at, "3 heads, w_out")
    at.switch_page("pages/explain.py").run()
    for name in at.selectbox(key="explain_tensor").options:
        at.selectbox(key="explain_tensor").set_value(name).run()
        found += offenders(at, f"3 heads explain {name}")
    at.number_input(key="heads").set_value(4).run()  # + past the last count 3 allows: kept, with a notice
    found += offenders(at, "heads kept")
    at.number_input(key="heads").set_value(5).run()  # typed, does not divide 3: an error
    assert at.error
    found += offenders(at, "bad heads")
    assert not found, report(found)


def test_messages_of_links_masks_and_files_come_from_the_catalogue(pseudo):
    found = []
    at = open_app({"case": "not-a-case!!", "step": "99"})  # a bad link: two notices
    assert len(at.warning) == 2
    found += offenders(at, "bad link")
    masked = parse_case(MASKED_CASE | {"options": MASKED_CASE["options"] | {"device": "cuda"}})
    at = open_app({"case": case_to_link(masked), "step": "4"})  # row 3 fully masked; no GPU here: a notice
    at.switch_page("pages/walkthrough.py").run()
    found += offenders(at, "masked row")
    at.switch_page("pages/explain.py").run()
    for name in ("scores", "weights", "outputs_by_query"):
        at.selectbox(key="explain_tensor").set_value(name).run()
        at.selectbox(key=f"explain_{name}_0").set_value(2).run()  # the masked row
        found += offenders(at, f"masked explain {name}")
    at.file_uploader(key="upload").set_value(("bad.json", b"\xff", "application/json")).run()  # not UTF-8
    found += offenders(at, "bad file")
    assert not found, report(found)


# Chinese, and the language in the link ------------------------------------------------------------------------------


def chinese(query: dict[str, str] | None = None, locale: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    if locale:
        at.context["locale"] = locale
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.session_state["share_panel"] = True  # the Share and export panel open from the start: its texts too
    return at.run()


def test_every_page_renders_in_chinese():
    at = chinese({"lang": "zh"})
    for page in PAGES:
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])
    labels = [w.label for w in at.sidebar.selectbox]
    assert labels[:3] == ["语言 · Language", "预设", "缩放"]
    assert at.selectbox(key="preset").options == ["文章示例", "随机", "真实模型"]
    assert at.number_input(key="temperature").label == "温度"
    assert any("与 PyTorch 的 scaled_dot_product_attention 一致" in c.value for c in at.caption)
    at.switch_page("pages/walkthrough.py").run()
    assert at.header[0].value == "第 1 步 · 准备输入"
    assert article_formula("inputs") in at.latex[0].value  # the formula and the code are the same in both
    assert at.get("code")[0].value == shown_code(current_trace(at).case, "inputs")


def article_formula(step: str) -> str:
    from attention.forward.steps import formula

    return formula(step, article())


def test_an_invalid_edit_is_named_in_chinese():
    at = chinese({"lang": "zh"})
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 1, "3", "abc")
    assert "x 第 2 行（Input 2），第 3 列：'abc' 不是数字" in at.error[0].value
    assert "下面的数来自最后一次有效的输入" in at.error[0].value


def test_a_link_with_lang_opens_in_chinese_and_keeps_it():
    at = chinese({"lang": "zh", "step": "3"})
    assert session(at).lang == "zh"
    at.switch_page("pages/walkthrough.py").run()
    assert at.header[0].value.startswith("第 3 步")
    at.button(key="next").click().run()  # a rerun: the URL still says lang=zh
    assert at.query_params["lang"] == ["zh"] or at.query_params["lang"] == "zh"
    open_share_panel(at)
    link = next(c.value for c in at.get("code") if "step=" in c.value)
    assert link.endswith("step=scores&lang=zh")  # the step by its name
    at.selectbox(key="lang").set_value("en").run()  # English, the default: the link has no lang
    assert "lang" not in at.query_params
    assert at.header[0].value.startswith("Step 4")


def test_the_default_language_follows_the_browser_and_a_link_wins():
    assert session(chinese(locale="zh-CN")).lang == "zh"
    assert chinese(locale="zh-TW").sidebar.selectbox[1].label == "预设"
    assert session(chinese(locale="en-US")).lang == "en"
    assert session(chinese()).lang == "en"  # no locale (AppTest's default): English
    assert session(chinese({"lang": "en"}, locale="zh-CN")).lang == "en"
    bad = chinese({"lang": "xx"}, locale="zh-CN")
    assert session(bad).lang == "zh" and "xx" not in bad.warning[0].value
    assert "此链接中的语言不是 en, zh 之一" in bad.warning[0].value


def test_changing_the_language_keeps_the_numbers_options_and_step():
    at = chinese()
    at.number_input(key="n").set_value(4).run()
    at.selectbox(key="mask").set_value("causal").run()
    at.switch_page("pages/inputs.py").run()
    edit(at, "x", 1, "2", 5.0)
    session(at).step = "softmax"
    case = current_trace(at).case
    at.selectbox(key="lang").set_value("zh").run()
    assert current_trace(at).case == case and session(at).step == "softmax"
    assert at.selectbox(key="mask").value == "causal" and at.header[0].value == "输入与权重"
