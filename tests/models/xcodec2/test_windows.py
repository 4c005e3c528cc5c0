"""Long inputs: the acoustic encoder runs its high-rate blocks over time windows (nn/windows.py)
and the semantic attention takes queries in blocks. Both give the whole-signal result, for
single items and padded batches."""

import copy

import numpy as np
import pytest
import torch

from audiotok.models.xcodec2.model import EncoderBlock, ResidualUnit, aa_snake
from audiotok.nn.masking import time_mask
from tests.conftest import XCODEC2_CASES


def float64_encoder(xc_codec):
    enc = copy.deepcopy(xc_codec.model.acoustic_encoder).double()
    for m in enc.modules():  # the anti-aliasing filters are non-persistent buffers
        if hasattr(m, "filter"):
            m.filter = m.filter.double()
    return enc


@pytest.mark.parametrize("window_elements", [2048, 50_000])
def test_windowed_equals_whole(xc_codec, window_elements):
    enc = float64_encoder(xc_codec)
    torch.manual_seed(0)
    audio = torch.randn(3, 1, 320 * 140, dtype=torch.float64) * 0.3
    lengths = torch.tensor([320 * 140, 320 * 97, 320 * 3])
    audio[1, :, 320 * 97 :] = 0
    audio[2, :, 320 * 3 :] = 0
    with torch.inference_mode():
        enc.window_elements = 2**40
        whole = enc(audio, lengths)
        enc.window_elements = window_elements
        windowed = enc(audio, lengths)
    for b, frames in enumerate((lengths // 320).tolist()):
        torch.testing.assert_close(windowed[b, :, :frames], whole[b, :, :frames],
                                   rtol=0, atol=1e-12)


def test_golden_tokens_with_small_windows(xc_codec, xc_golden):
    enc = xc_codec.model.acoustic_encoder
    enc.window_elements = 4096  # windows of 512 steps at 8 channels, halos of ~90
    try:
        for case in XCODEC2_CASES:
            tokens = xc_codec.encode(xc_golden[f"{case}_waveform"]).tokens[0].numpy()
            np.testing.assert_array_equal(tokens, xc_golden[f"{case}_codes"][0])
    finally:
        del enc.window_elements


@pytest.mark.parametrize("make, stride", [
    (lambda: aa_snake(4), 1),
    (lambda: ResidualUnit(4, 9), 1),
    (lambda: EncoderBlock(8, 5), 5),
])
def test_radius_bounds_the_receptive_field(make, stride):
    """What windows rely on: an input change moves no output further than `radius` away."""
    torch.manual_seed(1)
    module = make().double()
    for p in module.parameters():
        torch.nn.init.normal_(p, std=0.5)
    for m in module.modules():
        if hasattr(m, "filter"):
            m.filter = m.filter.double()
    x = torch.randn(1, 4, 400, dtype=torch.float64)
    n0 = 200
    bumped = x.clone()
    bumped[..., n0] += 1.0
    with torch.inference_mode():
        changed = (module(bumped, None) - module(x, None)).abs().amax(dim=1)[0] > 0
    where = torch.nonzero(changed)[:, 0] * stride
    assert changed.any()
    assert int((where - n0).abs().max()) <= module.radius


def test_semantic_attention_in_query_blocks_equals_whole(xc_codec):
    """Long inputs attend in blocks of queries; the same as all queries at once, masks too."""
    sem = copy.deepcopy(xc_codec.model.semantic_encoder).double()
    torch.manual_seed(2)
    feats = torch.randn(2, 45, 160, dtype=torch.float64)
    mask = time_mask(torch.tensor([45, 29]), 45)
    with torch.inference_mode():
        whole = sem(feats, mask)
        for layer in sem.encoder.layers:
            layer.self_attn.query_block = 8
        blocks = sem(feats, mask)
    torch.testing.assert_close(blocks[0], whole[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(blocks[1, :29], whole[1, :29], rtol=0, atol=1e-12)
