"""The house: arrows one way (core ← figures ← the Streamlit side ← pages), small rooms, no private Streamlit API."""

import ast
import sys
from pathlib import Path

import pytest

from attention.app.pages import PAGES

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)
# Each layer and the outside packages it may import, besides the standard library and the layers below it.
LAYERS = {
    "core": {"torch"},
    # the real models' loaders (attention/models/): beside the core, with the readers of the models' files
    "models": {"torch", "gguf", "safetensors", "tokenizers"},
    "figures": {"numpy", "pandas", "plotly", "torch"},
    "app": {"streamlit", "numpy", "pandas", "plotly", "torch", "segno"},
    "pages": {"streamlit", "numpy", "pandas", "plotly", "torch"},
}
FIGURES = {"attention/figures.py", "attention/tile_figures.py", "attention/decoding_figures.py"}  # pure builders
BELOW = {"core": {"core"}, "models": {"core", "models"}, "figures": {"core", "figures"}}
BELOW["app"] = {"core", "models", "figures", "app"}
BELOW["pages"] = {"core", "models", "figures", "app"}


def layer(path: Path) -> str:
    relative = path.relative_to(ROOT)
    if relative.parts[0] == "pages" or relative == Path("app.py"):
        return "pages"
    if relative.parts[:2] == ("attention", "app"):
        return "app"
    if relative.parts[:2] == ("attention", "models"):
        return "models"
    return "figures" if relative.as_posix() in FIGURES else "core"


def imports(path: Path, package: str | None = None, nodes: list | None = None) -> list[tuple[str, int]]:
    """(the module imported, its line): relative imports resolved against the file's package (attention.…)."""
    package = package or ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text())) if nodes is None else nodes:
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = f"{base}.{node.module}" if node.level and node.module else base if node.level else node.module
            names = [f"{module}.{a.name}" for a in node.names] if node.level and not node.module else [module]
            out += [(name, node.lineno) for name in names]
    return out


def module_layer(module: str) -> str | None:
    """The layer of one of the project's modules (None: an outside package)."""
    if f"{module.replace('.', '/')}.py" in FIGURES:
        return "figures"
    if module == "attention.models" or module.startswith("attention.models."):
        return "models"
    if module.startswith("attention.app"):
        return "app"
    return "core" if module == "attention" or module.startswith("attention.") else None


SOURCES = [ROOT / "app.py", *sorted(ROOT.glob("pages/*.py")), *sorted(ROOT.glob("attention/**/*.py"))]


def wrong_way(found: list[tuple[str, int]], mine: str) -> list[str]:
    """The imports a file of layer `mine` may not make."""
    wrong = []
    for module, line in found:
        theirs, top = module_layer(module), module.split(".")[0]
        if theirs is None and top not in STDLIB and top not in LAYERS[mine]:
            wrong.append(f"line {line}: {module} (outside packages allowed here: {sorted(LAYERS[mine])})")
        elif theirs is not None and theirs not in BELOW[mine]:
            wrong.append(f"line {line}: {module} is {theirs}, above {mine}")
    return wrong


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_one_way(path):
    assert not wrong_way(imports(path), layer(path))


def test_the_import_check_catches_arrows_the_wrong_way(tmp_path):
    module = tmp_path / "case.py"
    module.write_text("import streamlit\nfrom .app import state\nfrom . import figures\nimport json\n")
    wrong = wrong_way(imports(module, package="attention"), "core")
    assert [w.split(":")[0] for w in wrong] == ["line 1", "line 2", "line 3"]
    figures = tmp_path / "figures.py"
    figures.write_text("from .app.cache import Derived\nimport plotly\n")
    assert len(wrong_way(imports(figures, package="attention"), "figures")) == 1


def test_the_streamlit_side_is_small_rooms_and_everything_short_functions():
    long = []
    for path in SOURCES:
        text = path.read_text()
        if layer(path) == "app" and len(text.splitlines()) > 300:
            long.append(f"{path.name}: {len(text.splitlines())} lines")
        assert text.startswith('"""'), f"{path} does not open with a line saying what it is"
        for node in ast.walk(ast.parse(text)):
            size = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if (isinstance(node, ast.ClassDef) and size > 150) or (isinstance(node, ast.FunctionDef) and size > 60):
                long.append(f"{path.name}: {node.name} has {size} lines")
    assert not long, long


def test_no_private_streamlit_name_is_used():
    private = []
    for path in SOURCES:
        for module, line in imports(path):
            public = module == "streamlit" or module.startswith(("streamlit.testing", "streamlit.navigation.page"))
            if module.startswith("streamlit") and not public:
                private.append(f"{path.name}:{line}: {module}")
        text = path.read_text()
        private += [
            f"{path.name}: {name}" for name in ("PagesManager", "_mpa_v1", "uses_pages_directory") if name in text
        ]
    assert not private, private


