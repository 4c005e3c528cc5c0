"""X-Codec v1 (16 kHz, 8 codebooks of 1024 at full width, no projections) from transformers'
layout, against transformers' XcodecModel on random weights: codes identical around its pad
path (N mod 320 in 80..311), audio within 1e-4."""

import pytest
import torch

import audiotok
from tests.models.xcodec import reference


@pytest.fixture(scope="module")
def xcodec(tmp_path_factory):
    from transformers import HubertConfig

    model = reference.xcodec_v1(HubertConfig(hidden_size=768, num_hidden_layers=1,
                                             num_attention_heads=12, intermediate_size=64,
                                             conv_dim=(32,) * 7, mask_time_prob=0.0),
                                torch.Generator().manual_seed(1))
    folder = tmp_path_factory.mktemp("xcodec_v1")
    model.save_pretrained(folder)
    return model, audiotok.load(folder)


def test_codes_and_audio_equal_transformers(xcodec):
    model, codec = xcodec
    assert (codec.title, codec.sample_rate, codec.samples_per_frame, codec.min_samples) == \
        ("X-Codec", 16000, 320, 80)
    lengths = [16000 + r for r in (0, 79, 80, 200, 311, 312)] + [4077]
    g = torch.Generator().manual_seed(2)
    xs = [0.1 * torch.randn(n, generator=g) for n in lengths]
    got = codec.encode(xs, sample_rate=16000)  # one ragged batch
    distinct = set()
    for i, x in enumerate(xs):
        with torch.inference_mode():
            want = model.encode(x[None, None], return_dict=False)[0]
        n = int(got.lengths[i])
        assert n == want.shape[-1] == x.numel() // 320 + (x.numel() % 320 >= 80)
        assert torch.equal(got.tokens[i, :, :n], want), x.numel()
        distinct |= set(want.flatten().tolist())
    assert len(distinct) > 100
    codes = got.tokens[-1:, :, : got.lengths[-1]]
    with torch.inference_mode():
        want = model.decode(codes, return_dict=False)
    audio = codec.decode(codes)
    assert audio.shape == want.shape == (1, 1, 13 * 320)
    assert (audio - want).abs().max() <= 1e-4 and want.abs().max() > 1e-3
