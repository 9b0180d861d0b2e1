"""Devices: where attention runs, the CPU and the GPU, each step timed, and the project's own measurements."""
