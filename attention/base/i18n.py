"""Message catalogues: one JSON table per language with the same keys, `str.format` templates with named fields."""

from __future__ import annotations

import json
import reprlib
from functools import cache
from pathlib import Path

LANGUAGES = {"en": "English", "zh": "简体中文"}  # code -> the language's own name, as the sidebar shows it
DEFAULT = "en"
LOCALES = Path(__file__).with_name("locales")


@cache
def table(lang: str) -> dict[str, str]:
    """The language's templates by key (read once): attention/base/locales/<lang>.json."""
    if lang not in LANGUAGES:
        raise KeyError(f"no message catalogue for language {lang!r}")
    return json.loads((LOCALES / f"{lang}.json").read_text(encoding="utf-8"))


def text(lang: str, key: str, /, **params: object) -> str:
    """The template `key` of `lang`, filled in; params that are Messages are written in `lang` too.

    A key missing from the table raises KeyError: there is no silent fallback to another language.
    """
    return table(lang)[key].format(**{k: render(lang, v) for k, v in params.items()})


def render(lang: str, value: object) -> object:
    """A Message in `lang`; anything else (a number, a token label, a tensor name) as it is."""
    return text(lang, value.key, **value.params) if isinstance(value, Message) else value


class Message(str):
    """A catalogue message: reads as its English text (the CLI, files, str(e)), and keeps its key and params so a
    page can write it in the reader's language with render(lang, message)."""

    key: str
    params: dict[str, object]

    def __new__(cls, key: str, /, **params: object) -> Message:
        self = super().__new__(cls, text(DEFAULT, key, **params))
        self.key, self.params = key, params
        return self

    def __reduce__(self):  # copy and pickle rebuild it from the key, not from the English text
        return (_rebuild, (self.key, self.params))


def _rebuild(key: str, params: dict[str, object]) -> Message:
    return Message(key, **params)


msg = Message


def language_for(locale: str | None) -> str:
    """The catalogue for a browser locale ("zh-CN", "zh-Hans", "zh-TW", "zh" → "zh"); any other one, English."""
    primary = (locale or "").replace("_", "-").split("-")[0].strip().lower()
    return primary if primary in LANGUAGES else DEFAULT


EXCERPT_CHARS = 60  # of a value a user or a link supplied, a message quotes at most this much
_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxdict, _repr.maxlist, _repr.maxtuple, _repr.maxset = 2, 4, 6, 6, 4
_repr.maxstring = _repr.maxother = _repr.maxlong = EXCERPT_CHARS


def excerpt(value: object) -> str:
    """A supplied value as Python writes it ('abc', [0, 0, ...]), made in bounded time and cut to EXCERPT_CHARS:
    a link's 4-million-character field must not become a 15-million-character message."""
    try:
        written = _repr.repr(value)
    except ValueError:  # an int of more than 4,300 digits cannot be written
        written = f"<a whole number of {value.bit_length():,} bits>" if isinstance(value, int) else type(value).__name__
    return clip(written)


def clip(text: str) -> str:
    """Supplied text (a file name) cut to EXCERPT_CHARS, with … where it was cut."""
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"
