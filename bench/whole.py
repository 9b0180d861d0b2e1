"""Benchmark (not a test): the whole-model page on a 64-token sentence of SmolLM2 against a walkthrough step of one
of its heads (the work behind each, and a fresh session's first draw of each page through AppTest); ranking a layer's
heads by switching each off against one forward pass. Prints ratios, writes bench/whole.md."""

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

# the app runs from its folder and is not installed; bench/ itself off the path (its profile.py is not the stdlib's)
sys.path[0] = str(Path(__file__).resolve().parents[1])
from attention import attend, models  # noqa: E402 (after the path is set)
from attention.forward import figures as forward_figures  # noqa: E402
from attention.whole import compute, figures  # noqa: E402

TEXT = (
    "The cat sat on the mat because it was tired and the dog slept by the door while rain fell on the old roof of the "
    "quiet house at the end of the long road near the river where children played every summer day until the sun "
    "went down behind the hills and their mothers called them home for dinner after a long and happy afternoon"
)
LAYER, HEAD = 18, 4  # from 1: a head of the middle of the model
READ = (
    "Read: the page's first draw in a session (what a learner waits for) is within the target. The view's work",
    "alone is every layer's q and k from the run's recorded inputs (30 layers' projections, RoPE, scores, softmax),",
    "each head's kind and one palette image, against one head's eight steps and one heatmap: 270 heads cost about",
    "2.5-3× one head's here, the part of the target not met (the projections of 30 layers are the floor; no MLP is run",
    "again). The probe's pass (induction) is kept per loaded model, whatever the sentence or session; switching heads",
    "off and taking the first token away run on a button, not on the first draw. Ranking costs one forward pass per",
    "head and one before (10 for SmolLM2's 9). Timings on two cores shared with other work vary by 2× between runs;",
    "the ratios are the result.",
)
TARGET_VIEW = 2.0  # the whole-model view / a walkthrough step of one head, at most (issue 31)


def sentence(model, tokens: int = 64) -> str:
    """The longest prefix of TEXT's words with at most `tokens` tokens."""
    best, words = "", TEXT.split(" ")
    for n in range(1, len(words) + 1):
        text = " ".join(words[:n])
        if len(model.tokenizer.encode(text).ids) > tokens:  # the tokenizer's own count: no limit checked
            break
        best = text
    return best


def timed(run, repeats: int) -> float:
    """The median of `repeats` runs' seconds, after one to warm up."""
    run()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def first_draw(page: str, text: str, repeats: int) -> float:
    """A fresh session's run of a page (the model loaded in this process already): its median seconds."""
    from streamlit.testing.v1 import AppTest

    app_path = str(Path(__file__).resolve().parents[1] / "app.py")
    params = {"model": "smollm2", "text": text, "layer": str(LAYER), "head": str(HEAD), "step": "softmax"}

    def run():
        app = AppTest.from_file(app_path, default_timeout=600)
        app.query_params.update(params)
        app.run()  # the overview, opening the link's head: not timed
        start = time.perf_counter()
        app.switch_page(f"pages/{page}.py").run()
        assert not app.exception, app.exception
        return time.perf_counter() - start

    run()
    return statistics.median(run() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split(":")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).with_name("whole.md")))
    parser.add_argument("--threads", type=int, default=1)  # two shared cores: one thread (bench/decoding.py)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = models.loaded("smollm2")
    text = sentence(model)
    ids, _ = model.tokenize(text)
    run = model.run(text)
    n = len(ids)

    scores = compute.induction_scores(model)  # the probe's pass: once per loaded model, whatever the sentence

    def view():  # the page's work for a sentence: every head's weights and kinds, the image, its figure
        found = compute.whole(model, run, scores)
        return figures.view(found, compute.order(found, "head"), "head")

    def step():  # the walkthrough's work for one head: its case, its eight steps, the weights' heatmap
        trace = attend(models.head_case(model, run, LAYER - 1, HEAD - 1))
        return forward_figures.tensor_heatmap(trace, "weights", lang="en")

    view_s, step_s = timed(view, args.repeats), timed(step, args.repeats)
    forward_s = timed(lambda: compute.predict(model, ids), args.repeats)
    probe_s = timed(lambda: compute.induction_scores(model.to(model.device)), args.repeats)  # a copy: not kept
    rank_s = timed(lambda: compute.rank(model, ids, LAYER - 1), max(1, args.repeats // 2))
    page_s = first_draw("whole", text, args.repeats)
    walk_s = first_draw("walkthrough", text, args.repeats)
    heads = model.spec.heads
    rows = [
        ("whole-model view (work) / a walkthrough step (work)", view_s, step_s, view_s / step_s, f"≤ {TARGET_VIEW}"),
        ("whole-model page / walkthrough page, a session's first draw", page_s, walk_s, page_s / walk_s,
         f"≤ {TARGET_VIEW}"),
        ("the probe's pass (once per loaded model) / one forward pass of the sentence", probe_s, forward_s,
         probe_s / forward_s, "kept: not part of a sentence's view"),
        (f"ranking a layer's {heads} heads / one forward pass", rank_s, forward_s, rank_s / forward_s,
         f"≈ {heads + 1} (a pass a head, one before)"),
    ]  # fmt: skip
    lines = [
        "# Whole model: the view of every head, and ranking a layer's heads (bench/whole.py)",
        "",
        f"SmolLM2-135M-Instruct, a sentence of {n} tokens, layer {LAYER} head {HEAD}; torch {torch.__version__}, "
        f"{args.threads} thread(s), {platform.processor() or platform.machine()}; medians of {args.repeats} runs.",
        "",
        "| measured | seconds | against | ratio | target |",
        "|---|---|---|---|---|",
        *(f"| {name} | {a:.3f} | {b:.3f} | {r:.2f} | {target} |" for name, a, b, r, target in rows),
        "",
        *READ,
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
