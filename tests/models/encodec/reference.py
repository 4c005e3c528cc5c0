"""The EnCodec references for parity tests: the `encodec` package's 24 kHz model (PyPI encodec
0.1.1, `EncodecModel.encodec_model_24khz(pretrained=False)`) with random weights, and
transformers' EncodecModel holding the same weights; saved as the package's state dict
(`encodec_24khz-*.th`) and as the hub's transformers repository is laid out. MusicGen's 32 kHz
model is assembled from the package's modules with the hub config's arguments
(`facebook/encodec_32khz`: 64 filters, ratios 8 5 4 4, not causal, identity shortcuts, 4
codebooks of 2048), transformers' from that config.

Default init leaves the codebooks all zero (every code 0) and the biases at 0; the codebooks
are filled with N(0, s^2 0.7^(2i)) for codebook i, s the encoder output's spread on noise (as
the spec's recipe says), the biases and weight-norm gains randomised."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

STAND_INS = Path(__file__).parent.parent / "dac" / "stand_ins"  # (torchaudio)


def import_encodec():
    if str(STAND_INS) not in sys.path:
        sys.path.insert(0, str(STAND_INS))
    import encodec

    return encodec


# transformers' EncodecConfig of facebook/encodec_32khz (its config.json)
HF_32KHZ = dict(sampling_rate=32000, audio_channels=1, num_filters=64,
                upsampling_ratios=[8, 5, 4, 4], codebook_size=2048, target_bandwidths=[2.2],
                use_causal_conv=False,
                norm_type="weight_norm", normalize=False, chunk_length_s=None, overlap=None,
                use_conv_shortcut=False, num_lstm_layers=2, hidden_size=128, compress=2,
                pad_mode="reflect", trim_right_ratio=1.0)


# transformers' EncodecConfig of facebook/encodec_48khz (its convert_checkpoint's)
HF_48KHZ = dict(upsampling_ratios=[8, 5, 4, 2], target_bandwidths=[3.0, 6.0, 12.0, 24.0],
                sampling_rate=48000, audio_channels=2, use_causal_conv=False,
                norm_type="time_group_norm", normalize=True, chunk_length_s=1.0, overlap=0.01)


def encodec_model(seed: int = 0, variant: str = "24khz"):
    encodec = import_encodec()
    torch.manual_seed(seed)
    if variant == "24khz":
        model = encodec.EncodecModel.encodec_model_24khz(pretrained=False).eval()
    elif variant == "48khz":
        model = encodec.EncodecModel.encodec_model_48khz(pretrained=False).eval()
    else:
        model = musicgen_model(encodec).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and "lstm" not in name:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            elif name.endswith("weight_g"):
                p.mul_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("norm.weight"):  # the 48 kHz model's GroupNorm gains
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
        spread = model.encoder(0.1 * torch.randn(1, model.channels, model.sample_rate,
                                                 generator=g)).std()
        for i, layer in enumerate(model.quantizer.vq.layers):
            book = layer._codebook
            book.embed.copy_(spread * 0.7**i * torch.randn(book.embed.shape, generator=g))
            book.inited.fill_(1)
    return model


def musicgen_model(encodec):
    """The package's modules with facebook/encodec_32khz's arguments."""
    from encodec.modules import SEANetDecoder, SEANetEncoder
    from encodec.quantization import ResidualVectorQuantizer

    kw = dict(channels=1, n_filters=64, ratios=[8, 5, 4, 4], causal=False, true_skip=True)
    encoder, decoder = SEANetEncoder(**kw), SEANetDecoder(**kw)
    quantizer = ResidualVectorQuantizer(dimension=128, n_q=4, bins=2048)
    return encodec.EncodecModel(encoder, decoder, quantizer, [2.2], 32000, 1)


def small_codec(config):
    """audiotok's EnCodec of a small config with random biases and codebooks (the engine's
    property tests: seconds, not minutes)."""
    from audiotok.models.encodec.codec import EncodecCodec
    from audiotok.models.encodec.model import EncodecModel

    torch.manual_seed(0)
    model = EncodecModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape))
        model.quantizer.embed.copy_(torch.randn(model.quantizer.embed.shape))
    return EncodecCodec(model.eval())


def save_th(model, folder: Path, name: str = "encodec_24khz-test.th") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), folder / name)
    return folder / name


def hf_model(model, config: dict | None = None):
    """transformers' EncodecModel (config: EncodecConfig's arguments) with the package model's
    weights (its names)."""
    from transformers import EncodecConfig, EncodecModel

    hf = EncodecModel(EncodecConfig(**(config or {}))).eval()
    sd = {}
    for key, value in model.state_dict().items():
        new = (key.replace("encoder.model.", "encoder.layers.")
               .replace("decoder.model.", "decoder.layers.")
               .replace(".conv.conv.", ".conv.").replace(".convtr.convtr.", ".conv.")
               .replace(".conv.norm.", ".norm.").replace(".convtr.norm.", ".norm.")
               .replace("quantizer.vq.layers.", "quantizer.layers.")
               .replace("._codebook.", ".codebook.")
               .replace(".weight_g", ".parametrizations.weight.original0")
               .replace(".weight_v", ".parametrizations.weight.original1"))
        sd[new] = value
    hf.load_state_dict(sd, strict=True)
    return hf


def reference_segments(model, audio: torch.Tensor, bandwidth: float | None = None) -> list:
    """The package's encoded frames (codes [B, K, T_s], scale [B, 1] or None) per segment."""
    model.set_target_bandwidth(bandwidth) if bandwidth else setattr(model, "bandwidth", None)
    with torch.no_grad():
        return model.encode(audio)


def reference_codes(model, audio: torch.Tensor, bandwidth: float | None = None) -> torch.Tensor:
    model.set_target_bandwidth(bandwidth) if bandwidth else setattr(model, "bandwidth", None)
    with torch.no_grad():
        frames = model.encode(audio)
    assert len(frames) == 1
    return frames[0][0]


def reference_decode(model, codes: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.decode([(codes, None)])
