"""The test suites (pytest): core, CLI and files against oracles; the app through AppTest; e2e in a browser."""
