"""A decision: its request and result (types.py), the prompt that asks the model to choose (prompt.py, with the wording
in prompts/), reading the options' bars from one forward (decide.py) or from a tool call (tool_decide.py), what the
labels may claim (labels.py, server_precision.py), drawing an option when asked (option_draw.py) and calibration
measures on labelled decisions and temperature scaling (calibration.py).
"""
