"""Origins of cases given as numbers: the article's example, a seeded random case, an opened file, a link's case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .origin import Origin


@dataclass(frozen=True)
class Article(Origin):
    """The article's numbers and options: a link needs no parameter for them."""

    exercises: ClassVar[str] = "article"  # the article's, one a step (exercise.state.READY)

    def link(self) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class Random(Origin):
    """Numbers from a seeded generator at the sidebar's sizes (a link carries them: a seed alone would not say
    which sizes and options)."""

    seed: int = 0


@dataclass(frozen=True)
class File(Origin):
    """A case file a person opened."""

    name: str = ""


@dataclass(frozen=True)
class Link(Origin):
    """A link's case (?case=…), its numbers in the link."""

    params: ClassVar[tuple[str, ...]] = ("case",)
