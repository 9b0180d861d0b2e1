"""Benchmark (not a test): a model of every family opened by the app's own loader against transformers loading the
same folder (seconds and peak memory, each load in a fresh process), and one head's case (the sentence through the
model, the head's eight steps) against transformers' forward pass of the same sentence. Writes bench/models.md."""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

# the app runs from its folder and is not installed; bench/ itself off the path (its profile.py is not the stdlib's)
ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)
from attention import attend, models  # noqa: E402 (after the path is set)
from attention.models import sources  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is made here or shipped; nothing from a hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SENTENCE = "The cat sat on the mat because it was tired"
TARGET_CASE = 1.5  # one head's case / transformers' forward pass of the sentence, at most
# SmolLM2-135M's shape, fewer layers: big enough that reading the weights dominates a load, quick to make and save
SIZES = {"hidden_size": 576, "num_hidden_layers": 8, "num_attention_heads": 9, "intermediate_size": 1536}
LLAMA3 = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,  # Llama 3.2's
          "original_max_position_embeddings": 8192, "rope_theta": 500000.0}  # fmt: skip
WINDOW = 4  # the newer families' sliding window
TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}  # within the byte vocabulary (the defaults are not)
# Gemma's: grouped-query heads of 64, its scale's own scalar (Gemma 2's 256 is its head_dim), a window on Gemma 2's
# odd layers and on Gemma 3's all but every 6th, whose RoPE is linear × 8 on the global layers and base 10,000 locally
GEMMA = {"num_key_value_heads": 3, "head_dim": 64, "query_pre_attn_scalar": 64, "sliding_window": WINDOW}
GEMMA3_ROPE = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
               "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}  # fmt: skip
# Phi-4-mini's way: RoPE on 75% of each head (24 of its 32 pairs), LongRoPE's short factors (an original length of 64,
# the app's longest sentence, of 256: its attention factor is √(1 + ln 4 / ln 64))
LONGROPE = {"rope_type": "longrope", "rope_theta": 1e4, "partial_rotary_factor": 0.75,
            "short_factor": [1.0 + i / 8 for i in range(24)], "long_factor": [2.0 + i for i in range(24)]}  # fmt: skip
# DeepSeek-V2-Lite's way at this width: multi-head latent attention (a latent of 128 and a rotary key of 32, heads of
# 32 + 32 query dims and 64 value dims, no low-rank queries), a dense first layer, then 8 experts (2 a token, 1 shared)
DEEPSEEK = {"num_key_value_heads": 9, "q_lora_rank": None, "kv_lora_rank": 128, "qk_rope_head_dim": 32,
            "qk_nope_head_dim": 32, "v_head_dim": 64, "n_routed_experts": 8, "num_experts_per_tok": 2,
            "n_shared_experts": 1, "moe_intermediate_size": 256, "first_k_dense_replace": 1, "n_group": 1,
            "topk_group": 1}  # fmt: skip
