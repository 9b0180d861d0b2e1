"""Exercise page (/exercise): numbers hidden for a learner to work out, or made by a teacher to share by link
(attention/exercise/page.py)."""

from attention.exercise.page import exercise

exercise()
