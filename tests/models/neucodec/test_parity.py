"""NeuCodec against its references on random weights at the small size: the neucodec package
(0.0.6) and transformers' NeuCodecModel holding the same weights. Codes identical, decoded
audio within 1e-4; N // 320 frames; 24 kHz out."""

import json

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudioError
from audiotok.models.xcodec2.features import semantic_features
from tests.models.neucodec import reference
from tests.models.neucodec.conftest import speech_like

# under a frame .. a frame and a half, two frames, 1 s, ragged, and 4 s and a bit
LENGTHS = (320, 321, 639, 640, 16000, 16123, 16319, 64007)


def test_codes_and_audio_equal_the_package(small):
    m, path = small
    codec = audiotok.load(path)
    assert (codec.name, codec.sample_rate, codec.input_rate, codec.samples_per_frame,
            codec.input_samples_per_frame, codec.frame_rate) == \
        ("neucodec", 24000, 16000, 480, 320, 50.0)
    for n in LENGTHS:
        x = speech_like(n, n)
        want = reference.package_codes(m, torch.from_numpy(x)[None, None])
        codes = codec.encode(x, 16000)
        assert codec.num_frames(n) == n // 320 == want.shape[-1]
        assert torch.equal(codes.tokens, want), n
        assert int(codes.num_samples[0]) == want.shape[-1] * 480  # what decoding gives
        audio = codec.decode(codes)
        want_audio = reference.package_audio(m, want)
        assert audio.shape == want_audio.shape == (1, 1, 480 * want.shape[-1])
        assert (audio - want_audio).abs().max() <= 1e-4, n
    assert len(set(codes.tokens.flatten().tolist())) > 20  # the codes vary
    assert want_audio.pow(2).mean().sqrt() > 1e-3


def test_under_one_frame_is_a_clear_error(small):
    codec = audiotok.load(small[1])
    with pytest.raises(AudioError, match=r"319 samples is less than one NeuCodec frame \(320 "
                                         r"samples at 16000 Hz\)"):
        codec.encode(np.zeros(319, np.float32), 16000)
    with pytest.raises(AudioError, match="less than one NeuCodec frame"):
        codec.encode([np.zeros(16000, np.float32), np.zeros(5, np.float32)], 16000)


def test_a_padded_batch_equals_its_items_alone(small):
    codec = audiotok.load(small[1])
    items = [speech_like(n, i) for i, n in enumerate((16123, 7000, 321, 640))]
    batch = codec.encode(items, 16000)
    assert batch.lengths.tolist() == [50, 21, 1, 2]
    audio = codec.decode(batch)
    for i, x in enumerate(items):
        alone = codec.encode(x, 16000)
        n = int(batch.lengths[i])
        assert torch.equal(batch.tokens[i : i + 1, :, :n], alone.tokens)
        want = codec.decode(alone)
        assert (audio[i : i + 1, :, : want.shape[-1]] - want).abs().max() <= 1e-4
        assert not audio[i, :, want.shape[-1] :].any()


def test_input_at_another_rate_is_resampled_to_16_khz(small):
    codec = audiotok.load(small[1])
    x = speech_like(24000, 3)  # 1 s at 24 kHz
    codes = codec.encode(x, 24000)
    assert codes.lengths.tolist() == [50] and codes.meta["source_sample_rate"] == [24000]
    assert codec.info()["input_sample_rate"] == 16000 and codec.info()["sample_rate"] == 24000