FAMILIES = {  # family: (transformers' config and model classes, config, tokenizer)
    "llama": ("LlamaConfig", "LlamaForCausalLM", {**SIZES, "num_key_value_heads": 3, "rope_parameters": LLAMA3},
              "byte"),
    "mistral": ("MistralConfig", "MistralForCausalLM", {**SIZES, "num_key_value_heads": 3}, "byte"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {**SIZES, "num_key_value_heads": 3}, "byte"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**SIZES, "num_key_value_heads": 3, "head_dim": 64}, "byte"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {"n_embd": 576, "n_layer": 8, "n_head": 9, "n_positions": 128}, "byte"),
    "bert": ("BertConfig", "BertModel", {**SIZES, "num_attention_heads": 12, "hidden_size": 384}, "word"),
    "roberta": ("RobertaConfig", "RobertaModel", {**SIZES, "num_attention_heads": 12, "hidden_size": 384,
                "max_position_embeddings": 130, "pad_token_id": 1}, "byte"),
    # the 2026 families, each with its attention switched on (tests/test_families_*.py's choices, at this size): a
    # window of 4 is shorter than the sentence (10 tokens), so it leaves keys out; the special tokens in the vocabulary
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {**SIZES, **TOKENS, "num_key_value_heads": 3,
                "no_rope_layer_interval": 4}, "byte"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {**SIZES, **TOKENS, **GEMMA, "attn_logit_softcapping": 50.0,
               "final_logit_softcapping": 30.0}, "byte"),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", {**SIZES, **TOKENS, **GEMMA,
                    "rope_parameters": GEMMA3_ROPE}, "byte"),
    "bloom": ("BloomConfig", "BloomForCausalLM", {"hidden_size": 576, "n_layer": 8, "n_head": 9, **TOKENS}, "byte"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {**SIZES, **TOKENS, "rotary_pct": 0.25}, "byte"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {**SIZES, **TOKENS, "num_key_value_heads": 3, "sliding_window": WINDOW,
             "rope_parameters": LONGROPE, "original_max_position_embeddings": 64, "max_position_embeddings": 256},
             "byte"),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", {**SIZES, **TOKENS, "num_key_value_heads": 3, "head_dim": 64,
                "sliding_window": WINDOW, "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 768},
                "byte"),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {**SIZES, **TOKENS, "num_key_value_heads": 3}, "byte"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", {**SIZES, **TOKENS, **DEEPSEEK}, "byte"),
}  # fmt: skip


