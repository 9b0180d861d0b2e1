"""Shared display, pure (no st.*): a matrix as a heatmap or an image, its text version, a recorded tensor as a table."""