def test_the_page_registry_is_the_one_list_of_pages():
    assert sorted(p.file for p in PAGES) == sorted(f"pages/{p.name}" for p in ROOT.glob("pages/*.py"))
    assert len({p.url_path for p in PAGES}) == len(PAGES) and sum(not p.url_path for p in PAGES) == 1
    for path in [ROOT / "app.py", ROOT / "tests" / "apptest.py", ROOT / "bench" / "app.py"]:
        text = path.read_text()
        assert "pages/walkthrough.py" not in text and '"walkthrough",' not in text, f"{path.name} lists pages itself"


def runtime_imports(path: Path, package: str | None = None) -> list[str]:
    """The project's modules a file imports when it runs, deferred ones inside functions too; not those under
    `if TYPE_CHECKING:` (read by type checkers alone)."""
    tree = ast.parse(path.read_text())
    hidden = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for child in node.body
        for inner in ast.walk(child)
    }
    kept = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in hidden]
    return [module for module, _ in imports(path, package, kept) if module.startswith("attention.app")]


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of the graph (module -> the modules it imports), each once, from its first module."""
    found, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        for other in sorted(graph.get(module, ())):
            if other in path:
                circle = path[path.index(other) :]
                if frozenset(circle) not in done:
                    done.add(frozenset(circle))
                    found.append([*circle, other])
            elif other not in checked:
                visit(other, [*path, other])
        checked.add(module)

    checked: set[str] = set()
    for module in sorted(graph):
        visit(module, [module])
    return found


def app_graph() -> dict[str, set[str]]:
    """The Streamlit side's imports: a module imports a package's __init__ too when it imports something in it."""
    graph = {}
    for path in sorted(ROOT.glob("attention/app/**/*.py")):
        found = set()
        for module in runtime_imports(path):
            while module not in {module_of(p) for p in ROOT.glob("attention/app/**/*.py")} and "." in module:
                module = module.rsplit(".", 1)[0]  # a name imported from a module: the module
            found.add(module)
        graph[module_of(path)] = found - {module_of(path)}
    return graph


def test_the_streamlit_side_has_no_import_circle():
    assert circles(app_graph()) == []


def test_the_circle_check_finds_a_circle_hidden_by_a_deferred_import(tmp_path):
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    module = tmp_path / "loader.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .state import S\n"
                      "def f():\n    from .language import lang\n")  # fmt: skip
    assert runtime_imports(module, package="attention.app") == ["attention.app.language"]


# Who may ask which origin or model a case has: the origins and the models themselves (and their own room).
ASKERS = {"attention/app/model_room.py"}
ASKING = ("isinstance(", '== "real"', "== 'real'", '"smollm2"', '"minilm"', "spec.name ==", "ModelHead", "is_real")


def asks(line: str) -> bool:
    """Whether a line asks which origin or model a case has (an isinstance of a plain type, a str, asks neither)."""
    kind = "origin" in line.lower() or "source" in line or "Model" in line
    return any(w in line for w in ASKING if w != "isinstance(") or ("isinstance(" in line and kind)


def test_no_file_outside_the_origins_and_models_asks_which_it_is():
    asking = []
    for path in SOURCES:
        name = path.relative_to(ROOT).as_posix()
        if name in ASKERS or name.startswith(("attention/app/origins/", "attention/models/")):
            continue
        lines = enumerate(path.read_text().splitlines(), start=1)
        asking += [f"{name}:{number}: {line.strip()}" for number, line in lines if asks(line)]
    assert not asking, asking


def test_the_asking_check_catches_the_old_ways_of_asking():
    for line in (
        'if session.controls.preset == "real":',
        'bert=self.spec.name == "minilm"',
        "if isinstance(session.origin, ModelHead):",
        "own = realcase.is_real(session)",
    ):
        assert asks(line), line
    assert not asks("return value if isinstance(value, str) else excerpt(value)")


def test_the_readmes_layout_lists_every_file_of_the_package():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("```")[1]
    files = [*ROOT.glob("attention/**/*.py"), *ROOT.glob("attention/app/web/*"), *ROOT.glob("pages/*.py")]
    unlisted = [
        f.relative_to(ROOT).as_posix()
        for f in files
        if "__pycache__" not in f.parts and not any(f"{part}" in layout for part in [f.name])
    ]
    folders = {f.parent.name + "/" for f in files if f.parent != ROOT} - {"web/"}
    assert not unlisted and all(folder in layout for folder in folders), (unlisted, folders)
