"""The NeuCodec references for parity tests: the neucodec package's NeuCodec (PyPI neucodec
0.0.6, installed by .ci/run into .refs/neucodec with the packages it imports) with random
weights, small or at the released sizes, and transformers' NeuCodecModel holding the same
weights.

The package's NeuCodec.__init__ downloads facebook/w2v-bert-2.0 and fixes every size, so the
model is assembled here from the package's own modules (the code that runs is the package's).
Default init makes a trivial model (every weight-norm gain equals its direction's norm, Snake
parameters are 0, biases 0, and the FSQ projection maps everything to a few codes): gains are
set for unit gain x U(0.7, 1.3), Snake log-parameters U(-0.5, 0.5), biases N(0, 0.02^2), and
the FSQ input projection scaled x40 (the spec's recipe), so codes vary and no path is
silent."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = Path(os.environ.get("AUDIOTOK_NEUCODEC_REF", ROOT / ".refs" / "neucodec"))
STAND_INS = ROOT / "tests" / "models" / "dac" / "stand_ins"  # torchaudio

SMALL = dict(ngf=8, hidden=64, depth=2, heads=4, rope_dim=16, semantic=32, semantic_heads=2,
             semantic_ffn=64, semantic_layers=17)
FULL = dict(ngf=48, hidden=1024, depth=12, heads=16, rope_dim=64, semantic=1024,
            semantic_heads=16, semantic_ffn=4096, semantic_layers=16)


def import_neucodec():
    """The neucodec package (skips the test when it is not installed)."""
    if not (REFERENCE / "neucodec").is_dir():
        pytest.skip(f"the neucodec reference is not installed in {REFERENCE} (see .ci/run)")
    for p in (STAND_INS, REFERENCE):
        if str(p) not in sys.path:
            sys.path.append(str(p))
    import neucodec.model

    return neucodec


def semantic_config(size: dict):
    from transformers import Wav2Vec2BertConfig

    return Wav2Vec2BertConfig(
        hidden_size=size["semantic"], num_hidden_layers=size["semantic_layers"],
        num_attention_heads=size["semantic_heads"], intermediate_size=size["semantic_ffn"],
        feature_projection_input_dim=160, position_embeddings_type="relative_key",
        left_max_position_embeddings=64, right_max_position_embeddings=8,
        conv_depthwise_kernel_size=31, add_adapter=False, output_hidden_states=True)


def extractor():
    """facebook/w2v-bert-2.0's feature extractor (its preprocessor config)."""
    from transformers import SeamlessM4TFeatureExtractor

    return SeamlessM4TFeatureExtractor(feature_size=80, num_mel_bins=80, padding_value=1.0,
                                       stride=2, sampling_rate=16000)


def package_model(size: dict, seed: int = 0):
    """neucodec.model.NeuCodec at `size`, random weights as the module docstring says."""
    neucodec = import_neucodec()
    from neucodec.codec_decoder_vocos import CodecDecoderVocos
    from neucodec.codec_encoder import CodecEncoder
    from neucodec.module import SemanticEncoder
    from transformers import Wav2Vec2BertModel

    torch.manual_seed(seed)
    m = neucodec.model.NeuCodec.__new__(neucodec.model.NeuCodec)
    nn.Module.__init__(m)
    m.sample_rate, m.hop_length = 24000, 480
    m.semantic_model = Wav2Vec2BertModel(semantic_config(size))
    m.feature_extractor = extractor()
    s, h = size["semantic"], size["hidden"]
    m.SemanticEncoder_module = SemanticEncoder(s, s, s)
    m.CodecEnc = CodecEncoder(ngf=size["ngf"], hidden_dim=h)
    m.generator = CodecDecoderVocos(hidden_dim=h, depth=size["depth"], heads=size["heads"],
                                    pos_meb_dim=size["rope_dim"], hop_length=480, vq_dim=s + h)
    m.fc_prior = nn.Linear(s + h, s + h)
    m.fc_post_a = nn.Linear(s + h, h)
    randomise(m, seed)
    return m.eval()


