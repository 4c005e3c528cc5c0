"""Mimi against its references on the same random weights: moshi 0.2.13 (input zero-padded to
whole frames: padding="frame") and transformers' MimiModel (each convolution pads:
padding="layer"), on the spec's small config and at full size; both checkpoint layouts."""

from dataclasses import replace

import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError, CheckpointError, CodesError
from tests.bounds import SAME_MODEL
from tests.models.mimi import reference
from tests.models.mimi.conftest import speechy

LENGTHS = [1920, 1920 * 10, 1, 1919, 1921, 24000, 48007]
AUDIO_TOL = 1e-4


def refs(moshi, hf, x):
    with torch.no_grad():
        return moshi.encode(x), hf.encode(x).audio_codes


def test_tokens_and_audio_equal_both_references(mimi_files, mimi_codec):
    moshi, hf, _, folder = mimi_files
    layer = audiotok.load(folder, padding="layer")
    conventions_differ = 0
    for i, n in enumerate(LENGTHS):
        x = speechy(n, i)
        want_moshi, want_hf = refs(moshi, hf, x)
        got = mimi_codec.encode(x[0], 24000)
        assert got.tokens.shape == (1, 4, -(-n // 1920))
        assert torch.equal(got.tokens, want_moshi), n
        assert torch.equal(layer.encode(x[0], 24000).tokens, want_hf), n
        conventions_differ += int(not torch.equal(want_moshi, want_hf))
        with torch.no_grad():
            audio_moshi = moshi.decode(want_moshi)
            audio_hf = hf.decode(want_hf).audio_values
        assert (mimi_codec.decode(want_moshi) - audio_moshi).abs().max() <= AUDIO_TOL
        assert (mimi_codec.decode(want_hf) - audio_hf).abs().max() <= AUDIO_TOL
        # Codes from encode() decode to the input's length
        assert mimi_codec.decode(got).shape[-1] == n
    assert conventions_differ >= 2  # the ragged lengths test the conventions apart


def test_both_layouts_load_the_same_weights(mimi_files, mimi_codec):
    _, _, moshi_file, _ = mimi_files
    from audiotok.models.mimi.config import MimiConfig

    from_moshi = audiotok.load(moshi_file, config=MimiConfig.from_dict(
        mimi_codec.config.to_dict()))
    a, b = mimi_codec.model.state_dict(), from_moshi.model.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_any_leading_codebooks_decode_like_the_references(mimi_files, mimi_codec):
    moshi, hf, _, folder = mimi_files
    x = speechy(1920 * 6, 9)
    full = mimi_codec.encode(x[0], 24000).tokens
    two = audiotok.load(folder, codebooks=2)
    assert two.num_codebooks == 2 and two.codebook_sizes == (64, 64)
    assert torch.equal(two.encode(x[0], 24000).tokens, full[:, :2])
    for k in (1, 2, 3):
        with torch.no_grad():
            want = moshi.decode(full[:, :k])
            want_hf = hf.decode(full[:, :k]).audio_values
        got = mimi_codec.decode(full[:, :k])
        assert (got - want).abs().max() <= AUDIO_TOL and (got - want_hf).abs().max() <= AUDIO_TOL
        assert torch.equal(two.decode(full[:, :k]), got)  # decode ignores the encode setting
    with pytest.raises(CodesError, match="tokens have 5 codebooks.*decodes 1..4"):
        mimi_codec.decode(torch.zeros(1, 5, 3, dtype=torch.long))
    with pytest.raises(AudiotokError, match="codebooks must be 1..4, got 0"):
        audiotok.load(folder, codebooks=0)
    with pytest.raises(AudiotokError, match="padding must be one of frame, layer"):
        audiotok.load(folder, padding="same")
    with pytest.raises(AudiotokError, match="Fish Audio S2 codec takes no load option "
                       "codebooks"):
        from tests.conftest import S2_TINY

        audiotok.load(S2_TINY / "codec.pth", codebooks=2)


def test_a_padded_batch_equals_its_items_alone(mimi_files, mimi_codec):
    """Both conventions: every item of a batch of different lengths gets what it gets alone
    (transformers' own batch changes the last frame of the shorter items)."""
    _, hf, _, folder = mimi_files
    lengths = [48007, 1921, 1920 * 7, 5]
    items = [speechy(n, 20 + i)[0, 0] for i, n in enumerate(lengths)]
    layer = audiotok.load(folder, padding="layer")
    for codec in (mimi_codec, layer):
        batch = codec.encode(items, 24000)
        for i, item in enumerate(items):
            alone = codec.encode(item, 24000).tokens[0]
            assert torch.equal(batch.tokens[i, :, : batch.lengths[i]], alone)
        audio = codec.decode(batch)
        for i, item in enumerate(items):
            alone = codec.decode(codec.encode(item, 24000))[0, 0]
            assert (audio[i, 0, : item.numel()] - alone).abs().max() <= SAME_MODEL
    # transformers' own padded batch: the shorter items' last frame changes
    padded = torch.zeros(2, 1, lengths[0])
    padded[0, 0], padded[1, 0, : lengths[1]] = items[0], items[1]
    with torch.no_grad():
        batch_hf = hf.encode(padded).audio_codes
    alone_hf = layer.encode(items[1], 24000).tokens[0]
    assert not torch.equal(batch_hf[1, :, :2], alone_hf)


def test_long_inputs_stream_in_pieces_with_the_same_tokens(mimi_codec, mimi_files):
    """Inputs longer than the spec's pieces run in streamed pieces: the tokens of one pass,
    in both conventions (a ragged last piece is padded as the whole pass pads it)."""
    folder = mimi_files[3]
    x = speechy(1920 * 70 + 777, 30)
    for codec in (mimi_codec, audiotok.load(folder, padding="layer")):
        pieces = codec.encode(x[0], 24000).tokens
        saved = codec.streaming
        codec.streaming = replace(saved, pieces=None)
        try:
            whole = codec.encode(x[0], 24000).tokens
            whole_audio = codec.decode(whole)
        finally:
            codec.streaming = saved
        assert torch.equal(pieces, whole)
        assert (codec.decode(pieces) - whole_audio).abs().max() <= SAME_MODEL


def test_checkpoint_errors(tmp_path, mimi_files):
    from safetensors.torch import load_file, save_file

    _, _, _, folder = mimi_files
    sd = load_file(str(folder / "model.safetensors"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((folder / "config.json").read_text())
    del sd["encoder_transformer.layers.0.self_attn.k_proj.weight"]
    save_file(sd, str(broken / "model.safetensors"))
    with pytest.raises(CheckpointError, match="q_proj, k_proj and v_proj must all be"):
        audiotok.load(broken)
    sd = load_file(str(folder / "model.safetensors"))
    del sd["quantizer.acoustic_residual_vector_quantizer.layers.1.codebook.cluster_usage"]
    save_file(sd, str(broken / "model.safetensors"))
    with pytest.raises(CheckpointError, match="codebook 1 of quantizer.acoustic lacks"):
        audiotok.load(broken)


@pytest.mark.parametrize("n", [1920 * 25, 24000 + 7])
def test_full_size_equals_both_references(n, full_size):
    moshi, hf, codec, layer = full_size
    x = speechy(n, n)
    want_moshi, want_hf = refs(moshi, hf, x)
    assert torch.equal(codec.encode(x[0], 24000).tokens, want_moshi)
    assert torch.equal(layer.encode(x[0], 24000).tokens, want_hf)
    with torch.no_grad():
        audio = moshi.decode(want_moshi)
    assert (codec.decode(want_moshi) - audio).abs().max() <= AUDIO_TOL


@pytest.fixture(scope="module")
def full_size(tmp_path_factory):
    pytest.importorskip("moshi")
    model = reference.moshi_model(small=False)
    moshi_file, hf = reference.save_both(model, tmp_path_factory.mktemp("mimi_full"), False)
    codec = audiotok.load(moshi_file)
    assert codec.num_codebooks == 32 and codec.info()["parameters"] == 79_308_609
    return model, reference.hf_model(hf), codec, audiotok.load(hf, padding="layer")
