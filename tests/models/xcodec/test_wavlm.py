"""X-Codec with a WavLM semantic teacher (`xcodec_speech_wavlm_*`: WavLM-base-plus, whose
attention adds a gated relative position bias) against transformers' XcodecModel with a
WavLMModel, on random weights: codes identical on a ragged batch, audio within 1e-4; the same
weights in the original layout (.pth beside its SoundStream yaml) give the same codes, and so
does the `xcodec-wavlm-mls` preset through a hub cache."""

import pytest
import torch
import torch.nn.functional as F
import yaml

import audiotok
from audiotok.models.xcodec.weights import original_names
from tests.bounds import AUDIO_PARITY
from tests.models.xcodec import reference


@pytest.fixture(scope="module")
def xcodec_wavlm(tmp_path_factory):
    from transformers import WavLMConfig

    g = torch.Generator().manual_seed(1)
    model = reference.xcodec_v1(WavLMConfig(hidden_size=768, num_hidden_layers=2,
                                            num_attention_heads=12, intermediate_size=64,
                                            conv_dim=(32,) * 7, mask_time_prob=0.0,
                                            num_buckets=320, max_bucket_distance=800), g)
    with torch.no_grad():
        for layer in model.semantic_model.encoder.layers:  # a bias that matters
            layer.attention.gru_rel_pos_const.copy_(torch.rand(1, 12, 1, 1, generator=g) + 0.5)
        model.semantic_model.encoder.layers[0].attention.rel_attn_embed.weight.mul_(8.0)
    folder = tmp_path_factory.mktemp("xcodec_wavlm")
    model.save_pretrained(folder)
    return model, folder


def test_codes_and_audio_equal_transformers(xcodec_wavlm):
    model, folder = xcodec_wavlm
    codec = audiotok.load(folder)
    assert codec.model.semantic_model.encoder.layers[0].attention.buckets == 320
    # 0.5 s to 20 s: past the 800-step offsets of the last bucket at 50 Hz
    lengths = [16000 + r for r in (0, 80, 311)] + [8000, 320_000 + 173]
    g = torch.Generator().manual_seed(2)
    xs = [0.1 * torch.randn(n, generator=g) for n in lengths]
    got = codec.encode(xs, sample_rate=16000)  # one ragged batch
    distinct = set()
    for i, x in enumerate(xs):
        with torch.inference_mode():
            want = model.encode(x[None, None], return_dict=False)[0]
        n = int(got.lengths[i])
        assert n == want.shape[-1]
        assert torch.equal(got.tokens[i, :, :n], want), x.numel()
        distinct |= set(want.flatten().tolist())
    assert len(distinct) > 100
    # the teacher's averaged hidden states themselves (the codes see the bias only in part)
    x = xs[-1][None, None]
    with torch.inference_mode():
        want = model._extract_semantic_features(x)
        ours = codec.model.semantic_model(F.pad(x[:, 0], (160, 160)), average=True)
    scale = want.abs().max()
    assert ours.shape == want.shape and (ours - want).abs().max() <= 1e-5 * scale
    codes = got.tokens[:1, :, : got.lengths[0]]
    with torch.inference_mode():
        want = model.decode(codes, return_dict=False)
    audio = codec.decode(codes)
    assert audio.shape == want.shape
    assert (audio - want).abs().max() <= AUDIO_PARITY and want.abs().max() > 1e-3


def test_the_original_layout_loads_the_same_teacher(xcodec_wavlm, tmp_path):
    """X-Codec's own .pth (the original module names) beside its config_wavlm.yaml, whose
    `semantic_techer` names WavLM: the semantic teacher is told by the weights."""
    model, folder = xcodec_wavlm
    sd = original_names(model.state_dict(), 4)
    torch.save(sd, tmp_path / "xcodec_speech_wavlm_mls.pth")
    (tmp_path / "config_wavlm.yaml").write_text(yaml.safe_dump({"generator": {
        "name": "SoundStream", "config": {
            "D": 16, "ratios": [8, 5, 4, 2], "sample_rate": 16000, "bins": 1024,
            "target_bandwidths": [0.5, 1, 1.5, 2, 4], "semantic_techer": "wavlm_base_plus"}}}))
    x = 0.1 * torch.randn(1, 1, 24_000, generator=torch.Generator().manual_seed(3))
    original = audiotok.load(tmp_path / "xcodec_speech_wavlm_mls.pth")
    assert torch.equal(original.encode(x, 16000).tokens, audiotok.load(folder).encode(
        x, 16000).tokens)


def test_the_preset_through_a_hub_cache(xcodec_wavlm, tmp_path):
    from tests.test_hub import load_through_cache

    model, folder = xcodec_wavlm
    x = 0.1 * torch.randn(16_000, generator=torch.Generator().manual_seed(4))
    stderr, codes = load_through_cache(tmp_path, "hf-audio/xcodec-wavlm-mls", folder,
                                       "xcodec-wavlm-mls", x.numpy(), 16000)
    assert "carry no licence" in stderr
    with torch.inference_mode():
        want = model.encode(x[None, None], return_dict=False)[0]
    assert torch.equal(torch.from_numpy(codes)[0], want)
