"""Pictures into the model: turning an image into patches (preprocess.py), the vision encoder and the device it runs on
(encoder.py, device.py), feeding its embeddings into the language model's prompt (feed.py), and the cheap test of
whether a watched frame changed enough to decide again (frame_change.py).
"""
