"""The backward pass's part of a session (issue 21): the loss chosen and the training steps taken (learning.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..case import Case, CaseError


@dataclass
class Learned:
    """What the Backward page holds for one tab; a new whole case forgets the steps (not the loss)."""

    loss_cell: tuple[int, int] | None = None  # the loss is this output number (row, column from 0); None: the target
    target: tuple[tuple[float, ...], ...] | None = None  # the target's numbers once edited; None: the default one
    target_error: CaseError | None = None  # why the target's last edit was refused
    lr: float = 0.01  # the learning rate of a training step
    trained: int = 0  # gradient steps taken on W_Q, W_K, W_V since the weights were the untrained ones
    untrained: object = field(default=None, repr=False)  # the session's Inputs before the first step: Reset's
    untrained_link: dict | None = field(default=None, repr=False)  # the link that named the case before it
    last_step: dict | None = field(default=None, repr=False)  # W_Q, W_K, W_V before the last step
    losses: list[float] = field(default_factory=list)  # the loss before the first step and after each
    trained_case: Case | None = field(default=None, repr=False)  # the case the last step made (an edit leaves it)
    default_target: tuple | None = field(default=None, repr=False)  # the default target of the untrained outputs

    def forget(self) -> None:
        """The steps left behind: the weights as they are become the case's own."""
        self.trained, self.untrained, self.untrained_link, self.trained_case = 0, None, None, None
        self.losses, self.last_step, self.default_target = [], None, None


@dataclass
class Learning:
    """The session's part for the backward pass (Session is one of these): a keyword-only field, so that it comes
    after Session's own and the Session class stays within the house's size."""

    learned: Learned = field(default_factory=Learned, kw_only=True)  # the loss chosen, the training steps taken
