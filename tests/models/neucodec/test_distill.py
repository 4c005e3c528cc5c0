"""DistillNeuCodec against the neucodec package (0.0.6) at a small size with random weights:
codes identical for lengths of one frame to 2.5 s (across several of the acoustic encoder's
attention windows, 20 and 100 steps at this size), N // 320 + 1 frames, decoded audio within
1e-4; a batch equals its items; save_pretrained round trip."""

import torch

import audiotok
from tests.models.neucodec import reference
from tests.models.neucodec.conftest import speech_like

LENGTHS = (320, 321, 639, 640, 16123, 40007)


def test_codes_and_audio_equal_the_package(distill_small, tmp_path):
    m, path = distill_small
    codec = audiotok.load(path)
    assert (codec.name, codec.title, codec.sample_rate, codec.input_rate) == \
        ("distill-neucodec", "DistillNeuCodec", 24000, 16000)
    for n in LENGTHS:
        x = speech_like(n, n)
        want = reference.package_codes(m, torch.from_numpy(x)[None, None])
        codes = codec.encode(x, 16000)
        assert codec.num_frames(n) == n // 320 + 1 == want.shape[-1]
        assert torch.equal(codes.tokens, want), n
        audio = codec.decode(codes.tokens)  # raw tokens: whole frames, as the package gives
        want_audio = reference.package_audio(m, want)
        assert audio.shape == want_audio.shape
        assert (audio - want_audio).abs().max() <= 1e-4, n
    assert len(set(codes.tokens.flatten().tolist())) > 30  # 126 frames: the codes vary
    assert int(codes.num_samples[0]) == -(-LENGTHS[-1] * 3 // 2)  # the input's length at 24 kHz
    codec.save_pretrained(tmp_path / "ours")
    again = audiotok.load(tmp_path / "ours")
    assert again.name == "distill-neucodec"
    assert torch.equal(again.encode(x, 16000).tokens, codes.tokens)


def test_a_batch_equals_its_items_alone(distill_small):
    codec = audiotok.load(distill_small[1])
    items = [speech_like(n, i) for i, n in enumerate((8000, 3000, 7900, 321))]
    batch = codec.encode(items, 16000)
    assert batch.lengths.tolist() == [26, 10, 25, 2]
    for i, x in enumerate(items):
        n = int(batch.lengths[i])
        assert torch.equal(batch.tokens[i : i + 1, :, :n], codec.encode(x, 16000).tokens)


def test_the_name_and_distilhubert_resolve_through_the_hub_cache(distill_small, tmp_path):
    """`distill-neucodec` fetches the package's file (without DistilHuBERT, as released) from
    neuphonic/distill-neucodec and DistilHuBERT from ntu-spml/distilhubert, as the package does;
    offline, from the hub cache."""
    import numpy as np
    from safetensors.torch import save_file

    from tests.test_hub import _run, cache_repo

    m, path = distill_small
    released = reference.save_package(m, tmp_path / "released", semantic=False)
    hubert = tmp_path / "hubert.safetensors"
    save_file({k: v.contiguous() for k, v in m.semantic_model.state_dict().items()}, str(hubert))
    cache = tmp_path / "cache"
    snapshot = cache_repo(cache, "neuphonic/distill-neucodec", {
        "pytorch_model.bin": released, "meta.yaml": released.parent / "meta.yaml",
        "config.json": released.parent / "config.json"})
    cache_repo(cache, "ntu-spml/distilhubert", {"model.safetensors": hubert})
    x = speech_like(8000, 9)
    np.save(tmp_path / "x.npy", x)
    code = ("import audiotok, numpy as np\n"
            f"x = np.load(r'{tmp_path / 'x.npy'}')\n"
            "c = audiotok.load('distill-neucodec')\n"
            "print(c.source, ' '.join(map(str, c.encode(x, 16000).tokens[0, 0].tolist())))\n")
    out = _run(code, {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    want = reference.package_codes(m, torch.from_numpy(x)[None, None])[0, 0].tolist()
    assert out.stdout.split() == [str(snapshot / "pytorch_model.bin"), *map(str, want)]
    assert "DistillNeuCodec weights: Apache-2.0" in out.stderr
