"""Where a case comes from: the kinds of origin the session can hold, and the registry of the sidebar's presets.

A new source of cases (another model family is an adapter in attention/models/ instead; a data set of
sentences, say) is one file here: a frozen dataclass of Origin (origin.py) that says how it makes its case (start)
and what only it knows (made, title, link, script, check, section); and one line below when a preset makes it.
"""

from .. import choices
from .given import Article, File, Link, Random
from .model import ModelHead
from .origin import Edited, Origin, edited

# each preset of the sidebar (choices.PRESETS): the kind of origin it makes
PRESETS = dict(zip(choices.PRESETS, (Article, Random, ModelHead), strict=True))
LINKED = (Link, ModelHead)  # the kinds a link can name, asked in this order
PARAMS = tuple(name for kind in LINKED for name in kind.params)  # their link parameters

__all__ = [
    "LINKED",
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
