"""The core as a library: pip install . into a fresh virtual environment gives `attention` (package and command)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from tests.apptest import ARTICLE_OUTPUTS

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines: list[str]) -> dict[str, str]:
    return dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line).groups() for line in lines)


def test_the_package_pins_are_the_requirements_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    required = _pins([line for line in required if line])
    core = {"torch", "numpy"}  # numpy only so that importing torch does not warn (pyproject.toml)
    assert _pins(project["dependencies"]) == {k: v for k, v in required.items() if k in core}
    assert _pins(project["optional-dependencies"]["app"]) == {k: v for k, v in required.items() if k not in core}


@pytest.mark.timeout(900)
def test_pip_install_gives_a_working_attention_command_in_a_fresh_environment(tmp_path: Path):
    """A virtual environment of its own (no system site packages): pip installs torch from its pin (on these
    machines, the CPU wheel on disk: about a minute) and this checkout; then the command and the import work."""
    source = tmp_path / "source"  # a copy: setuptools builds in the source tree, leaving build/ and egg-info there
    shutil.copytree(ROOT / "attention", source / "attention", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    python, command = env_dir / "bin" / "python", env_dir / "bin" / "attention"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    install = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)]
    subprocess.run(install, check=True, env=env, cwd=tmp_path, timeout=840)

    def run(*args, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)

    case = run(command, "preset", "article")
    assert case.returncode == 0, case.stderr
    here = subprocess.run([sys.executable, "-m", "attention", "preset", "article"], capture_output=True, text=True)
    assert case.stdout == here.stdout  # the same CLI as python -m attention
    traced = run(command, "trace", "-", stdin=case.stdout)
    assert traced.returncode == 0, traced.stderr
    outputs = json.loads(traced.stdout)["outputs"]
    flat = [(a, b) for row, want in zip(outputs, ARTICLE_OUTPUTS, strict=True) for a, b in zip(row, want, strict=True)]
    assert all(abs(a - b) < 1e-5 for a, b in flat)  # the article's printed numbers

    bad = run(command, "preset", "bogus")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "(see attention --help)" in bad.stderr

    probe = "import attention, importlib.util as u; from attention import attend; from attention.base import presets; "
    probe += "print(attention.__file__, u.find_spec('streamlit') is None, attend(presets.article()).outputs.tolist())"
    imported = run(python, "-c", probe)
    assert imported.returncode == 0, imported.stderr
    path, no_streamlit, numbers = imported.stdout.split(" ", 2)
    assert path.startswith(str(env_dir)) and no_streamlit == "True"  # installed, not this checkout; core only
    assert [[round(v, 5) for v in row] for row in json.loads(numbers)] == [[round(v, 5) for v in r] for r in outputs]
    assert {p.name for p in (Path(path).parent / "base" / "locales").glob("*.json")} == {"en.json", "zh.json"}
