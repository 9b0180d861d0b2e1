"""The backward pass: a loss's gradient through the eight steps in reverse, checked against autograd; training live."""

from . import explain  # noqa: F401  (registers the gradients' explainers with the explain engine)
