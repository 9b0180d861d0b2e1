"""The whole model: every head at once, what kind each is, and what a head does for the next token (issue 31)."""
