"""The OpenAI completions format the local API speaks: a generation's text, tokens and logprobs as OpenAI's response
objects (openai_format.py), and a prompt echoed back with its tokens' logprobs (echo.py).
"""
