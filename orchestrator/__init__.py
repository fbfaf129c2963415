"""The turn loop (a LangGraph graph) and the model gateway (litellm).

Not built yet: the issue "One turn: the LangGraph loop, the model gateway, prompts,
PromptTrace and state extraction" fills it in.
"""