def randomise(m: nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.startswith("semantic_model."):
                continue  # transformers' own init is not trivial
            if name.endswith(("act.alpha", "act.beta")):
                p.copy_(torch.rand(p.shape, generator=g) - 0.5)
            elif name.endswith("weight_g"):
                p.copy_(0.7 + 0.6 * torch.rand(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
        m.generator.quantizer.project_in.weight.mul_(40)


def save_package(m: nn.Module, folder: Path, semantic: bool = True) -> Path:
    """pytorch_model.bin as the package's state dict (the released file lacks the semantic
    model: semantic=False), and meta.yaml; a config.json describing the decoder's heads (what
    tensor shapes cannot tell), as the X-Codec2 golden files do."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    sd = {k: v for k, v in m.state_dict().items()
          if semantic or not k.startswith("semantic_model.")}
    torch.save(sd, folder / "pytorch_model.bin")
    (folder / "meta.yaml").write_text("license: apache-2.0\n")
    heads = m.generator.backbone.transformers[0].att.n_heads
    described = {"codec_decoder": {"heads": heads}}
    if hasattr(m, "codec_encoder"):  # DistillNeuCodec
        described["acoustic_window"] = m.codec_encoder.en_encoder.local_window_size
    (folder / "config.json").write_text(json.dumps(described))
    return folder / "pytorch_model.bin"


def package_codes(m, audio: torch.Tensor) -> torch.Tensor:
    """encode_code of [B, 1, N] audio: [B, 1, T]."""
    with torch.inference_mode():
        return m.encode_code(audio)


def package_audio(m, codes: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return m.decode_code(codes)


def hf_model(codec):
    """transformers' NeuCodecModel with the weights audiotok loaded (its names are ours)."""
    from transformers import NeuCodecConfig, NeuCodecModel

    cfg = codec.config.to_dict()
    hf = NeuCodecModel(NeuCodecConfig(**{k: v for k, v in cfg.items() if k != "model_type"}))
    missing, unexpected = hf.load_state_dict(codec.model.state_dict(), strict=False)
    assert not unexpected, unexpected
    assert all("masked_spec_embed" in k or "rotary" in k for k in missing), missing
    return hf.eval()


# DistillNeuCodec: DistilHuBERT (small: 48 wide, 12 heads of 4, conv 32), the acoustic encoder
# at width 8..64 with attention windows of 20 and 100 steps (released: 300 and 1500; short
# windows so that 1 s crosses several), NeuCodec's small decoder
DISTILL_SMALL = dict(ngf=8, hidden=64, depth=2, heads=4, rope_dim=16, hubert=48, hubert_conv=32,
                     adapter=64, dims=(8, 16, 32, 64), acoustic=64, window=20)
DISTILL_FULL = dict(ngf=48, hidden=1024, depth=12, heads=16, rope_dim=64, hubert=768,
                    hubert_conv=512, adapter=1024, dims=(32, 64, 128, 256), acoustic=512,
                    window=300)


def distill_package_model(size: dict, seed: int = 0):
    """neucodec.model.DistillNeuCodec at `size`, random weights as package_model's."""
    neucodec = import_neucodec()
    from neucodec.codec_decoder_vocos import CodecDecoderVocos
    from neucodec.codec_encoder_distill import (
        CompressedLocalEncoderWithCache,
        DistillCodecEncoder,
        Encoder,
    )
    from neucodec.module import SemanticEncoder
    from transformers import HubertConfig, HubertModel, Wav2Vec2FeatureExtractor

    torch.manual_seed(seed)
    m = neucodec.model.DistillNeuCodec.__new__(neucodec.model.DistillNeuCodec)
    nn.Module.__init__(m)
    m.sample_rate, m.hop_length = 24000, 480
    h, c = size["hubert"], size["hubert_conv"]
    m.semantic_model = HubertModel(HubertConfig(
        hidden_size=h, num_hidden_layers=2, num_attention_heads=12, intermediate_size=4 * h,
        conv_dim=(c,) * 7, conv_kernel=(10, 3, 3, 3, 3, 2, 2), conv_stride=(5, 2, 2, 2, 2, 2, 2),
        conv_bias=False, feat_extract_norm="group", feat_proj_layer_norm=False,
        do_stable_layer_norm=False, num_conv_pos_embeddings=128, num_conv_pos_embedding_groups=16,
        output_hidden_states=True))
    m.feature_extractor = Wav2Vec2FeatureExtractor(do_normalize=False, return_attention_mask=False)
    m.SemanticEncoder_module = SemanticEncoder(h, h, size["adapter"])
    enc = DistillCodecEncoder.__new__(DistillCodecEncoder)
    nn.Module.__init__(enc)
    a = size["acoustic"]
    enc.encoder = Encoder(feature_dim=a, strides=(4, 4, 4, 4), depths=(1, 1, 1, 2),
                          dims=size["dims"])
    enc.en_encoder = CompressedLocalEncoderWithCache(
        feature_dim=a, local_window_size=size["window"], compress_rate=5, cache_size=0, depth=5,
        use_dynamic_pos_bias=True)
    m.codec_encoder = enc
    d = size["hidden"]
    m.generator = CodecDecoderVocos(hidden_dim=d, depth=size["depth"], heads=size["heads"],
                                    pos_meb_dim=size["rope_dim"], hop_length=480, vq_dim=2 * h)
    m.fc_prior = nn.Linear(2 * h, 2 * h)
    m.fc_sq_prior = nn.Linear(a, h)
    m.fc_post_a = nn.Linear(2 * h, d)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.startswith("semantic_model."):
                continue
            if name.endswith(("act.alpha", "act.beta")):
                p.copy_(0.5 + torch.rand(p.shape, generator=g) if "codec_encoder" in name
                        else torch.rand(p.shape, generator=g) - 0.5)
            elif name.endswith(("original0", "weight_g")):
                p.copy_(0.7 + 0.6 * torch.rand(p.shape, generator=g))
            elif name.endswith(("bias", "grn.gamma", "grn.beta")):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
        m.generator.quantizer.project_in.weight.mul_(40)
    return m.eval()
