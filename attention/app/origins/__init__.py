"""Where a case comes from: the kinds of origin the session can hold, and the registry of the sidebar's presets.

A new source of cases (another model family is an adapter in attention/models/ instead; a data set of
sentences, say) is a frozen dataclass of Origin (origin.py) that says what only it knows (made, title, link, script,
check, section), one line below when a preset makes it, and how it makes its case in a session (make.py).
This face holds the values alone: the session imports them, and make.py, which takes the session, imports it.
"""

from .. import choices
from .given import Article, File, Link, Random
from .model import ModelHead
from .origin import Edited, Origin, edited

# each preset of the sidebar (choices.PRESETS): the kind of origin it makes
PRESETS = dict(zip(choices.PRESETS, (Article, Random, ModelHead), strict=True))
PARAMS = (*Link.params, *ModelHead.params)  # the link's parameters that name a case

__all__ = [
    "PARAMS",
    "PRESETS",
    "Article",
    "Edited",
    "File",
    "Link",
    "ModelHead",
    "Origin",
    "Random",
    "edited",
]
