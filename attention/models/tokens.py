"""A model's tokens as labels people read: byte-level BPE's bytes, BERT's word pieces, SentencePiece's pieces,
distinct and short."""

from __future__ import annotations

import functools

from ..base.case import MAX_TOKEN_CHARS


@functools.cache  # a constant table (GPT-2's byte-level alphabet, reversed), built on first use: no user data
def _byte_decoder() -> dict[str, int]:
    """The byte each printable character of a byte-level BPE token stands for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def byte_level(token: str) -> str:
    """A byte-level BPE token (GPT-2's, Llama 3's) as people read it: a leading space as ␣, a newline as ↵."""
    table = _byte_decoder()
    raw = bytes(table[c] for c in token if c in table).decode("utf-8", errors="replace")
    shown = raw.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")
    return "".join(c if c.isprintable() else "�" for c in shown) or "�"


def word_piece(token: str) -> str:
    """A BERT word piece as people read it: ## (inside a word) as ·."""
    return "·" + token[2:] if token.startswith("##") and len(token) > 2 else token


def sentence_piece(token: str) -> str:
    """A SentencePiece token (Llama 2's, Mistral's) as people read it: its word-start mark ▁ as ␣, a byte as ↵ or �."""
    named = {"<0x0A>": "↵", "<0x09>": "⇥", "<0x20>": "␣"}
    return named.get(token, "�" if token.startswith("<0x") else token.replace("▁", "␣"))


def readable_for(tokenizer) -> object:
    """The labelling of a tokenizer's tokens (a tokenizers.Tokenizer): by its model and decoder's kinds."""
    if type(tokenizer.model).__name__ == "WordPiece":
        return word_piece
    return byte_level if type(tokenizer.decoder).__name__ == "ByteLevel" else sentence_piece


def labels(tokens: list[str], readable) -> tuple[str, ...]:
    """Readable (by the model's `readable`), distinct labels of at most MAX_TOKEN_CHARS characters: a repeated token
    gets its position."""
    out, seen = [], set()
    for i, token in enumerate(tokens):
        label = readable(token)
        label = label if len(label) <= MAX_TOKEN_CHARS - 6 else label[: MAX_TOKEN_CHARS - 7] + "…"
        if label in seen:
            label = f"{label} ({i + 1})"
        seen.add(label)
        out.append(label)
    return tuple(out)
