"""What the model may emit: tools offered to it and the calls in its answer (tools.py, tool_types.py), Qwen3.5's wire
format for them (tool_format.py), and the grammars that constrain a draw to a valid call or to a JSON schema through
llguidance (tool_grammar.py, structured.py). Text and token masks only: no model runs here.
"""
