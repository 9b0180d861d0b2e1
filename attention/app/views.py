"""The views of the pages past the forward pass, as the session holds them: the Backward page's loss and training
steps (learning.py operates on them), the Decoding page's step and generation (decoding_room.py), the Tiles page's
block sizes and tile (tiles_room.py). Plain values, no Streamlit."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..case import Case, CaseError
from ..models.generate import Generation

DEFAULT_NEW_TOKENS = 8  # a SmolLM2 generation's new tokens, to start with


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


@dataclass(frozen=True)
class DecodingView:
    """What the Decoding page shows: a value the session holds (Session.decoding) and replaces whole."""

    t: int | None = None  # the decoding step (token t, from 0); None: the last token
    source: str = "case"
    sentence: str | None = None  # to generate from, as typed; None: the session's model sentence or the example
    new_tokens: int = DEFAULT_NEW_TOKENS
    generation: Generation | None = None  # the last finished (or stopped) generation
    uncached_seconds: tuple[float, ...] | None = None  # the same generation without the cache, per token
    uncached_same: bool | None = None  # whether it made the same tokens
    layer: int = 3  # of the generation, from 1 (SmolLM2's layer 3 head 4: a previous-token head)
    head: int = 4  # from 1
    heard: tuple[str, ...] = ()  # the tokens heard so far while a generation runs (kept if it is stopped)
    pending: bool = False  # a link's generation, to be made when the page is drawn


@dataclass
class Tiling:
    """The Tiles page's view (issue 23): its block sizes, the tile shown, and why block sizes were refused."""

    blocks: tuple[int, int] | None = None  # (B_q, B_k) as chosen; None: tiles.default_block of n
    tile: tuple[int, int] = (0, 0)  # (query tile, key tile), from 0
    error: CaseError | None = None  # why block sizes typed were refused (the last valid ones stay); None: they were