def memory_kib(field: str) -> int:
    """This process's VmRSS (resident now) or VmHWM (its peak) in KiB; unlike ru_maxrss, not inherited from the
    parent that started it."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1])


def child(loader: str, path: str, model_class: str) -> None:
    """One load and one forward pass of 10 tokens in this fresh process (safetensors files are mapped: a weight is
    read when a pass first uses it): seconds, and the peak memory over what the imports alone hold."""
    import transformers  # both loaders' processes hold the same modules: only the load differs

    torch.set_num_threads(1)
    base = memory_kib("VmRSS")
    start = time.perf_counter()
    if loader == "app":
        model = sources.open_model(Path(path))
    else:
        where, gguf = (Path(path).parent, {"gguf_file": Path(path).name}) if path.endswith(".gguf") else (path, {})
        model = getattr(transformers, model_class).from_pretrained(where, dtype=torch.float32, **gguf)
    with torch.inference_mode():  # a mapped file's weights are read from disk here, at their first use
        model.run(SENTENCE) if loader == "app" else model(torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]]))
    seconds = time.perf_counter() - start
    peak = memory_kib("VmHWM")
    print(json.dumps({"seconds": seconds, "peak_mib": (peak - base) / 1024, "kept": model is not None}))


def load(loader: str, path: Path, model_class: str) -> dict:
    """A load in a fresh process (peak memory is a process's own)."""
    out = subprocess.run([sys.executable, __file__, "--child", loader, str(path), model_class], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def tokenizers(folder: Path) -> dict[str, Path]:
    """tokenizer.json files of the shipped models: SmolLM2's byte-level BPE (from its GGUF file), MiniLM's pieces."""
    gguf = models.files("smollm2")["SmolLM2-135M-Instruct.Q4_1.gguf"]
    sources.gguf_tokenizer(sources.gguf_reader(gguf), gguf).save(str(folder / "byte.json"))
    shutil.copy(models.files("minilm")["tokenizer.json"], folder / "word.json")
    return {"byte": folder / "byte.json", "word": folder / "word.json"}


def made(family: str, folder: Path, tokenizer: Path) -> None:
    """A random model of the family, saved by transformers with safetensors, with the tokenizer."""
    import transformers

    config_class, model_class, sizes, _ = FAMILIES[family]
    vocab = len(json.loads(tokenizer.read_text())["model"]["vocab"])
    config = getattr(transformers, config_class)(vocab_size=vocab, **sizes)
    torch.manual_seed(0)  # benchmark weights: their values do not matter, only their shapes
    getattr(transformers, model_class)(config).save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer, folder / "tokenizer.json")


def timed(ours, theirs, repeats: int) -> tuple[float, float]:
    """The medians of `repeats` runs' seconds of each, after one of each to warm up; the two interleaved, so that
    a spell of load on these shared cores falls on both (one after the other, a ratio swung 0.6–1.5×)."""
    ours(), theirs()
    seconds = ([], [])
    for _ in range(repeats):
        for run, kept in zip((ours, theirs), seconds, strict=True):
            start = time.perf_counter()
            run()
            kept.append(time.perf_counter() - start)
    return statistics.median(seconds[0]), statistics.median(seconds[1])


def forward(path: Path, model_class: str, repeats: int) -> tuple[float, float, int]:
    """One head's case (the sentence through the app's model, layer 1 head 1 through the eight steps) and
    transformers' eager forward pass of the same tokens: seconds each, and the app's float32 weights' bytes."""
    import transformers

    model = sources.open_model(path)
    where, gguf = (path.parent, {"gguf_file": path.name}) if path.suffix == ".gguf" else (path, {})
    theirs = getattr(transformers, model_class).from_pretrained(where, dtype=torch.float32, attn_implementation="eager",
                                                                **gguf).eval()  # fmt: skip
    ids = torch.tensor([model.tokenize(SENTENCE)[0]])
    with torch.inference_mode():
        app, hf = timed(lambda: attend(models.head_case(model, model.run(SENTENCE), 0, 0)), lambda: theirs(ids),
                        repeats)  # fmt: skip
    return app, hf, model.nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split(":")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).with_name("models.md")))
    parser.add_argument("--families", nargs="+", choices=FAMILIES, help="these random families only (default: all)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    torch.set_num_threads(1)  # as the app's sessions run on shared cores (bench/decoding.py says why)
    work = Path(tempfile.mkdtemp(prefix="bench-models-"))
    try:
        made_tokenizers = tokenizers(work)
        shipped = models.files("smollm2")["SmolLM2-135M-Instruct.Q4_1.gguf"]
        rows = [("SmolLM2-135M-Instruct (Q4_1 GGUF, shipped)", shipped, "LlamaForCausalLM"),
                ("all-MiniLM-L6-v2 (safetensors, shipped)", models.files("minilm")["model.safetensors"].parent,
                 "BertModel")]  # fmt: skip
        rows = rows if args.families is None else []  # a few families alone: the shipped models left out too
        for family in args.families or FAMILIES:
            _, model_class, _, tokenizer = FAMILIES[family]
            folder = work / family
            made(family, folder, made_tokenizers[tokenizer])
            scaled = ", Llama 3.2's scaled RoPE" if family == "llama" else ""
            spec = sources.spec_at(folder)
            line = models.family_line(spec)  # its attention in the picker's words
            # OLMo 2's q/k norm spans the heads: a head's case is that head with the others' share (models.head_case)
            whole = f"; a head's case is one head, with the other {spec.heads - 1} heads' share of its q/k norm"
            rows.append((f"{line} (random, {SIZES['num_hidden_layers']} layers{scaled}, safetensors"
                         f"{whole if spec.norm_width else ''})", folder, model_class))  # fmt: skip
        table = []
        for title, path, model_class in rows:
            spec = sources.spec_at(path)
            ours, theirs = load("app", path, model_class), load("hf", path, model_class)
            case, hf, nbytes = forward(path, model_class, args.repeats)
            table.append((title, spec, nbytes, ours, theirs, case, hf))
            print(title, ours, theirs, case, hf, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write(args, table)


MACHINE = f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, 1 thread"
LATER = "Rows measured later, alone (`--families`; the other rows as the machine line above says): "


def row(title: str, spec, nbytes: int, ours: dict, theirs: dict, case: float, hf: float) -> str:
    """One model's line of the table, with its ratios against transformers in the same run."""
    return (
        f"| {title} | {spec.layers} × {spec.heads} | {nbytes / 2**20:.0f} MiB | {ours['seconds']:.2f} s | "
        f"{theirs['seconds']:.2f} s | {ours['seconds'] / theirs['seconds']:.2f}× | {ours['peak_mib']:.0f} MiB | "
        f"{theirs['peak_mib']:.0f} MiB | {ours['peak_mib'] / theirs['peak_mib']:.2f}× | "
        f"{case * 1000:.1f} ms | {hf * 1000:.1f} ms | {case / hf:.2f}× |"
    )


def write(args, table) -> None:
    """The table and what a replica needs per model; a run of a few families puts their rows into the table there
    is (the other rows kept, measured when they were) and says when and under what load its rows were measured."""
    out = Path(args.out)
    text = merged(out.read_text(), args, table) if args.families and out.exists() else whole(args, table)
    print(text)
    out.write_text(text)


def whole(args, table) -> str:
    """The whole file, every row from this run."""
    lines = [
        "# Models: the app's loader and one head's case against transformers (bench/models.py)",
        "",
        f"{MACHINE}; load average {os.getloadavg()[0]:.1f} at the end. Each load in a fresh process (its peak resident "
        "memory over what the imports alone hold, through the load and one pass of 10 tokens); a case: "
        f"'{SENTENCE}' through the app's model, then layer 1, head 1 through the eight steps, against "
        f"transformers' eager forward pass of the same tokens; medians of {args.repeats} after one, the two "
        "interleaved.",
        "",
        "| model | layers × heads | float32 weights | load and a first pass: app | transformers | ratio | "
        "peak memory: app | transformers | ratio | one head's case | transformers' forward | ratio (≤ 1.5×) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(row(*measured) for measured in table),
        "",
        "A head's case is the sentence's run through the app's model (as fast as transformers' pass, or faster) and "
        "then a few milliseconds: the head's numbers made the case's exact values, and the eight steps traced and "
        "checked from the tensors they were read from. Against a small encoder's 17 ms pass those milliseconds are "
        "the ratio's whole margin: making the numbers into tensors again cost 4 ms of them (MiniLM's case was "
        "1.76× until the case kept its tensors).",
        "",
        "What a replica needs per offered model: its float32 weights once (shared by every session; at most two models "
        "loaded at a time, docs/real-models.md), plus the load's peak above while it is read, plus per session a "
        "sentence's run (every layer's attention input: layers × 64 tokens × width × 4 bytes, 4.4 MB for SmolLM2).",
    ]
    return "\n".join(lines) + "\n"


def merged(text: str, args, table) -> str:
    """The file there is with this run's families' rows in place of their old ones (or after the last row), and the
    note of rows measured later naming this run's machine, load and repeats for each of them."""
    lines = text.splitlines()
    rows = [i for i, line in enumerate(lines) if line.startswith("| ")][1:]  # the table's rows, its header left out
    when = f"{MACHINE}, load average {os.getloadavg()[0]:.1f} at its end, medians of {args.repeats} after one"
    notes = {}
    for family, measured in zip(args.families, table, strict=True):
        mine = [i for i in rows if lines[i].startswith(f"| {family} ")]  # a family's title opens with its name
        if mine:
            lines[mine[0]] = row(*measured)
        else:
            rows.append(rows[-1] + 1)
            lines.insert(rows[-1], row(*measured))
        notes[family] = when
    end = rows[-1] + 1  # the blank line after the table
    if lines[end + 1].startswith(LATER):  # the families measured later before: kept unless measured again now
        kept = (k.split(" (", 1) for k in lines.pop(end + 1).removeprefix(LATER).removesuffix(".").split("; "))
        notes = {f: w.removesuffix(")") for f, w in kept if f not in notes} | notes
        lines.pop(end + 1)  # its blank line
    note = LATER + "; ".join(f"{family} ({w})" for family, w in notes.items()) + "."
    lines[end + 1 : end + 1] = [note, ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
