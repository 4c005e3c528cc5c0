"""EnCodec's language-model token layouts: `musicgen` / `musicgen-stereo` against transformers'
own build_delay_pattern_mask, `bark` by a hand-computed example of Bark's coarse ids; exact
round trips (codes 0 and the top code included) and refusals with the place of the bad id."""

import numpy as np
import pytest
import torch

from audiotok.export.llm import TokenIdError, scheme_for


def transformers_pattern(tokens: np.ndarray, channels: int) -> np.ndarray:
    """transformers' MusicGen decoder sequence for codes [K, T]: the decoder-start column and
    the codes through build_delay_pattern_mask, max_length T + K (stereo T + K / 2)."""
    from transformers import MusicgenDecoderConfig, MusicgenForCausalLM

    k, t = tokens.shape
    config = MusicgenDecoderConfig(vocab_size=2048, num_codebooks=k, audio_channels=channels,
                                   hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   ffn_dim=16, pad_token_id=2048, decoder_start_token_id=2048)
    model = MusicgenForCausalLM(config)
    ids = torch.cat([torch.full((k, 1), 2048), torch.from_numpy(tokens)], 1)
    length = t + (k // channels)
    _, pattern = model.build_delay_pattern_mask(ids, pad_token_id=2048, max_length=length)
    return pattern.numpy()


@pytest.mark.parametrize("name, channels, k", [("musicgen", 1, 4), ("musicgen-stereo", 2, 8)])
def test_musicgen_is_transformers_delay_pattern(name, channels, k):
    s = scheme_for(name, (2048,) * k)
    tokens = np.random.default_rng(k).integers(0, 2048, (k, 6))
    tokens[:, 0] = 0
    tokens[:, 1] = 2047
    ids = s.to_ids(tokens)
    assert np.array_equal(ids, transformers_pattern(tokens, channels))
    assert np.array_equal(s.from_ids(ids), tokens)
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens)
    bad = ids.copy()
    bad[k - 1, 0] = 5  # a code where the pattern has the pad
    with pytest.raises(TokenIdError, match=f"codebook {k - 1}, step 0: the delay pattern"):
        s.from_ids(bad)


def test_musicgen_by_hand():
    s = scheme_for("musicgen", (2048,) * 4)
    tokens = np.array([[1, 2], [3, 4], [5, 6], [7, 8]])
    p = 2048
    assert s.to_ids(tokens).tolist() == [[p, 1, 2, p, p, p], [p, p, 3, 4, p, p],
                                         [p, p, p, 5, 6, p], [p, p, p, p, 7, 8]]
    with pytest.raises(TokenIdError, match="left/right pairs"):
        scheme_for("musicgen-stereo", (2048,) * 3)


def test_bark_coarse_ids_by_hand():
    """Bark's coarse prompt: codebook 1 offset by 1024, frames flattened, + 10000."""
    s = scheme_for("bark", (1024,) * 8)
    tokens = np.zeros((8, 3), np.int64)
    tokens[0] = (0, 5, 1023)
    tokens[1] = (7, 0, 1023)
    ids = s.to_ids(tokens)
    assert ids.tolist() == [10000, 11031, 10005, 11024, 11023, 12047]
    assert np.array_equal(s.from_ids(ids), tokens[:2])
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens[:2])
    with pytest.raises(TokenIdError, match="coarse id of codebook 1"):
        s.from_ids([10000, 10005])  # a codebook-0 id in codebook 1's place
    with pytest.raises(TokenIdError, match="whole frames"):
        s.from_ids([10000])


def test_valle_ar_sequence_is_pad_y_eos():
    """VALL-E's pad_y_eos with ar_audio_prepend_bos: targets = codes then EOS (1024), inputs =
    BOS (1025) then all but the last target; the scheme's sequence is BOS, codes, EOS."""
    import torch.nn.functional as F

    s = scheme_for("valle", (1024,) * 8)
    tokens = np.random.default_rng(2).integers(0, 1024, (8, 5))
    tokens[0, 0] = 0
    y = torch.from_numpy(tokens[0])[None]
    mask = torch.zeros_like(y)
    targets = F.pad(y, (0, 1), value=0) + 1024 * F.pad(mask, (0, 1), value=1)
    inputs = F.pad(targets[:, :-1], (1, 0), value=1025)
    ids = s.to_ids(tokens)
    assert ids[:-1].tolist() == inputs[0].tolist() and ids[1:].tolist() == targets[0].tolist()
    assert np.array_equal(s.from_ids(ids), tokens[:1])
    assert np.array_equal(s.from_ids(ids[1:]), tokens[:1])  # generated: no BOS
    assert np.array_equal(s.from_text(s.to_text(tokens)), tokens[:1])
    with pytest.raises(TokenIdError, match="code of codebook 0"):
        s.from_ids([1025, 3, 1025, 1024])
