"""Exercises: numbers of a trace hidden for a learner to work out by hand, shared by link, judged."""
