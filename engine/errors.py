"""The errors the engine raises. Every front end turns these into a plain message."""


class DeciderError(Exception):
    """Base class: a problem the user can act on (bad input, bad folder, bad setting)."""


class ModelError(DeciderError):
    """A model folder that cannot be used; the message names the file and the problem."""


class SettingsError(DeciderError, ValueError):
    """A setting out of range or of the wrong type; the message names the setting and its range."""


class ContextLimitError(DeciderError):
    """A prompt that does not fit the model's (or the device's) context limit."""


class DeviceError(DeciderError):
    """A device that is not available or cannot compile the model."""


class Cancelled(DeciderError):
    """A generation stopped because its caller asked to stop."""
