"""Lorebooks and retrieval: SillyTavern-compatible World Info and Chroma.

Not built yet: the planner issue fills it in.
"""
