"""The models a server offers: the shipped packages, the snapshots in the Hugging Face cache, and the folders and GGUF
files under ATTENTION_MODELS; each with its family, layers × heads, size on disk and in float32; a budget checked
before loading, and at most two loaded models per process. Nothing is downloaded; a visitor never names a path."""

from __future__ import annotations

import functools
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..base.case import CaseError
from ..base.i18n import msg
from ..base.numbers import size_text
from . import sources
from .model import Model, Spec
from .shipped import SPECS, files, load

BUDGET = 2 * 2**30  # bytes of float32 weights a model may have: ATTENTION_MODEL_BUDGET overrides it
LOADED = 2  # models a process keeps loaded at most: the least recently used one goes first
DEPTH = 3  # how deep under ATTENTION_MODELS folders are looked into


@dataclass(frozen=True)
class Offer:
    """An offered model, known from its config and its files' headers alone (nothing loaded)."""

    id: str  # stable: "smollm2", "hf:org/name", "local:relative/path"
    path: Path | None  # its folder or .gguf file; None for a shipped package (models.load opens it)
    family: str  # its config's model_type, or "?" when it cannot be opened
    layers: int
    heads: int
    disk_bytes: int  # its weights' files as stored
    float32_bytes: int  # its weights as the app computes them
    problem: str | None = None  # why it cannot be opened (the message naming the file), or None
    spec: Spec | None = field(default=None, compare=False, repr=False)  # named by its id; None when it has a problem


def offered(env: dict | None = None) -> tuple[Offer, ...]:
    """Every model offered here: the installed packages, the Hugging Face cache's, the operator's folder's."""
    env = os.environ if env is None else env
    out = []
    for name in SPECS:
        paths = files(name)
        if paths is not None:
            weights = [p for p in paths.values() if p.suffix in (".gguf", ".safetensors")]
            out.append(_offer(name, weights[0] if weights[0].suffix == ".gguf" else weights[0].parent, package=True))
    cache = hub_cache(env)
    for folder in sorted(cache.glob("models--*")) if cache.is_dir() else ():
        snapshot = _snapshot(folder)
        if snapshot is not None:
            out.append(_offer("hf:" + folder.name.removeprefix("models--").replace("--", "/"), snapshot))
    root = env.get("ATTENTION_MODELS")
    if root:
        root = Path(root)
        out += [_offer("local:" + p.relative_to(root).as_posix(), p) for p in _under(root, DEPTH)]
    return tuple(out)


def hub_cache(env: dict) -> Path:
    """Hugging Face's cache of models: HF_HUB_CACHE, or HF_HOME's hub, or ~/.cache/huggingface/hub."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    home = env.get("HF_HOME") or Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return Path(home) / "hub"


def cached(name: str, env: dict | None = None) -> Path | None:
    """The snapshot of the Hugging Face cache's model "org/name" (as its hf: id names it), or None."""
    folder = hub_cache(os.environ if env is None else env) / ("models--" + name.replace("/", "--"))
    return _snapshot(folder) if folder.is_dir() else None


