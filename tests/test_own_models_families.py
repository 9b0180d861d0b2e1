"""Today's families on disk through the app (AppTest), each head a case through all eight steps and every page (issue
39): ATTENTION_MODELS pointing at tiny random models made here with transformers (Gemma 2 and 3, BLOOM, GPT-NeoX,
Phi-3, gpt-oss, OLMo 2, SmolLM3, sliding Mistral and Qwen2, DeepSeek V3); a visitor picks each model and a head of its
layer 2, every page draws without an error, the walkthrough steps through every step, the case agrees with the model's
own output and carries the family's option (a window, a softcap, sinks, ALiBi's slopes, partial rotary, no RoPE, the
q/k norm over the width, a latent)."""

from collections import OrderedDict
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attention import models
from attention.app.origins import ModelHead
from attention.base import presets
from attention.base.case import Case, Options, with_options
from attention.forward import teach
from attention.models import offered
from tests.apptest import APP, PAGES, charts, current_trace, session
from tests.test_families import NEEDS_TOKENIZERS, SENTENCE, make, tokenizers, vocabulary  # noqa: F401 (fixtures)
from tests.test_families_2026 import FAMILIES as MODERN
from tests.test_families_bloom_neox import FAMILIES as BLOOM_NEOX
from tests.test_families_deepseek import DS
from tests.test_families_deepseek import FAMILIES as DEEPSEEK
from tests.test_families_gemma import FAMILIES as GEMMA
from tests.test_families_gpt_oss import GPT_OSS
from tests.test_families_olmo2 import OLMO2
from tests.test_families_phi3 import FAMILIES as PHI3
from tests.test_variants_page import assert_beside_plain

transformers = pytest.importorskip("transformers")
pytestmark = NEEDS_TOKENIZERS
WINDOW = 3  # the default sentence has 11 tokens: most of layer 2's queries see fewer keys than causal attention lets
LAYER = 2  # the layer a visitor picks (counted from 1): each family's option is on it
TWO = {"num_hidden_layers": 2}
SLIDING_SECOND = {"layer_types": ["full_attention", "sliding_attention"]}  # the window on layer 2
# model_type: (transformers' classes, config): each family's test file's own, cut to 2 layers, its option on layer 2
FAMILIES = {
    "gemma2": (*GEMMA["gemma2"][:2], {**GEMMA["gemma2"][2], **TWO, **SLIDING_SECOND}),
    "gemma3_text": (*GEMMA["gemma3_text"][:2], {**GEMMA["gemma3_text"][2], **TWO, **SLIDING_SECOND}),
    "bloom": BLOOM_NEOX["bloom"][:3],
    "gpt_neox": BLOOM_NEOX["gpt_neox"][:3],
    "phi3": ("Phi3Config", "Phi3ForCausalLM", PHI3["phi3-longrope"][0]),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", {**GPT_OSS, **TWO, **SLIDING_SECOND}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", OLMO2),
    "smollm3": (*MODERN["smollm3"][:2], {**MODERN["smollm3"][2], **TWO}),  # NoPE on layer 2
    "mistral": MODERN["mistral"][:3],
    "qwen2": MODERN["qwen2"][:3],  # sliding from layer 2 (max_window_layers 1)
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", {**DS, **DEEPSEEK["v3"][1], **TWO}),  # MoE on 2
}  # fmt: skip

# what the walkthrough draws for a layer-2 head beyond plain attention, and what it must not draw
ROPE = "queries_unrotated"  # step 3's queries before RoPE turns them
DRAWN = {
    "gemma2": ({"scores_uncapped", ROPE}, {"position_bias", "weights_sink"}),
    "gemma3_text": ({"queries_unnormed", ROPE}, {"scores_uncapped"}),
    "bloom": ({"position_bias"}, {ROPE, "weights_sink"}),
    "gpt_neox": ({ROPE}, {"position_bias"}),
    "phi3": ({ROPE}, {"scores_uncapped"}),
    "gpt_oss": ({"weights_sink", ROPE}, {"scores_uncapped"}),
    "olmo2": ({"queries_unnormed", ROPE}, {"weights_sink"}),
    "smollm3": (set(), {ROPE, "position_bias"}),  # a NoPE layer: nothing turned
    "mistral": ({ROPE}, {"weights_sink"}),
    "qwen2": ({ROPE}, {"weights_sink"}),
    "deepseek_v3": ({"latent", "latent_unnormed", ROPE}, {"weights_sink", "queries_unnormed"}),
}


