"""A model folder and its text side: what the folder holds (folder.py), its tokenizer (tokenizer.py), Qwen3.5's chat
template as Decider writes it and the check against the folder's own template (chat_template.py, template_check.py),
the prompt items that stand for an image (vision_tokens.py) and how a reasoning block is closed
(reasoning_close.py), and a checkpoint's safetensors read without torch (safetensors_file.py). It reads files and builds token ids; it compiles nothing.
"""