def _snapshot(folder: Path) -> Path | None:
    """A cached model's snapshot: the one refs/main names, else the newest."""
    main = folder / "refs" / "main"
    if main.is_file() and (folder / "snapshots" / main.read_text().strip()).is_dir():
        return folder / "snapshots" / main.read_text().strip()
    snapshots = sorted((folder / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime)
    return snapshots[-1] if snapshots else None


def _under(root: Path, depth: int) -> list[Path]:
    """The model folders (holding config.json) and .gguf files under root, depth levels deep at most."""
    found = []
    for path in sorted(root.iterdir()) if root.is_dir() else ():
        if (path / "config.json").is_file() or (path.suffix == ".gguf" and path.is_file()):
            found.append(path)
        elif path.is_dir() and depth > 1:
            found += _under(path, depth - 1)
    return found


def _offer(id: str, path: Path, package: bool = False) -> Offer:
    """The model at path, described from its config and its files' headers; a broken one with its problem."""
    stamp = path.stat().st_mtime_ns if path.exists() else 0  # a file changed on disk is described again
    return _described(id, path, package, stamp)


@functools.lru_cache(maxsize=256)  # a big GGUF file's vocabulary takes seconds to parse: once per file and change
def _described(id: str, path: Path, package: bool, stamp: int) -> Offer:
    try:
        if path.suffix == ".gguf":
            reader = sources.gguf_reader(path)
            spec, files = sources.gguf_spec(reader, path), [path]
            counts = sum(int(t.n_elements) for t in reader.tensors)
        else:
            spec = sources.spec_at(path)
            files = [Path(f) for f in spec.files]
            counts = sum(_safetensors_counts(f) for f in files)
        disk = sum(f.stat().st_size for f in files)
        if package:  # a shipped model keeps its registered spec (its title, its default head)
            spec = SPECS[id]
        else:
            spec = replace(spec, name=id, title=id.partition(":")[2])
        return Offer(
            id, None if package else path, spec.model_type, spec.layers, spec.heads, disk, 4 * counts, spec=spec
        )
    except CaseError as e:
        return Offer(id, path, "?", 0, 0, 0, 0, problem=str(unplaced(e, path, id)))


def unplaced(error: CaseError, path: Path, id: str) -> CaseError:
    """A model's error as a visitor may read it: the model's folder or file named by its id's name ("org/name",
    "relative/path"), never by where it lies on the server (a notice showed "/srv/models/…/model.safetensors")."""
    name = id.partition(":")[2] or id
    where, problem = (str(text).replace(str(path), name) for text in (error.where, error.problem))
    return CaseError(where, problem)


def _safetensors_counts(file: Path) -> int:
    """The numbers a safetensors file holds, from its header alone (8 bytes of length, then JSON)."""
    try:
        with file.open("rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    except (OSError, ValueError) as e:
        raise CaseError(str(file), msg("error.model_unreadable", detail=str(e) or type(e).__name__)) from None
    total = 0
    for name, entry in header.items():
        if name != "__metadata__":
            count = 1
            for size in entry["shape"]:
                count *= size
            total += count
    return total


# Loading within a budget, two at most ---------------------------------------------------------------------------

_loaded: OrderedDict[str, Model] = OrderedDict()  # weights, not user data: shared by every session of the process
_lock = threading.Lock()  # sessions run in threads: the cache's order changes under it (held briefly)
_loading = threading.Lock()  # one model loads at a time (two at once would double the peak memory)


def budget(env: dict | None = None) -> int:
    """ATTENTION_MODEL_BUDGET in bytes (a whole number, or with GiB or MiB after it), else 2 GiB."""
    env = os.environ if env is None else env
    text = str(env.get("ATTENTION_MODEL_BUDGET", "")).strip().replace(" ", "")
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("", 1)):
        if text.endswith(unit) and text.removesuffix(unit).replace(".", "", 1).isdigit():
            return int(float(text.removesuffix(unit)) * factor)
    return BUDGET


def check_budget(offer: Offer, env: dict | None = None) -> None:
    """CaseError, with both numbers, when the model's float32 weights pass the budget; before anything is read."""
    limit = budget(env)
    if offer.float32_bytes > limit:
        raise CaseError(
            offer.id, msg("error.model_budget", size=size_text(offer.float32_bytes), budget=size_text(limit))
        )


Progress = Callable[[int, int], None]  # (tensors read, of total), called as a model loads


def open_offer(offer: Offer, env: dict | None = None, progress: Progress | None = None) -> Model:
    """The offered model, loaded once per process (progress told as its tensors are read); at most LOADED kept, the
    least recently used dropped."""
    if offer.problem is not None:
        raise CaseError(offer.id, offer.problem)
    if (model := _cached(offer.id)) is not None:  # a loaded model never waits for another one's load
        return model
    check_budget(offer, env)
    with _loading:
        if (model := _cached(offer.id)) is not None:  # loaded by another session while this one waited
            return model
        if offer.path is None:
            model = load(offer.id, progress=progress)
        else:
            try:
                model = sources.load(offer.spec or sources.spec_at(offer.path), offer.path, progress)
            except CaseError as e:  # a file broken after it was offered (truncated, replaced)
                raise unplaced(e, offer.path, offer.id) from None
        with _lock:
            _loaded[offer.id] = model
            while len(_loaded) > LOADED:
                _loaded.popitem(last=False)
        return model


def _cached(id: str) -> Model | None:
    """The model when it is loaded (then the most recently used), else None."""
    with _lock:
        if id in _loaded:
            _loaded.move_to_end(id)
            return _loaded[id]
    return None
