"""Exceptions raised for bad inputs. Each message names the input and what is wrong with it."""


class AudiotokError(Exception):
    """Base class of every error audiotok raises for a bad input or file."""


class AudioError(AudiotokError, ValueError):
    """Unusable audio: unreadable file, empty, NaN/Inf, wrong shape or sample rate."""


class CodesError(AudiotokError, ValueError):
    """Unusable tokens or codes file: wrong shape or dtype, out-of-range values."""


class CheckpointError(AudiotokError, ValueError):
    """A checkpoint that does not fit the model: missing, unexpected or misshapen tensors, bad
    metadata, unreadable file."""


class ConfigError(AudiotokError, ValueError):
    """An inconsistent or unknown model configuration."""


class ModelNotFoundError(AudiotokError, FileNotFoundError):
    """A model name or path that cannot be resolved to local files."""
