"""Command line: `attention preset|trace|backward|tiles|decode|devices` (python -m attention; bad input: exit 2)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .backward.compute import backward
from .backward.files import backward_to_dict
from .backward.loss import default_loss, parse_loss
from .base.case import MAX_D, MAX_N, CaseError
from .base.device import available_devices, gpu_unavailable_reason
from .base.files import dump_case, load_case
from .base.i18n import msg
from .base.presets import PRESETS, preset
from .decoding.compute import decode
from .decoding.files import dump_decoding
from .decoding.script import decoding_script
from .forward.compute import attend
from .forward.files import dump_trace
from .tiles.script import tiles_text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, like every other error here (argparse adds its usage text)
        self.exit(2, f"error: {message} (see {_prog()} --help)\n")


def _prog() -> str:
    """How this was started: the installed `attention` command (pip install .), or `python -m attention`."""
    return "attention" if os.path.basename(sys.argv[0]) == "attention" else "python -m attention"


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog=_prog(), description=__doc__.split(":")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = commands.add_parser("preset", help="print a case: the article's example, or seeded random numbers")
    p.add_argument("name", choices=PRESETS)
    for flag, default, high in (("--n", 3, MAX_N), ("--d-in", 4, MAX_D), ("--d-k", 3, MAX_D), ("--d-v", 3, MAX_D)):
        p.add_argument(flag, type=_size(high), default=default, help=f"1 to {high} (default {default}; random only)")
    p.add_argument("--seed", type=_size(2**31 - 1, low=0), default=0, help="random only (default 0)")
    tracing = commands.add_parser("trace", help="run a case file and print its trace (JSON)")
    tracing.add_argument("case", help="a case file, or - for standard input")
    tracing.add_argument("-o", "--output", help="write the trace to this file instead of standard output")
    tiled = commands.add_parser("tiles", help="run a case file in tiles (FlashAttention's online softmax), checked")
    tiled.add_argument("case", help="a case file, or - for standard input")
    tiled.add_argument("--block-q", help="queries per tile, 1 to n (default: two tiles a side, at most 64)")
    tiled.add_argument("--block-k", help="keys per tile, 1 to n (default: as --block-q's)")
    commands.add_parser("devices", help="list the devices PyTorch can use here")
    # the backward pass (issue 21): the trace file with its backward section
    back = commands.add_parser("backward", help="run a case file forward and back: its trace with a backward section")
    back.add_argument("case", help="a case file, or - for standard input")
    loss = back.add_mutually_exclusive_group()
    loss.add_argument("--cell", help="the loss is this output number: ROW,COLUMN from 1 (default: a target)")
    loss.add_argument("--target", help="a JSON file of the outputs wanted, n rows (default: the outputs, one changed)")
    back.add_argument("-o", "--output", help="write the trace to this file instead of standard output")
    decoding = commands.add_parser("decode", help="decode a case file token by token with a KV cache (JSON)")
    decoding.add_argument("case", help="a case file, or - for standard input")
    decoding.add_argument("--script", action="store_true", help="print the decoding loop as a Python script instead")
    args = parser.parse_args(argv)

    try:
        if args.command == "preset":
            sizes = {"n": args.n, "d_in": args.d_in, "d_k": args.d_k, "d_v": args.d_v, "seed": args.seed}
            print(dump_case(preset(args.name, **sizes)))
        elif args.command in ("trace", "backward"):
            trace = attend(load_case(_read(args.case)))
            sections = {"backward": backward_to_dict(_backward(trace, args))} if args.command == "backward" else {}
            out = dump_trace(trace, **sections)
            if args.output:
                with open(args.output, "w", encoding="utf-8") as f:
                    f.write(out + "\n")
            else:
                print(out)
        elif args.command == "tiles":
            out, agrees = tiles_text(load_case(_read(args.case)), args.block_q, args.block_k)
            print(out)
            return 0 if agrees else 1
        elif args.command == "decode":  # decoding.py: each step's tensors' shapes, checked against the causal trace
            case = load_case(_read(args.case))
            print(decoding_script(case) if args.script else dump_decoding(decode(case)), end="")
        else:
            for device in available_devices():
                print(device)
            if reason := gpu_unavailable_reason():
                print(f"(no GPU: {reason})")
    except CaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


def _backward(trace, args):
    """The backward pass of the trace with the loss the arguments name (a bad one: a CaseError naming it)."""
    if args.cell is not None:
        parts = args.cell.split(",")
        cell = [int(p) if p.strip().isdecimal() and len(p) < 8 else p for p in parts]
        loss = parse_loss({"cell": cell}, trace.case)
    elif args.target is not None:
        try:
            rows = json.loads(_read(args.target))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            problem = msg("backward.error.target_json", detail=str(e)[:80])
            raise CaseError(msg("backward.where.target"), problem) from None
        loss = parse_loss({"target": rows}, trace.case)
    else:
        loss = default_loss(trace)
    return backward(trace, loss)


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def _size(high: int, low: int = 1):
    def parse(text: str) -> int:
        if not text.isdecimal() or len(text) > 12 or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}, not {text[:20]!r}")
        return int(text)

    return parse


if __name__ == "__main__":
    sys.exit(main())
