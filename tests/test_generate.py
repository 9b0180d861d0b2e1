"""SmolLM2 generating with the app's own forward pass and its per-layer KV cache, against the same forward pass
without a cache and against transformers' greedy `generate` on the same GGUF file; the Decoding page generating."""

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import models
from attention.base.case import CaseError
from attention.decoding.compute import cache_bytes_per_token, decode, model_sizes
from attention.decoding.state import DecodingView
from attention.models.generate import generate
from tests.apptest import APP, session

MISSING = models.missing("smollm2")
pytestmark = [
    pytest.mark.skipif(MISSING is not None, reason=f"not installed: {MISSING} ({models.INSTALL})"),
    # the module's fixtures make four 16-token generations, two without the cache: over 300 s was seen at a load
    # average of 13 on two cores, where the first test's timeout then failed every test of the module
    pytest.mark.timeout(900),
]
SENTENCES = ("The capital of France is", "The cat sat on the mat because it was")


@pytest.fixture(scope="module")
def smol() -> models.Model:
    return models.loaded("smollm2")


@pytest.fixture(scope="module")
def hf():
    from transformers import LlamaForCausalLM

    path = models.files("smollm2")["SmolLM2-135M-Instruct.Q4_1.gguf"]
    return LlamaForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def made(smol) -> dict:
    """Each sentence's 16 new tokens, with the cache and without (made once: 2 cores)."""
    return {s: (generate(smol, s, 16, cached=True), generate(smol, s, 16, cached=False)) for s in SENTENCES}


@pytest.mark.parametrize("sentence", SENTENCES)
def test_cached_generation_makes_the_tokens_of_no_cache_and_of_transformers_generate(smol, hf, made, sentence):
    cached, uncached = made[sentence]
    ids, _ = smol.tokenize(sentence)
    with torch.inference_mode():
        theirs = hf.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False, eos_token_id=[0, 2])[0]
    assert len(cached.new_ids) == 16 and cached.new_ids == uncached.new_ids == tuple(theirs[len(ids) :].tolist())
    assert cached.text == smol.tokenizer.decode(list(cached.new_ids)) and len(cached.seconds) == 16


def test_the_cache_holds_what_the_formula_says(made):
    cached, uncached = made[SENTENCES[0]]
    tokens = len(cached.run.ids)  # the sentence and the new tokens: each has its key and value in every layer
    assert cached.cache_bytes == cache_bytes_per_token(model_sizes(models.SMOLLM2)) * tokens == 46_080 * tokens
    assert uncached.cache_bytes == 0


def test_the_cached_passes_give_every_layer_the_inputs_and_head_outputs_of_one_pass_of_the_whole(smol, made):
    cached, _ = made[SENTENCES[1]]
    whole = smol.run(smol.tokenizer.decode(list(cached.run.ids)))  # the same tokens, one pass, no cache
    assert whole.ids == cached.run.ids
    torch.testing.assert_close(cached.run.inputs, whole.inputs, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(cached.run.head_outputs, whole.head_outputs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("layer", "head"), [(0, 0), (2, 3), (29, 8)])
def test_a_generations_head_decoded_agrees_with_its_causal_trace_and_the_models_own_output(smol, made, layer, head):
    cached, _ = made[SENTENCES[0]]
    decoding = decode(models.head_case(smol, cached.run, layer, head))
    assert decoding.agrees and decoding.n == len(cached.run.ids)
    own = cached.run.head_output(layer, head)  # what the cached generation's own pass computed for that head
    torch.testing.assert_close(decoding.outputs, own, rtol=1e-4, atol=1e-4)


def test_a_generation_past_the_limits_is_refused_saying_why(smol):
    for sentence, count, key in (
        ("word " * 60, 10, "decoding.error_total"),  # 60 tokens + 10 > 64 in all
        ("The cat", 0, "decoding.error_new_tokens"),
        ("The cat", 17, "decoding.error_new_tokens"),
    ):
        with pytest.raises(CaseError) as refused:
            generate(smol, sentence, count)
        assert refused.value.problem.key == key
    with pytest.raises(CaseError):
        generate(smol, "x" * 401, 4)  # past the sentence's characters


def test_a_generation_can_be_stopped_and_keeps_what_it_made(smol):
    heard = []
    stopped = generate(smol, SENTENCES[0], 16, on_token=lambda i, text: heard.append(text) or len(heard) == 3)
    assert stopped.stopped and len(stopped.new_ids) == 3 and "".join(heard) == stopped.text


def test_the_page_generates_then_steps_through_a_layer_and_head():
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page("pages/decoding.py").run()
    at.radio(key="decoding_source").set_value("generation").run()
    assert any("press Generate" in i.value for i in at.info)
    at.text_input(key="decoding_sentence").set_value(SENTENCES[0]).run()
    at.number_input(key="decoding_new_tokens").set_value(3).run()
    at.button(key="decoding_go").click().run()
    assert not at.exception, [e.message for e in at.exception]
    view = session(at).view(DecodingView)
    assert len(view.generation.new_ids) == 3 and view.uncached_same
    assert any("Paris" in m.value for m in at.markdown)
    assert any("s per token with the cache" in c.value for c in at.caption)
    assert "Step 8 of 8" in at.success[0].value  # 5 tokens of the sentence, 3 new: the last one shown
    at.number_input(key="decoding_layer").set_value(30).run()
    assert session(at).view(DecodingView).layer == 30 and "Step 8 of 8" in at.success[0].value
    at.number_input(key="decoding_new_tokens").set_value(16).run()
    at.text_input(key="decoding_sentence").set_value("word " * 60).run()
    at.button(key="decoding_go").click().run()
    assert any("at most 64 tokens in all" in e.value for e in at.error)  # said, and the last generation kept
    assert session(at).view(DecodingView).generation is view.generation and "Step 8 of 8" in at.success[0].value
    assert DecodingView().source == "case"


def test_a_link_to_a_models_head_opens_its_decoding_step_checked_against_the_causal_trace():
    at = AppTest.from_file(APP, default_timeout=180)
    link = {"model": "smollm2", "text": "The capital of France is", "layer": "2", "head": "3", "token": "4"}
    for k, v in link.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/decoding.py").run()
    assert not at.exception
    assert "Step 4 of 5" in at.success[0].value and session(at).view(DecodingView).t == 3
    assert at.query_params["token"] == "4" and at.query_params["model"] == "smollm2"


def test_a_link_to_a_generation_makes_it_again_and_a_step_past_its_end_is_said():
    at = AppTest.from_file(APP, default_timeout=180)
    link = {"gen": "The capital of France is", "gen_tokens": "2", "gen_layer": "5", "gen_head": "9", "token": "6"}
    for k, v in link.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/decoding.py").run()
    view = session(at).view(DecodingView)
    assert len(view.generation.new_ids) == 2 and (view.layer, view.head, view.t) == (5, 9, 5)
    assert "Step 6 of 7" in at.success[0].value
    assert {k: at.query_params[k] for k in link} == link  # the URL is that link again
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in (link | {"token": "30"}).items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/decoding.py").run()
    assert "Step 7 of 7" in at.success[0].value
    at.switch_page("pages/walkthrough.py").run()  # the notice is said on the next page drawn
    assert any("decoding step '30' is not a token of this case (it has 7)" in w.value for w in at.warning)
