"""The models a server offers (the packages, the Hugging Face cache, ATTENTION_MODELS), each described without
loading it; the budget refusing a model before it is read; at most two models loaded, the least recently used going."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from attention import models
from attention.base.case import CaseError
from attention.base.i18n import render
from attention.base.numbers import size_text
from attention.models import offered, sources

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(models.missing("minilm"), reason="MiniLM's tokenizer (its model package)")


def tiny_bert(folder: Path, layers: int = 1) -> int:
    """A random BERT of width 8 saved in Hugging Face's layout, MiniLM's tokenizer beside it; its parameter count."""
    config = transformers.BertConfig(hidden_size=8, num_hidden_layers=layers, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=64)  # fmt: skip
    model = transformers.BertModel(config)
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(models.files("minilm")["tokenizer.json"], folder / "tokenizer.json")
    return sum(p.numel() for p in model.parameters())


def tiny_gpt_oss(folder: Path) -> tuple[int, int]:
    """A random gpt-oss of width 16 (8 experts of which a token takes 2, most of its numbers) saved in Hugging Face's
    layout, MiniLM's tokenizer beside it; its parameter count, and its experts'."""
    vocab = len(json.loads(models.files("minilm")["tokenizer.json"].read_text())["model"]["vocab"])
    config = transformers.GptOssConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                       num_key_value_heads=1, head_dim=8, intermediate_size=512, num_local_experts=8,
                                       num_experts_per_tok=2, tie_word_embeddings=True, pad_token_id=0)  # fmt: skip
    model = transformers.GptOssForCausalLM(config)
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(models.files("minilm")["tokenizer.json"], folder / "tokenizer.json")
    experts = sum(p.numel() for name, p in model.named_parameters() if ".experts." in name)
    return sum(p.numel() for p in model.parameters()), experts


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, int]:
    folder = tmp_path_factory.mktemp("bert") / "tiny-bert"
    return folder, tiny_bert(folder, layers=2)


@pytest.fixture(autouse=True)
def nothing_loaded(monkeypatch):
    monkeypatch.setattr(offered, "_loaded", type(offered._loaded)())


def test_the_cache_and_the_operators_folder_are_offered_with_their_sizes(made, tmp_path):
    folder, parameters = made
    snapshot = tmp_path / "hub" / "models--someone--tiny-bert" / "snapshots" / "abc123"
    shutil.copytree(folder, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc123")
    mine = tmp_path / "mine"
    shutil.copytree(folder, mine / "nested" / "bert")
    (mine / "broken").mkdir()
    (mine / "broken" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "ATTENTION_MODELS": str(mine)}
    offers = {o.id: o for o in offered.offered(env)}
    shipped = {name for name in models.SPECS if models.files(name) is not None}
    assert set(offers) == shipped | {"hf:someone/tiny-bert", "local:nested/bert", "local:broken"}
    bert = offers["hf:someone/tiny-bert"]
    assert (bert.family, bert.layers, bert.heads, bert.problem) == ("bert", 2, 2, None)
    assert bert.float32_bytes == 4 * parameters and bert.disk_bytes == (folder / "model.safetensors").stat().st_size
    assert offers["local:nested/bert"].path == mine / "nested" / "bert"
    assert offers["local:broken"].problem == "broken: has no model.safetensors"  # no server path: its name
    if "minilm" in offers:
        assert offers["minilm"].path is None and offers["minilm"].layers == 6 and offers["minilm"].heads == 12
    # an exported script names a cached model by its id, and finds it in the person's own cache
    assert offered.cached("someone/tiny-bert", env) == snapshot and offered.cached("someone/other", env) is None


def test_the_default_cache_is_hf_home_s_hub_or_the_users():
    assert offered.hub_cache({"HF_HOME": "/data/hf"}) == Path("/data/hf/hub")
    assert offered.hub_cache({"HF_HUB_CACHE": "/c", "HF_HOME": "/data/hf"}) == Path("/c")
    assert offered.hub_cache({}) == Path.home() / ".cache" / "huggingface" / "hub"


def test_a_gguf_file_under_the_operators_folder_is_offered(tmp_path):
    from gguf import GGUFWriter

    writer = GGUFWriter(tmp_path / "tiny.gguf", "llama")
    for add, value in (("block_count", 1), ("embedding_length", 8), ("head_count", 2), ("head_count_kv", 1)):
        getattr(writer, f"add_{add}")(value)
    writer.add_token_list(["a", "b", "c"])
    writer.add_tensor("token_embd.weight", torch.zeros(3, 8).numpy())
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()
    (offer,) = offered.offered({"ATTENTION_MODELS": str(tmp_path), "HF_HUB_CACHE": str(tmp_path / "none")})[-1:]
    assert (offer.id, offer.family, offer.layers, offer.heads, offer.float32_bytes) == ("local:tiny.gguf", "llama",
                                                                                        1, 2, 4 * 24)  # fmt: skip


@pytest.mark.parametrize(("value", "bytes"), [("", 2 * 2**30), ("1000", 1000), ("1.5GiB", 3 * 2**29),
                                              ("64 MiB", 64 * 2**20), ("lots", 2 * 2**30)])  # fmt: skip
def test_the_budget_is_read_from_the_environment(value, bytes):
    assert offered.budget({"ATTENTION_MODEL_BUDGET": value}) == bytes


def test_a_model_past_the_budget_is_refused_with_both_numbers_before_it_is_read(made, monkeypatch):
    offer = offered._offer("local:tiny-bert", made[0])

    def read(*_):
        raise AssertionError("the model was read")

    monkeypatch.setattr(sources, "open_model", read)
    with pytest.raises(CaseError) as e:
        offered.open_offer(offer, {"ATTENTION_MODEL_BUDGET": "1000"})
    size = f"{offer.float32_bytes / 2**10:.3g} KiB"  # as a person reads it: not "0.00 GiB"
    assert str(e.value) == (f"local:tiny-bert: needs {size} of float32 weights, more than this server's budget of "
                            "1000 B (ATTENTION_MODEL_BUDGET)")  # fmt: skip


def test_a_mixture_of_experts_past_the_budget_is_refused_with_both_numbers_before_it_is_read(tmp_path, monkeypatch):
    """Every expert counts (a token uses 2 of 8, the server holds all 8): refused before a file is read, the picker's
    line says so; within the budget it opens."""
    parameters, experts = tiny_gpt_oss(tmp_path / "shelf" / "tiny-gpt-oss")
    size = 4 * parameters  # float32 bytes, every expert's
    limit = size - 4 * experts // 2  # past the model without its experts and with the 2 a token uses, short of all 8
    model = refused_past_budget_then_opened(
        monkeypatch, tmp_path, "tiny-gpt-oss", size, limit, "tiny-gpt-oss · gpt_oss"
    )
    assert model.run("The cat sat").tokens == ("[CLS]", "the", "cat", "sat", "[SEP]")


def refused_past_budget_then_opened(monkeypatch, tmp_path, name: str, size: int, limit: int, line: str):
    """The model tmp_path/shelf/NAME of `size` float32 bytes, offered under a budget of `limit` (less): refused
    before a file is read, with both numbers in the message and in the picker's line (which starts with `line`);
    then, within the budget, opened and returned."""
    monkeypatch.setenv("ATTENTION_MODELS", str(tmp_path / "shelf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # not this machine's cache
    monkeypatch.setenv("ATTENTION_MODEL_BUDGET", str(limit))
    monkeypatch.setattr(offered, "_loaded", type(offered._loaded)())
    models._offers.cache_clear()
    reads = []

    def read(file, *_):
        reads.append(file)
        raise AssertionError("the model was read")

    id = f"local:{name}"
    with monkeypatch.context() as m:
        m.setattr(sources, "_safetensors_names", read)
        m.setattr(sources, "_safetensors", read)
        assert models.offers()[id].float32_bytes == size  # from the file's header alone
        with pytest.raises(CaseError) as e:
            models.loaded(id)
        refused = (f"needs {size_text(size)} of float32 weights, more than this server's budget of "
                   f"{size_text(limit)} (ATTENTION_MODEL_BUDGET)")  # fmt: skip
        assert str(e.value) == f"{id}: {refused}" and size_text(size) != size_text(limit) and not reads
        assert (
            render("en", models.problem(id)) == f"{name} cannot be opened: {refused}. The case shown stays as it was."
        )
        said = render("en", models.label(id))
        assert said.startswith(line) and said.endswith(f"{size_text(size)} in float32, past this server's budget")
    monkeypatch.setenv("ATTENTION_MODEL_BUDGET", str(size))  # within it: it opens
    assert models.problem(id) is None and "past" not in render("en", models.label(id))
    model = models.loaded(id)
    assert model.nbytes == size
    models._offers.cache_clear()
    return model


def test_two_models_stay_loaded_and_the_least_recently_used_goes(made, tmp_path):
    offers = []
    for name in "abc":
        shutil.copytree(made[0], tmp_path / name)
        offers.append(offered._offer(f"local:{name}", tmp_path / name))
    a, b, c = offers
    first = offered.open_offer(a)
    assert offered.open_offer(a) is first  # loaded once
    offered.open_offer(b), offered.open_offer(a), offered.open_offer(c)  # b is now the least recently used
    assert list(offered._loaded) == ["local:a", "local:c"] and offered.open_offer(a) is first
    assert offered.open_offer(a).run("The cat sat").tokens == ("[CLS]", "the", "cat", "sat", "[SEP]")


def test_a_broken_offer_says_its_problem_when_opened(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mamba"}))  # an architecture not computed here
    offer = offered._offer("local:x", tmp_path)
    assert offer.family == "?" and offer.problem.startswith("x/config.json: is mamba, not an architecture")
    with pytest.raises(CaseError, match="is mamba"):
        offered.open_offer(offer)


def test_a_file_broken_after_it_was_offered_is_named_by_the_model_never_by_the_servers_path(made, tmp_path):
    """A notice names the file relative to the offered folder (a truncated file's notice printed /srv/...)."""
    folder = tmp_path / "models" / "nested" / "bert"
    shutil.copytree(made[0], folder)
    offer = offered._offer("local:nested/bert", folder)
    assert offer.problem is None
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[: len(weights) // 2])  # truncated after it was offered
    with pytest.raises(CaseError) as e:
        offered.open_offer(offer)
    assert str(e.value).startswith("nested/bert/model.safetensors: cannot be read") and str(tmp_path) not in str(
        e.value
    )


def test_sizes_read_as_people_read_them():
    from attention.base.numbers import size_text

    assert [size_text(b) for b in (108, 71_000, 12 * 2**20, 3 * 2**29)] == ["108 B", "69.3 KiB", "12 MiB", "1.5 GiB"]
