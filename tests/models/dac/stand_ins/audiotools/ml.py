"""Stand-in: dac's models derive from BaseModel (save/load helpers the tests do not use)."""

from torch import nn


class BaseModel(nn.Module):
    INTERN: list = []
    EXTERN: list = []


class Accelerator:
    """dac.utils names it at import; only training uses it."""
