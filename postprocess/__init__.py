"""State-delta extraction from the model's replies.

Not built yet: the turn-loop issue fills it in.
"""