def carries(family: str, options: Options) -> bool:
    """Whether a layer-2 head's case options hold what the family brings (each family's own, beside RoPE)."""
    o = options
    return {
        "gemma2": o.window == WINDOW and o.softcap == GEMMA["gemma2"][2]["attn_logit_softcapping"],
        "gemma3_text": o.window == WINDOW and o.q_norm is not None and o.k_norm is not None,
        "bloom": o.alibi is not None and o.rope_base is None,
        "gpt_neox": o.rope_fraction == 0.25,
        "phi3": o.rope_fraction == 0.5 and o.window == WINDOW,
        "gpt_oss": o.window == WINDOW and o.sinks is not None and o.bias,
        "olmo2": o.norm_width and o.q_norm is not None and o.heads == 1 and o.norm_rest is not None,  # one head
        "smollm3": o.rope_base is None and o.alibi is None,
        "mistral": o.window == WINDOW,
        "qwen2": o.window == WINDOW,
        "deepseek_v3": o.w_latent is not None and o.latent_norm is not None and o.rope_fraction == 0.4,
    }[family]


def plain(case: Case) -> Case:
    """Plain attention on the head's numbers, as the Variants page makes it: today's options off, and with partial
    rotary a scaled RoPE's frequencies (its turned pairs', Phi-4-mini's LongRoPE): the whole head turns at θ_p."""
    scaled = {"rope_frequencies": None} if case.options.rope_fraction is not None else {}
    case = case if case.options.w_latent is None else presets.without_latent(case)  # a latent head's keys made plain
    return with_options(case, **teach.PLAIN, **scaled)


@pytest.fixture(scope="module")
def shelf(tokenizers, tmp_path_factory) -> Path:  # noqa: F811
    """An operator's folder: a tiny model of each family; offered by the app, nothing loaded yet."""
    root = tmp_path_factory.mktemp("shelf")
    for family, entry in FAMILIES.items():
        make(family, root / f"tiny-{family}", tokenizers["byte"], entry)
    with pytest.MonkeyPatch.context() as m:
        m.setenv("ATTENTION_MODELS", str(root))
        m.setenv("HF_HUB_CACHE", str(tmp_path_factory.mktemp("hub")))  # an empty cache: not this machine's
        m.delenv("ATTENTION_MODEL_BUDGET", raising=False)
        m.setattr(offered, "_loaded", OrderedDict())
        models._offers.cache_clear()
        yield root
        models._offers.cache_clear()


# families the app cannot show yet: on this branch its controls rebuild a model's case without the latent options
# (w_latent, latent_norm), so a DeepSeek head falls back to the last valid case; the app's MLA work (attention/app/)
# carries them. Strict: once it passes, this mark goes
LATER: dict = {}  # a family whose pages are not built yet: its xfail mark


@pytest.fixture(scope="module", params=[pytest.param(f, marks=LATER.get(f, ())) for f in FAMILIES])
def picked(request, shelf) -> tuple[AppTest, str]:
    """The app as a visitor leaves it: the model preset, the family's tiny model picked, layer 2 and its head 3."""
    family = request.param
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.selectbox(key="preset").set_value("real").run()
    at.selectbox(key="real_model").set_value(f"local:tiny-{family}").run()
    at.number_input(key="real_layer").set_value(LAYER).run()
    at.number_input(key="real_head").set_value(3).run()
    assert not at.exception, at.exception
    return at, family


def test_the_picked_head_is_checked_against_the_model_and_carries_the_familys_option(picked):
    at, family = picked
    s = session(at)
    assert isinstance(s.origin, ModelHead)
    assert (s.origin.choice.model, s.origin.choice.layer, s.origin.choice.head) == (f"local:tiny-{family}", LAYER, 3)
    assert s.origin.choice.sentence == SENTENCE
    trace = current_trace(at)
    assert s.origin.check(trace).agrees
    assert carries(family, trace.case.options), trace.case.options


@pytest.mark.parametrize("page", PAGES)
def test_every_page_draws_the_head_without_an_error(picked, page):
    at, family = picked
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    if page == "walkthrough":  # every step of the head's case, each of its tensors drawn
        drawn = set()
        for step in [s.name for s in current_trace(at).steps]:
            at.radio(key="step_picker").set_value(step).run()
            assert not at.exception and not at.error, (step, at.exception, [e.value for e in at.error])
            drawn |= set(charts(at))
        shown, hidden = DRAWN[family]
        assert shown <= drawn and not hidden & drawn, (shown, hidden, drawn)
    case = session(at).case
    if page == "variants" and teach.modern_chosen(case):  # the head's options beside plain attention's
        assert_beside_plain(at, plain(case))
    assert session(at).origin.check(current_trace(at)).agrees
