"""The house: a folder per capability, each module's layer read from its name, arrows one way, no import circle
anywhere in the package, small rooms, every capability registered once, no private Streamlit API."""

import ast
import sys
from pathlib import Path

import pytest

from attention.app.registry import CAPABILITIES, PAGES

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)
SHARED = ("base", "show", "app", "models")  # the shared base, shared display, the frame, the real models
# A capability is a folder that registers itself (its link.py); the registry lists each once (attention/app/registry.py)
CAPABILITY_FOLDERS = sorted(p.parent.name for p in (ROOT / "attention").glob("*/link.py"))
# A module's layer follows from its name (or its name's last part: explain_room is a room); a name not here is core.
LAYER_OF_NAME = {"figures": "figures", "state": "state", "link": "room", "room": "room", "page": "page"}
ORDER = ("core", "figures", "state", "room", "page")  # a layer imports only itself and those before it
# The frame (attention/app/) is what capabilities plug into: their state, rooms and pages use its session and widgets,
# and it loops over their registry (link.py) and runs their pages by pages/. Arrows between them: no circle (below).
FRAME_USES = {"core", "figures", "state", "room", "frame"}
# Each layer's outside packages, besides the standard library (and those of the layers before it).
PACKAGES = {
    "core": {"torch"},
    "figures": {"numpy", "pandas", "plotly"},
    "state": set(),
    "room": {"streamlit", "segno"},
    "page": set(),
}
READERS = {"gguf", "safetensors", "tokenizers"}  # the real models' files (attention/models/, core)


def layer(path: Path) -> str:
    """A file's layer: pages/ and app.py; the frame (attention/app/); else by its name."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] == "pages" or parts == ("app",):
        return "pages"
    if parts[1] == "app":
        return "frame"
    if parts[1] in ("base", "__init__", "__main__"):
        return "core"
    if parts[1] == "show":
        return "figures"
    return LAYER_OF_NAME.get(parts[-1].rsplit("_", 1)[-1], "core")


def allowed_packages(mine: str) -> set[str]:
    below = ORDER if mine in ("frame", "pages") else ORDER[: ORDER.index(mine) + 1]
    return set().union(*(PACKAGES[name] for name in below))


def may_import(mine: str, theirs: str) -> bool:
    """Whether a module of layer `mine` may import one of layer `theirs`."""
    if mine == "pages" or theirs == "pages":
        return mine == "pages"
    if mine == "frame" or theirs == "frame":
        return theirs in FRAME_USES if mine == "frame" else mine in ("state", "room", "page")
    return ORDER.index(theirs) <= ORDER.index(mine)


def imports(path: Path, package: str | None = None, nodes: list | None = None) -> list[tuple[str, int]]:
    """(the module imported, its line): relative imports resolved against the file's package (attention.…)."""
    package = package or ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    if path.name == "__init__.py" and package is None:
        package = ".".join(path.relative_to(ROOT).parts[:-1])
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


SOURCES = [ROOT / "app.py", *sorted(ROOT.glob("pages/*.py")), *sorted(ROOT.glob("attention/**/*.py"))]
MODULES = {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in SOURCES}


def module_path(module: str) -> Path | None:
    """The project's file of an imported module (a name imported from a module: the module's; a package: its face)."""
    while module:
        for name in (module, f"{module}.__init__"):
            if name in MODULES:
                return MODULES[name]
        module = module.rpartition(".")[0]
    return None


def wrong_way(found: list[tuple[str, int]], path: Path, mine: str) -> list[str]:
    """The imports a file of layer `mine` may not make: an outside package past its layer's, a later layer's module."""
    wrong, packages = [], allowed_packages(mine) | (READERS if "models" in path.parts else set())
    for module, line in found:
        top, theirs = module.split(".")[0], module_path(module) if module.startswith("attention") else None
        if top not in ("attention", "pages") and top not in STDLIB and top not in packages:
            wrong.append(f"line {line}: {module} (outside packages allowed here: {sorted(packages)})")
        elif theirs is not None and not may_import(mine, layer(theirs)):
            wrong.append(f"line {line}: {module} is {layer(theirs)}, which {mine} may not import")
    return wrong


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_one_way(path):
    assert not wrong_way(imports(path), path, layer(path))


def test_the_layer_check_catches_arrows_the_wrong_way(tmp_path):
    compute = ROOT / "attention" / "tiles" / "compute.py"
    found = [("streamlit", 1), ("attention.tiles.room", 2), ("attention.show.heatmap", 3), ("json", 4)]
    assert [w.split(":")[0] for w in wrong_way(found, compute, "core")] == ["line 1", "line 2", "line 3"]
    figures = ROOT / "attention" / "tiles" / "figures.py"
    assert len(wrong_way([("attention.app.charts", 1), ("plotly", 2)], figures, "figures")) == 1
    assert layer(ROOT / "attention" / "forward" / "explain_room.py") == "room"
    assert layer(ROOT / "attention" / "backward" / "training.py") == "core"


