"""The errors the engine raises. Every front end turns these into a plain message."""


class DeciderError(Exception):
    """Base class: a problem the user can act on (bad input, bad folder, bad setting)."""


class ModelError(DeciderError):
    """A model folder that cannot be used; the message names the file and the problem."""


class SettingsError(DeciderError, ValueError):
    """A setting out of range or of the wrong type; the message names the setting and its range.

    `field` names the setting when one setting is at fault, so a front end can point at it (the API's
    `param`) without reading the message.
    """

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


class ContextLimitError(DeciderError):
    """A prompt that does not fit the model's (or the device's) context limit."""


class DeviceError(DeciderError):
    """A device that is not available or cannot compile the model."""


class Cancelled(DeciderError):
    """A generation stopped because its caller asked to stop."""
