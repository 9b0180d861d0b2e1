"""An origin: where the session's case came from, as one value, and what only it knows of the case it made.

Plain values, no Streamlit (how each kind makes its case in a session: make.py). The session holds the origin of its
last whole case (Session.source) and asks it; while the case is no longer as it made it (an edit, an option), the
session's origin is Edited(it): the one rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...base.case import Case
from ...base.i18n import Message, msg
from ...base.record import Check
from ...forward.compute import Trace
from ...forward.script import to_script


@dataclass(frozen=True)
class Origin:
    """Numbers handed in whole (a test, a loaded case): the base every kind refines."""

    case: Case  # the case as the origin made it
    section: ClassVar[str | None] = None  # the sidebar's room under the preset that makes this kind (sidebar.ROOMS)
    exercises: ClassVar[str] = "case"  # the ready-made exercises it offers: the article's ("article") or the case's own
    verify: ClassVar[str] = "verify"  # the catalogue's words for its check: verify.badge, verify.agrees, …

    params: ClassVar[tuple[str, ...]] = ()  # the link's parameters that name a case of this kind (see link)

    def made(self, case: Case) -> bool:
        """Whether `case` is still the one this origin made (else the session's origin is Edited(self))."""
        return case == self.case

    def title(self) -> Message | None:
        """The case's name where the pages show one (a model's head); None: none."""
        return None

    def link(self) -> dict[str, str] | None:
        """The link's parameters that name the case without its numbers ({}: none needed); None: by its numbers."""
        return None

    def script(self, case: Case) -> str:
        """The exported script: the case's numbers through the eight steps."""
        return to_script(case)

    def check(self, trace: Trace) -> Check | None:
        """A check of the trace beside PyTorch's, which only this origin can make (None: none; see model.py)."""
        return None

    def head(self, case: Case) -> tuple[int, object] | None:
        """The head (0-based) of a multi-head case the pages show first, where the origin chose one, and the choice
        it was made in (a new choice shows its head again); None: none chosen."""
        return None


@dataclass(frozen=True)
class Edited(Origin):
    """A case edited from another origin's: it has that origin's room and title ("edited from …"), its numbers."""

    source: Origin | None = None

    @property
    def section(self) -> str | None:  # the room of what it was edited from (its way back)
        return self.source.section

    def made(self, case: Case) -> bool:
        return False

    def head(self, case: Case) -> tuple[int, object] | None:  # the source's, while its head count holds
        return self.source.head(case)

    def title(self) -> Message | None:
        title = self.source.title()
        return None if title is None else msg("real.edited_from", title=title)


def edited(source: Origin, case: Case) -> Origin:
    """The origin of `case`, last made whole by `source`: the source itself while the case is as it made it."""
    return source if source.made(case) else Edited(case, source)