def test_every_capability_is_a_folder_with_its_parts_and_registered_once():
    folders = {p.name for p in (ROOT / "attention").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {*SHARED, *CAPABILITY_FOLDERS}, folders - {*SHARED, *CAPABILITY_FOLDERS}
    registered = [c.name for c in CAPABILITIES]
    assert sorted(registered) == CAPABILITY_FOLDERS and len(set(registered)) == len(registered)
    for name in CAPABILITY_FOLDERS:
        parts = {p.stem for p in (ROOT / "attention" / name).glob("*.py")}
        assert {"__init__", "link", "page"} <= parts, (name, parts)  # registered by link.py, drawn by page.py
        assert any(layer(ROOT / "attention" / name / f"{part}.py") == "core" for part in parts - {"__init__"}), name


def test_the_registry_is_the_one_list_of_pages_and_each_page_file_is_short():
    assert sorted(p.file for p in PAGES) == sorted(f"pages/{p.name}" for p in ROOT.glob("pages/*.py"))
    assert len({p.url_path for p in PAGES}) == len(PAGES) and sum(not p.url_path for p in PAGES) == 1
    for path in ROOT.glob("pages/*.py"):  # its URL: one call of its capability's page body
        code = [line for line in path.read_text().split('"""', 2)[2].splitlines() if line.strip()]
        assert len(code) == 2 and code[0].startswith("from attention."), (path.name, code)
    for path in [ROOT / "app.py", ROOT / "tests" / "apptest.py", ROOT / "bench" / "app.py"]:
        text = path.read_text()
        assert "pages/walkthrough.py" not in text and '"walkthrough",' not in text, f"{path.name} lists pages itself"


def test_the_streamlit_side_is_small_rooms_and_everything_short_functions():
    long = []
    for path in SOURCES:
        text = path.read_text()
        if layer(path) in ("room", "page", "frame") and len(text.splitlines()) > 300:
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


def project_imports(path: Path, package: str | None = None) -> list[str]:
    """The project's modules a file imports: at its top, inside functions (deferred) and for type checkers alone
    (`if TYPE_CHECKING:`) alike, since each is an arrow a reader follows."""
    return [module for module, _ in imports(path, package) if module.startswith("attention")]


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


def package_graph() -> dict[str, set[str]]:
    """The package's imports, file to file (a name imported from a module: the module)."""
    graph = {}
    for path in sorted(ROOT.glob("attention/**/*.py")):
        found = {module_path(module) for module in project_imports(path)} - {None, path}
        graph[str(path.relative_to(ROOT))] = {str(p.relative_to(ROOT)) for p in found}
    return graph


def test_no_import_circle_anywhere_in_the_package():
    assert circles(package_graph()) == []


def test_the_circle_check_finds_a_circle_hidden_by_a_deferred_or_type_checking_import(tmp_path):
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    module = tmp_path / "loader.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .state import S\n"
                      "def f():\n    from .language import lang\n")  # fmt: skip
    assert project_imports(module, package="attention.app") == ["attention.app.state", "attention.app.language"]


# Who may ask which origin or model a case has: the origins and the models themselves (and their own room).
ASKING = ("isinstance(", '== "real"', "== 'real'", '"smollm2"', '"minilm"', "spec.name ==", "ModelHead", "is_real")


def asks(line: str) -> bool:
    """Whether a line asks which origin or model a case has (an isinstance of a plain type, a str, asks neither)."""
    kind = "origin" in line.lower() or "source" in line or "Model" in line
    return any(w in line for w in ASKING if w != "isinstance(") or ("isinstance(" in line and kind)


def test_no_file_outside_the_origins_and_models_asks_which_it_is():
    asking = []
    for path in SOURCES:
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(("attention/app/origins/", "attention/models/")):
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


# The model registry, the offered models, the files' readers and the adapters may name a model; nothing else does
NAMING = {
    f"attention/models/{name}.py" for name in ("__init__", "shipped", "offered", "sources", "llama", "gpt2", "bert")
}
MODEL_NAMES = ("smollm2", "minilm")  # the shipped models' names, in any case


def names_a_model(text: str) -> bool:
    return any(name in text.lower() for name in MODEL_NAMES)


def test_no_file_outside_the_model_registry_and_adapters_names_a_model():
    naming = []
    for path in SOURCES:
        name = path.relative_to(ROOT).as_posix()
        if name not in NAMING:
            lines = enumerate(path.read_text().splitlines(), start=1)
            naming += [f"{name}:{number}: {line.strip()}" for number, line in lines if names_a_model(line)]
    assert not naming, naming


def test_the_naming_check_catches_a_model_named_in_any_case():
    for line in ('spec = SPECS["smollm2"]', "# MiniLM's bias column", "model = SMOLLM2", "real.about_MINILM"):
        assert names_a_model(line), line
    assert not names_a_model("model = models.spec(models.causal_id(id))")


def test_the_layout_lists_every_file_of_the_package():
    layout = (ROOT / "docs" / "layout.md").read_text().split("```")[1]
    files = [*ROOT.glob("attention/**/*.py"), *ROOT.glob("attention/*/web/*"), *ROOT.glob("pages/*.py")]
    unlisted = [f.relative_to(ROOT).as_posix() for f in files if "__pycache__" not in f.parts and f.name not in layout]
    folders = {f.parent.name + "/" for f in files if f.parent != ROOT} - {"web/"}
    assert not unlisted and all(folder in layout for folder in folders), (unlisted, folders)