def test_transformers_neucodec_model_with_the_same_weights(small, tmp_path):
    """Given our semantic features (its own extractor needs torchaudio's kaldi fbank, which does
    not run here), NeuCodecModel gives the same codes and audio; its save_pretrained folder (the
    transformers layout) loads and gives them too."""
    codec = audiotok.load(small[1])
    hf = reference.hf_model(codec)
    for n in (640, 16123, 64007):
        x = torch.from_numpy(speech_like(n, n))
        p = (n // 320 + 1) * 320
        padded = torch.nn.functional.pad(x, (0, p - n))[None]
        features, _ = semantic_features(padded, torch.tensor([p]), 320, 16000, centre=False)
        with torch.inference_mode():
            want = hf.encode(padded[:, None], features).audio_codes
            want_audio = hf.decode(want).audio_values
        codes = codec.encode(x, 16000)
        assert torch.equal(codes.tokens, want), n
        assert (codec.decode(codes) - want_audio).abs().max() <= 1e-4
    hf.save_pretrained(tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "neucodec"
    again = audiotok.load(tmp_path / "hf")
    assert again.name == "neucodec" and again.source.endswith("model.safetensors")
    x = speech_like(16123, 5)
    assert torch.equal(again.encode(x, 16000).tokens, codec.encode(x, 16000).tokens)
    ours = tmp_path / "ours"
    codec.save_pretrained(ours)
    assert torch.equal(audiotok.load(ours).encode(x, 16000).tokens, codec.encode(x, 16000).tokens)


def test_plain_decoder_weights_win_over_a_stored_weight_norm_pair(small, tmp_path):
    """The released file stores some decoder convolutions both plainly and as weight-norm pairs;
    the package loads the plain weight, and so does audiotok (a pair that disagrees with it is
    not read)."""
    m, path = small
    sd = torch.load(path, weights_only=True)
    w = sd["generator.backbone.embed.weight"]
    sd["generator.backbone.embed.weight_v"] = torch.randn_like(w)
    sd["generator.backbone.embed.weight_g"] = torch.ones(w.shape[0], 1, 1)
    folder = tmp_path / "pair"
    folder.mkdir()
    torch.save(sd, folder / "pytorch_model.bin")
    for name in ("meta.yaml", "config.json"):
        (folder / name).write_bytes((path.parent / name).read_bytes())
    codec = audiotok.load(folder)
    assert codec.source.endswith("pytorch_model.bin")
    codes = torch.from_numpy(np.arange(0, 65536, 997)[None, None])
    want = reference.package_audio(m, codes)
    assert (codec.decode(codes) - want).abs().max() <= 1e-4


def test_names_and_the_semantic_model_resolve_through_the_hub_cache(small, tmp_path):
    """`neucodec` fetches the transformers layout from neuphonic/neucodec; the package's
    pytorch_model.bin, which lacks the semantic model, gets it from facebook/w2v-bert-2.0
    (its 17th layer is not read), as the package does; offline, from the hub cache."""
    from safetensors.torch import save_file

    from tests.test_hub import _run, cache_repo

    m, path = small
    hf_dir = tmp_path / "hf"
    reference.hf_model(audiotok.load(path)).save_pretrained(hf_dir)
    w2v = tmp_path / "w2v.safetensors"
    save_file({k: v.contiguous() for k, v in m.semantic_model.state_dict().items()}, str(w2v))
    released = reference.save_package(m, tmp_path / "released", semantic=False)
    cache = tmp_path / "cache"
    snapshot = cache_repo(cache, "neuphonic/neucodec", {
        "model.safetensors": hf_dir / "model.safetensors", "config.json": hf_dir / "config.json"})
    cache_repo(cache, "facebook/w2v-bert-2.0", {"model.safetensors": w2v})
    x = speech_like(16123, 8)
    np.save(tmp_path / "x.npy", x)
    code = (
        "import audiotok, numpy as np\n"
        f"x = np.load(r'{tmp_path / 'x.npy'}')\n"
        "for name in ('neucodec', r'" + str(released.parent) + "'):\n"
        "    c = audiotok.load(name)\n"
        "    print(c.source, ' '.join(map(str, c.encode(x, 16000).tokens[0, 0].tolist())))\n"
    )
    out = _run(code, {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    want = " ".join(map(str, reference.package_codes(
        m, torch.from_numpy(x)[None, None])[0, 0].tolist()))
    assert lines == [f"{snapshot / 'model.safetensors'} {want}", f"{released} {want}"]
    assert out.stderr.count("Apache-2.0") == 1
