"""Encoder-decoder models (BART, mBART, Marian, T5 and T5 v1.1) against transformers (the oracle): random tiny models
made here with transformers, a tiny word-level tokenizer each, saved in Hugging Face's layout and opened through the
app's own loader; every head of the encoder's self-attention, the decoder's causal self-attention and its
cross-attention through the eight steps, the passes layer by layer, every logit, greedy translation with and without
the caches and its alignment; a wrong source row fails the check; the picker's line; a config the app cannot read."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from attention import attend, models
from attention.base.case import CaseError, case_to_dict, parse_case
from attention.base.i18n import render
from attention.base.tolerance import within
from attention.forward.compute import tolerance
from attention.models import sources
from attention.models.seq2seq import PARTS, pair_run, part_case, translate
from tests.test_families import carried, chain_terms, weights_tolerance

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

SOURCE = "the cat sat on the mat because it was tired"
TARGET = "le chat était assis sur le tapis"
WORDS = ("the", "cat", "sat", "on", "mat", "because", "it", "was", "tired", "le", "chat", "était", "assis", "sur",
         "tapis", "parce", "que", "il", "fatigué", "a", "dog", "ran")  # fmt: skip
NEW_TOKENS = 8
BART = {"d_model": 16, "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 4,
        "decoder_attention_heads": 4, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32,
        "max_position_embeddings": 64}  # fmt: skip
T5 = {"d_model": 16, "d_kv": 4, "d_ff": 32, "num_layers": 2, "num_heads": 4, "relative_attention_num_buckets": 8,
      "relative_attention_max_distance": 20, "decoder_start_token_id": 0}  # fmt: skip
BART_TOKENS, T5_TOKENS = (("<s>", "<pad>", "</s>", "<unk>"), "<s> $A </s>"), (("<pad>", "</s>", "<unk>"), "$A </s>")
# name: (transformers' config and model classes, the config's sizes, the tokenizer's special tokens and template,
# the weights' spread and seed (chosen so that each random model's greedy tokens are not one token again and again),
# the picker's line); each family's paths: mBART's norms before each block and its final ones, scaled embeddings
# (mBART's, Marian's), Marian's sinusoids, swish and pad token as the decoder's start, T5's ReLU and tied output
# (scaled), v1.1's gated GELU and its own output layer; BART's decoder deeper than its encoder (transformers' T5
# cannot generate so)
FAMILIES = {
    "bart": ("BartConfig", "BartForConditionalGeneration", BART, BART_TOKENS, (0.7, 1), "bart · encoder-decoder"),
    "mbart": ("MBartConfig", "MBartForConditionalGeneration", {**BART, "scale_embedding": True}, BART_TOKENS, (0.7, 0),
              "mbart · encoder-decoder"),
    "marian": ("MarianConfig", "MarianMTModel", {**BART, "scale_embedding": True, "activation_function": "swish"},
               (("</s>", "<unk>"), "$A </s>"), (0.7, 4), "marian · encoder-decoder"),
    "t5": ("T5Config", "T5ForConditionalGeneration", T5, T5_TOKENS, (0.7, 0),
           "t5 · encoder-decoder · relative bias 8 buckets"),
    "t5_v1_1": ("T5Config", "T5ForConditionalGeneration", {**T5, "feed_forward_proj": "gated-gelu",
                "tie_word_embeddings": False}, T5_TOKENS, (0.5, 7), "t5 · encoder-decoder · relative bias 8 buckets"),
}  # fmt: skip


def tokenizer(specials: tuple[str, ...], template: str, pad_last: bool):
    """A word-level tokenizer of WORDS with the family's special tokens first (Marian's pad token last), and its
    template (BART's <s> … </s>, T5's and Marian's … </s>)."""
    vocab = {token: i for i, token in enumerate(specials)}
    for word in [*WORDS, *["<pad>"] * pad_last]:
        vocab.setdefault(word, len(vocab))
    made = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    made.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    marks = [(t, vocab[t]) for t in specials if t in template]
    made.post_processor = tokenizers.processors.TemplateProcessing(single=template, special_tokens=marks)
    made.add_special_tokens([tokenizers.AddedToken(t, special=True) for t in vocab if t.startswith("<")])
    return made


def make(family: str, folder: Path) -> torch.nn.Module:
    """A random model of the family with transformers, saved with safetensors and its tokenizer into folder."""
    config_class, model_class, sizes, (specials, template), (spread, seed), _ = FAMILIES[family]
    made = tokenizer(specials, template, pad_last=family == "marian")
    vocab = made.get_vocab_size()
    if family == "marian":  # its pad token (the last) starts the decoder
        sizes = {**sizes, "decoder_vocab_size": vocab, "pad_token_id": vocab - 1, "decoder_start_token_id": vocab - 1,
                 "eos_token_id": 0}  # fmt: skip
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(vocab_size=vocab, **sizes))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            norm = "norm" in name  # a norm's weights near 1 and its biases near 0: the tokens' rows tell apart
            p.copy_((1 if name.endswith("weight") else 0) + 0.2 * noise if norm else spread * noise)
    model.save_pretrained(folder, safe_serialization=True)
    made.save(str(folder / "tokenizer.json"))
    return getattr(transformers, model_class).from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tmp_path_factory) -> tuple[models.Model, torch.nn.Module, str]:
    """The app's model from its folder, and transformers' own of the same folder."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = make(request.param, folder)
    return sources.open_model(folder), hf, request.param


def modules(hf: torch.nn.Module) -> dict[str, list[tuple[torch.nn.Module, torch.nn.Module]]]:
    """Each part's attention modules, layer by layer, with their output projections."""
    if hasattr(hf, "encoder"):  # T5's
        encoder, decoder = hf.encoder.block, hf.decoder.block
        at = {"encoder": [b.layer[0].SelfAttention for b in encoder], "decoder": [b.layer[0].SelfAttention
              for b in decoder], "cross": [b.layer[1].EncDecAttention for b in decoder]}  # fmt: skip
        return {part: [(m, m.o) for m in found] for part, found in at.items()}
    body = hf.model
    at = {"encoder": [b.self_attn for b in body.encoder.layers], "decoder": [b.self_attn for b in body.decoder.layers],
          "cross": [b.encoder_attn for b in body.decoder.layers]}  # fmt: skip
    return {part: [(m, m.out_proj) for m in found] for part, found in at.items()}


