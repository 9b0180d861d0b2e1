"""A model wider than SmolLM2 (GPT-2's 768 and up): each head opens as a case and agrees with the model's own
output; a whole layer, too big for a case, says so with both numbers."""

import json
import shutil

import pytest

from attention import attend, models
from attention.base.case import CaseError
from attention.base.i18n import render
from attention.base.record import compare
from attention.forward.compute import tolerance
from attention.models import sources
from tests.test_families import NEEDS_TOKENIZERS, randomized, tokenizers, vocabulary  # noqa: F401 (fixtures)

transformers = pytest.importorskip("transformers")
pytestmark = NEEDS_TOKENIZERS


def test_a_768_wide_gpt2_opens_head_by_head_and_refuses_its_whole_layer(tokenizers, tmp_path):  # noqa: F811
    vocab = len(json.loads(tokenizers["byte"].read_text())["model"]["vocab"])
    config = transformers.GPT2Config(vocab_size=vocab, n_embd=768, n_layer=1, n_head=12, n_positions=64)
    randomized(transformers.GPT2LMHeadModel(config), seed=7).save_pretrained(tmp_path, safe_serialization=True)
    shutil.copy(tokenizers["byte"], tmp_path / "tokenizer.json")
    model = sources.open_model(tmp_path)
    run = model.run("The cat sat on the mat because it was tired")
    case = models.head_case(model, run, 0, 11)
    assert case.d_in == 769  # its width and the bias column
    trace = attend(case)  # against the model's own output, within the one rule's tolerance (as the app checks it)
    allowed = tolerance(case, trace.__getitem__, projected=True)
    assert compare("head 12", trace.outputs, run.head_output(0, 11), allowed).agrees
    assert not compare("head 11", trace.outputs, run.head_output(0, 10), allowed).agrees  # it can fail
    with pytest.raises(CaseError) as refused:
        models.layer_case(model, run, 0)
    assert "769 × 768 numbers in W_Q alone" in render("en", refused.value.problem)
    assert "332,352" in render("en", refused.value.problem)
