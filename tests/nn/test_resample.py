"""nn/resample.SincResample equals torchaudio.functional.resample (its defaults) bit for bit:
the rates the codecs resample between, lengths around the kernel's width and the hop."""

import pytest
import torch

from audiotok.nn.resample import SincResample


@pytest.mark.parametrize("rates", [(24000, 16000), (16000, 24000), (44100, 16000),
                                   (22050, 16000)])
def test_equals_torchaudio(rates):
    from tests.models.xcodec.reference import TORCHAUDIO, _torchaudio_real

    if not (TORCHAUDIO / "torchaudio").is_dir():
        pytest.skip("the real torchaudio is not installed (.refs/s3gen)")
    ta = _torchaudio_real()
    g = torch.Generator().manual_seed(0)
    resample = SincResample(*rates)
    for n in (1, 5, 23, 959, 24001):
        x = torch.randn(2, 1, n, generator=g)
        want = ta.functional.resample(x, *rates)
        got = resample(x)
        assert got.shape == want.shape and torch.equal(got, want), (rates, n)
