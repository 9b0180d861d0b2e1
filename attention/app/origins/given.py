"""Origins of cases given as numbers: the article's example, a seeded random case, an opened file, a link's case."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ...base import files, presets
from ...base.case import CaseError
from ...base.i18n import msg
from .origin import Origin

if TYPE_CHECKING:
    from ..session import Session


@dataclass(frozen=True)
class Article(Origin):
    """The article's numbers and options: a link needs no parameter for them."""

    @classmethod
    def start(cls, session: Session) -> None:
        article = presets.article()
        session.load(article, cls(article), keep_device=True)

    def link(self) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class Random(Origin):
    """Numbers from a seeded generator at the sidebar's sizes (a link carries them: a seed alone would not say
    which sizes and options)."""

    seed: int = 0

    @classmethod
    def start(cls, session: Session) -> None:
        c = session.controls
        case = presets.random_case(c.n, c.d_in, c.d_k, c.d_v, seed=c.seed)
        session.load(case, cls(case, c.seed), keep_device=True)


@dataclass(frozen=True)
class File(Origin):
    """A case file a person opened."""

    name: str = ""


@dataclass(frozen=True)
class Link(Origin):
    """A link's case (?case=…), its numbers in the link."""

    params: ClassVar[tuple[str, ...]] = ("case",)

    @classmethod
    def opens(cls, session: Session, params: Mapping[str, str | None]) -> bool:
        if not (token := params.get("case")):
            return False
        try:
            case = files.case_from_link(token)
            session.load(case, cls(case))
        except CaseError as e:
            session.notices.append(msg("notice.link_refused", error=e.message))
        return True
