"""Stand-in: dac's models derive from BaseModel (its load and device, which OuteTTS's DAC
interface uses; the save helpers the tests do not use)."""

from torch import nn


class BaseModel(nn.Module):
    INTERN: list = []
    EXTERN: list = []

    @property
    def device(self):
        return next(self.parameters()).device

    @classmethod
    def load(cls, location, *args, strict: bool = False, **kwargs):
        """audiotools' BaseModel.load for a weights file (not a package): the class built from
        the file's metadata kwargs (less any it does not take), its state dict loaded."""
        import inspect

        import torch

        model_dict = torch.load(location, map_location="cpu")
        metadata = model_dict["metadata"]
        metadata["kwargs"].update(kwargs)
        keys = inspect.signature(cls).parameters
        model = cls(*args, **{k: v for k, v in metadata["kwargs"].items() if k in keys})
        model.load_state_dict(model_dict["state_dict"], strict=strict)
        model.metadata = metadata
        return model


class Accelerator:
    """dac.utils names it at import; only training uses it."""
