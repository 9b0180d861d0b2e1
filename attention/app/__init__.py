"""The Streamlit side of the app, one room per file: state (the session model), cache, sidebar, editors, charts,
share, pickers, explain, navigation and pages (the registry), and the frame that runs them around every page."""
