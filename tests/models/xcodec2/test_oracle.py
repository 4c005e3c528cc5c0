"""Against transformers (test-time oracle, the optional `test` extra): SeamlessM4T's feature
extractor, and Xcodec2Model on random small configurations built here."""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import audiotok
from audiotok.models.xcodec2.features import semantic_features
from tests.bounds import AUDIO_PARITY, SAME_MODEL

transformers = pytest.importorskip(
    "transformers", reason="transformers is the X-Codec2 test oracle: pip install -e '.[test]'")


def extractor():
    from transformers import SeamlessM4TFeatureExtractor

    return SeamlessM4TFeatureExtractor(feature_size=80, num_mel_bins=80, padding_value=1.0,
                                       stride=2)


def reference_features(waves: list[np.ndarray], hop: int = 320):
    """The original pipeline: pad to the codec's length, hop/2 zeros each side, S4T fbank."""
    padded = [np.pad(w, (hop // 2, hop - w.size % hop + hop // 2)) for w in waves]
    out = extractor()(padded, sampling_rate=16000, return_tensors="np")
    return out["input_features"], out["attention_mask"]


def signal(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 16000
    f0 = 120 + 40 * rng.random()
    voiced = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t + rng.random() * 6)
    return (0.05 * voiced * envelope + 0.01 * rng.standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize("n", [1, 319, 320, 4801, 16000, 37123])
def test_features_match_seamless_m4t(n):
    wave = signal(n, n)
    expected, mask = reference_features([wave])
    p = (n // 320 + 1) * 320
    audio = torch.nn.functional.pad(torch.from_numpy(wave), (0, p - n))[None]
    feats, valid = semantic_features(audio, torch.tensor([p]), 320, 16000)
    assert feats.shape == expected.shape and bool(valid.all()) and mask.all()
    assert np.abs(feats.numpy() - expected).max() <= 1e-4


def test_batched_features_match_seamless_m4t():
    waves = [signal(n, n) for n in (16000, 7000, 321)]
    expected, mask = reference_features(waves)
    lengths = torch.tensor([(w.size // 320 + 1) * 320 for w in waves])
    audio = torch.zeros(3, int(lengths.max()))
    for i, w in enumerate(waves):
        audio[i, : w.size] = torch.from_numpy(w)
    feats, valid = semantic_features(audio, lengths, 320, 16000)
    np.testing.assert_array_equal(valid.numpy(), mask.astype(bool))
    assert np.abs(feats.numpy() - expected).max() <= 1e-4


CONFIGS = {
    "ratios4-8-10-levels8555": dict(
        encoder_hidden_size=4, downsampling_ratios=[4, 8, 10], hidden_size=32,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
        intermediate_size=48, quantization_dim=48, quantization_levels=[8, 5, 5, 5],
        semantic=dict(hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                      intermediate_size=32)),
    "ratios2-2-4-4-5-4heads": dict(
        encoder_hidden_size=4, downsampling_ratios=[2, 2, 4, 4, 5], hidden_size=64,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
        intermediate_size=64, quantization_dim=96, quantization_levels=[4] * 8,
        semantic=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=40)),
}


def build_reference(name: str, seed: int = 0):
    from transformers import Wav2Vec2BertConfig, Xcodec2Config, Xcodec2Model

    spec = dict(CONFIGS[name])
    sem = spec.pop("semantic")
    semantic = Wav2Vec2BertConfig(feature_projection_input_dim=160, **sem,
                                  position_embeddings_type="relative_key")
    config = Xcodec2Config(semantic_model_config=semantic.to_dict(), **spec)
    torch.manual_seed(seed)
    model = Xcodec2Model(config).eval()
    with torch.no_grad():  # larger weights than the init, so activations and codes vary
        for pname, p in model.named_parameters():
            if p.dim() >= 2:
                fan_in = p[0].numel()
                p.normal_(0, 1.0 / np.sqrt(fan_in))
            elif "act." in pname:
                p.uniform_(-0.5, 0.5)
        model.quantizer.project_in.weight.mul_(3.0)
    return model


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pair(request, tmp_path_factory):
    reference = build_reference(request.param)
    d = tmp_path_factory.mktemp(request.param)
    reference.save_pretrained(d)
    return reference, audiotok.load(d), request.param


def test_encode_decode_match_transformers(pair):
    reference, ours, _ = pair
    hop = ours.samples_per_frame
    waves = [signal(n, n) for n in (hop * 50 + 7, hop * 31)]
    for wave in waves:
        p = (wave.size // hop + 1) * hop
        feats, _ = reference_features([wave], hop)
        values = torch.nn.functional.pad(torch.from_numpy(wave), (0, p - wave.size))[None, None]
        with torch.no_grad():
            z = reference.quantizer.project_in(reference.fc_encoder(torch.cat([
                reference.semantic_adapter(reference.semantic_encoder(
                    torch.from_numpy(feats)).last_hidden_state.transpose(1, 2)),
                reference.acoustic_encoder(values)], dim=1).transpose(1, 2)))
            expected = reference.encode(values, torch.from_numpy(feats)).audio_codes
        bounded = reference.quantizer.quantizer.bound(reference.quantizer.quantizer.bound(z))
        margin = (bounded - bounded.floor() - 0.5).abs().min()
        assert margin > 1e-4  # far from a rounding boundary: codes must agree exactly
        codes = ours.encode(wave, sample_rate=16000)
        np.testing.assert_array_equal(codes.tokens.numpy(), expected.numpy())
        with torch.no_grad():
            audio_ref = reference.decode(expected).audio_values
        audio = ours.decode(codes.tokens)
        assert audio.shape == audio_ref.shape
        assert (audio - audio_ref).abs().max() <= AUDIO_PARITY
        assert len(set(codes.tokens.flatten().tolist())) > 5  # the test is not trivial


def test_batched_decode_equals_single_decode(pair):
    _, ours, _ = pair
    torch.manual_seed(1)
    size = ours.codebook_sizes[0]
    items = [torch.randint(0, size, (1, 1, t)) for t in (30, 17, 5)]
    batch = torch.zeros(3, 1, 30, dtype=torch.long)
    for i, it in enumerate(items):
        batch[i, :, : it.shape[-1]] = it[0]
    codes = audiotok.Codes(tokens=batch, lengths=torch.tensor([30, 17, 5]), codec="xcodec2")
    audio = ours.decode(codes)
    for i, it in enumerate(items):
        n = it.shape[-1] * ours.samples_per_frame
        assert (audio[i, :, :n] - ours.decode(it)[0]).abs().max() <= SAME_MODEL


def hf_to_original(sd: dict, heads: int, head_dim: int) -> dict:
    """transformers names -> the training code's names (spec 4.4), weight norm as legacy g/v."""
    out = {}
    renames = [("semantic_encoder.", "semantic_model."),
               ("semantic_adapter.conv1.", "SemanticEncoder_module.initial_conv."),
               ("semantic_adapter.conv2.", "SemanticEncoder_module.residual_blocks.1."),
               ("semantic_adapter.conv3.", "SemanticEncoder_module.residual_blocks.3."),
               ("semantic_adapter.conv4.", "SemanticEncoder_module.final_conv."),
               ("acoustic_encoder.conv1.", "CodecEnc.conv_blocks.0."),
               ("acoustic_encoder.snake1.", "CodecEnc.conv_final_block.0."),
               ("acoustic_encoder.conv2.", "CodecEnc.conv_final_block.1."),
               ("fc_encoder.", "fc_prior."), ("quantizer.", "generator.quantizer."),
               ("acoustic_decoder.fc.", "fc_post_a."),
               ("acoustic_decoder.norm.", "generator.backbone.final_layer_norm."),
               ("acoustic_decoder.head.linear.", "generator.head.out."),
               ("acoustic_decoder.", "generator.backbone.")]
    parts = {"snake1": 0, "conv1": 1, "snake2": 2, "conv2": 3}
    qkv = {}
    for k, v in sd.items():
        if k.endswith("masked_spec_embed"):
            continue
        key = k
        if k.startswith("acoustic_encoder.block."):
            _, _, b, unit, part, *rest = k.split(".")
            if unit.startswith("res_unit"):
                key = (f"CodecEnc.conv_blocks.{int(b) + 1}.block.{int(unit[-1]) - 1}.block."
                       f"{parts[part]}.{'.'.join(rest)}")
            else:
                key = f"CodecEnc.conv_blocks.{int(b) + 1}.block.{3 if unit == 'snake1' else 4}." \
                      f"{'.'.join([part, *rest])}"
        elif ".self_attn." in k and k.startswith("acoustic_decoder."):
            layer, proj = k.split(".")[2], k.split(".")[4]
            qkv.setdefault(layer, {})[proj] = v
            continue
        else:
            for a, b in renames:
                if k.startswith(a):
                    key = b + k[len(a):]
                    break
            key = (key.replace("layers.", "transformers.").replace("input_layernorm", "att_norm")
                   .replace("post_attention_layernorm", "ffn_norm")
                   if key.startswith("generator.backbone.") else key)
        if key.endswith(".act.beta"):
            key = key[: -len("beta")] + "bias"  # the pip package's spelling
        if key.startswith("CodecEnc.") and key.endswith(".weight") and v.dim() == 3:
            g = v.flatten(1).norm(dim=1).view(-1, 1, 1)
            out[key[:-7] + ".weight_g"], out[key[:-7] + ".weight_v"] = g, v * 1.7
        else:
            out[key] = v
    for layer, p in qkv.items():
        def interleave(w):
            return w.view(heads, 2, head_dim // 2, -1).transpose(1, 2).reshape(heads * head_dim, -1)
        out[f"generator.backbone.transformers.{layer}.att.c_attn.weight"] = torch.cat(
            [interleave(p["q_proj"]), interleave(p["k_proj"]), p["v_proj"]])
        out[f"generator.backbone.transformers.{layer}.att.c_proj.weight"] = p["o_proj"]
    return out


def test_original_layout_of_the_same_weights(pair, tmp_path):
    reference, ours, name = pair
    spec = CONFIGS[name]
    original = hf_to_original(reference.state_dict(), spec["num_attention_heads"],
                              spec["head_dim"])
    save_file({k: v.contiguous() for k, v in original.items()}, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({
        "codec_decoder": {"heads": spec["num_attention_heads"]},
        "semantic_model": {"hidden_state_index_used": spec["semantic"]["num_hidden_layers"]}}))
    if spec["quantization_levels"] != [4] * 8:
        pytest.skip("the original layout stores no FSQ levels: its code has 8 x 4 only")
    loaded = audiotok.load(tmp_path)
    assert loaded.config == ours.config
    theirs = ours.model.state_dict()
    for k, v in loaded.model.state_dict().items():
        assert torch.allclose(v, theirs[k], atol=1e-6), k
