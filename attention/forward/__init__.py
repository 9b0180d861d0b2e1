"""The forward pass: the article's eight steps, computed, recorded, checked, explained, drawn and walked through."""

from . import explain  # noqa: F401  (registers the steps' explainers with the explain engine)
