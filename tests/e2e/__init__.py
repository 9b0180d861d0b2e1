"""End-to-end tests: the real Streamlit server driven in Debian's Chromium by Playwright."""