def seen(hf: torch.nn.Module, ids: tuple[int, ...], target: tuple[int, ...]) -> tuple[dict, object]:
    """transformers on the source and the target: per part and layer, what its attention reads and its heads' outputs
    side by side (the input of its output projection), caught by hooks; and its output (attentions, logits)."""
    caught, hooks = {part: ({}, {}) for part in PARTS}, []
    for part, layers in modules(hf).items():
        for layer, (attention, projection) in enumerate(layers):
            for module, into in zip((attention, projection), caught[part], strict=True):

                def hook(module, args, kwargs, into=into, layer=layer) -> None:
                    into[layer] = (args[0] if args else kwargs["hidden_states"])[0]

                hooks.append(module.register_forward_pre_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            out = hf(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([target]), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    return caught, out


def their_weights(out, part: str) -> tuple[torch.Tensor, ...]:
    return {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}[part]


def layers(model: models.Model, part: str) -> int:
    return model.spec.layers if part == "encoder" else model.spec.decoder_layers


def as_transformers_read(model: models.Model, hf) -> tuple[object, dict, object]:
    """The pair's run with each part's attention input, and the encoder's output, as transformers computes them."""
    pair = pair_run(model, SOURCE, TARGET)
    caught, out = seen(hf, pair.source.ids, pair.target.ids)
    runs = {part: replace(pair.run(part), inputs=torch.stack([caught[part][0][layer]
                                                               for layer in range(layers(model, part))]))
            for part in PARTS}  # fmt: skip
    pair = replace(pair, source=runs["encoder"], target=runs["decoder"], cross=runs["cross"],
                   memory=out.encoder_last_hidden_state[0])  # fmt: skip
    return pair, caught, out


def test_every_head_of_the_three_attentions_through_the_eight_steps_equals_transformers(pair):
    """Each part's input as transformers computes it (the cross-attention's keys: its encoder's output), through
    each head's eight steps: its weights as transformers' attentions, its output as transformers' head."""
    model, hf, _ = pair
    run, caught, out = as_transformers_read(model, hf)
    d = model.spec.head_dim
    for part in PARTS:
        for layer in range(layers(model, part)):
            for head in range(model.spec.heads):
                case = part_case(model, run, part, layer, head)
                assert case.cross == (part == "cross") and (case.options.mask == "causal") == (part == "decoder")
                assert (case.options.relative_bias is not None) == (model.spec.relative_buckets > 0 and part != "cross")
                trace = attend(case)
                expected = caught[part][1][layer][:, head * d : (head + 1) * d]
                assert within(trace.outputs, expected, tolerance(case, trace.__getitem__, projected=True)), (
                    part, layer, head)  # fmt: skip
                theirs = their_weights(out, part)[layer][0, head]
                assert within(trace["weights"], theirs, weights_tolerance(case, trace)), (part, layer, head)
    cross = part_case(model, run, "cross", 0)  # a whole layer's heads as one case: keys from the source
    assert cross.options.heads == model.spec.heads and cross.key_tokens == run.source.tokens
    for case in (cross, part_case(model, run, "decoder", 0, 1)):  # the model's numbers as a user's file reads them
        assert parse_case(json.loads(json.dumps(case_to_dict(case)))) == case
    assert within(attend(cross).outputs, caught["cross"][1][0], tolerance(cross, attend(cross).__getitem__, None, True))


def test_a_wrong_source_row_fails_the_check(pair):
    model, hf, _ = pair
    run, caught, _ = as_transformers_read(model, hf)
    d, memory = model.spec.head_dim, run.memory.clone()
    weights = run.cross_weights[0, 0]  # (n_target, n_src): the source token the head reads most, moved a little
    memory[int(weights.sum(0).argmax())] += 0.05
    case = part_case(model, replace(run, memory=memory), "cross", 0, 0)
    trace = attend(case)
    assert not within(trace.outputs, caught["cross"][1][0][:, :d], tolerance(case, trace.__getitem__, projected=True))


def test_the_passes_equal_transformers_layer_by_layer_and_in_every_logit(pair):
    model, hf, _ = pair
    run = pair_run(model, SOURCE, TARGET)
    caught, out = seen(hf, run.source.ids, run.target.ids)
    terms = chain_terms(replace(model.spec, layers=model.spec.layers + model.spec.decoder_layers), len(run.source.ids))
    for part in PARTS:
        for layer in range(layers(model, part)):
            x, heads = caught[part][0][layer], caught[part][1][layer]
            mine = run.run(part)
            assert within(mine.inputs[layer], x, carried(x, terms)), (part, layer)
            assert within(mine.head_outputs[layer].transpose(0, 1).flatten(1), heads, carried(heads, terms))
    for layer in range(model.spec.decoder_layers):
        assert within(run.cross_weights[layer], out.cross_attentions[layer][0], carried(torch.ones(1), terms))
    assert within(run.memory, out.encoder_last_hidden_state[0], carried(out.encoder_last_hidden_state, terms))
    family = model.spec.family
    with torch.inference_mode():
        _, memory = family.encode(model, torch.tensor(run.source.ids))
        logits = family.decode(model, memory, torch.tensor(run.target.ids)).logits
    assert within(logits, out.logits[0], carried(out.logits, terms))  # every target token's prediction
    assert run.target.next_tokens[0][0] == model.tokenizer.decode([int(out.logits[0, -1].argmax())])


def test_greedy_translation_with_and_without_the_caches_is_transformers_and_its_alignment_their_cross_attentions(
    pair,
):
    model, hf, _ = pair
    cached, uncached = (translate(model, SOURCE, NEW_TOKENS, cached=c) for c in (True, False))
    ids = cached.pair.source.ids
    with torch.inference_mode():
        made = hf.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1,
                           forced_eos_token_id=None, output_attentions=True, return_dict_in_generate=True)  # fmt: skip
    assert cached.pair.target.ids == uncached.pair.target.ids == tuple(made.sequences[0].tolist())
    assert len(set(cached.new_ids)) > 1  # the random model says something, not one token again and again
    assert cached.cache_bytes > 0 == uncached.cache_bytes and cached.text == model.tokenizer.decode(cached.new_ids)
    # each new token's cross-attention rows: transformers' at the step that chose it (its cache's pass of one token)
    theirs = torch.stack([torch.stack([layer[0, :, -1] for layer in step]) for step in made.cross_attentions], dim=2)
    terms = chain_terms(replace(model.spec, layers=model.spec.layers + model.spec.decoder_layers), len(ids))
    for found in (cached, uncached):
        assert found.alignment.shape == (model.spec.decoder_layers, model.spec.heads, len(found.new_ids), len(ids))
        assert within(found.alignment, theirs, carried(torch.ones(1), terms))
        # the same rows as the whole target's pass: row t of the pair's cross-attention chose new token t + 1
        rows = found.pair.cross_weights[:, :, : len(found.new_ids)]
        assert within(found.alignment, rows, carried(torch.ones(1), terms))


def test_the_one_sentence_pages_see_the_encoder_and_the_picker_says_encoder_decoder(pair):
    model, hf, family = pair
    s = model.spec
    assert s.model_type == hf.config.model_type and not s.causal and s.decoder_layers == len(modules(hf)["decoder"])
    run = model.run(SOURCE)
    assert run.next_tokens is None  # its encoder alone: it predicts nothing
    encoder = part_case(model, pair_run(model, SOURCE, TARGET), "encoder", 1, 2)
    assert models.head_case(model, run, 1, 2) == encoder  # T5's relative bias travels with the one-sentence head
    assert render("en", models.family_line(s)) == FAMILIES[family][-1]
    about = render("en", models.about(s))
    assert "encoder-decoder" in about and f"decoder of {s.decoder_layers}" in about
    assert ("relative bias" in about) == (s.relative_buckets > 0)


def test_a_config_the_app_cannot_read_says_what(tmp_path):
    (tmp_path / "model.safetensors").touch()  # its config is read first
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", **T5, "decoder_start_token_id": None,
                                                      "vocab_size": 30, "eos_token_id": None}))  # fmt: skip
    with pytest.raises(CaseError, match="decoder_start_token_id"):
        sources.spec_at(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "marian", **BART, "vocab_size": 30,
                                                      "decoder_start_token_id": 29,
                                                      "activation_function": "tanh"}))  # fmt: skip
    with pytest.raises(CaseError, match="tanh"):
        sources.spec_at(tmp_path)
    assert {"bart", "mbart", "marian", "t5"} <= set(sources.SUPPORTED)
