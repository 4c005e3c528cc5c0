"""Stand-in for descript-audiotools: the names `dac` imports; its encode/decode use none."""

from collections import namedtuple

from . import core, ml  # noqa: F401

STFTParams = namedtuple("STFTParams", "window_length hop_length window_type match_stride "
                        "padding_type", defaults=(None,) * 5)


class AudioSignal:
    """Only dac's compress/decompress and its CLI use audio signals."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("the audiotools stand-in has no AudioSignal")
