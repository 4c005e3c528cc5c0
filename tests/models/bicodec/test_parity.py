"""BiCodec against Spark-TTS's own code (spark-tts-lib 0.2.1) on random weights: its
tokenizer's semantic and global tokens from the same audio files, token for token, and its
detokenize's audio within 1e-4, at the small size around every length rule (the released size:
test_released.py); Spark's volume normalisation on and off; the utterance tokens in Codes
files; clear errors for what cannot be decoded."""

import numpy as np
import pytest
import soundfile as sf
import torch

import audiotok
from audiotok.errors import AudioError, CodesError
from tests.bounds import AUDIO_PARITY
from tests.models.bicodec import reference


def noise(n: int, seed: int, level: float = 0.3) -> np.ndarray:
    """Speech-level noise with a slow envelope (so the volume rule has a spread to measure)."""
    rng = np.random.default_rng(seed)
    env = 0.5 + 0.5 * np.sin(np.linspace(0, 6 * np.pi, n)) ** 2
    return (level * env * rng.standard_normal(n)).astype(np.float32)


def check(r, x: np.ndarray, path, codec=None) -> audiotok.Codes:
    """Our tokens of the file `path` (holding x) equal Spark's tokenizer's; our decode of them
    equals Spark's detokenize within AUDIO_PARITY."""
    sf.write(path, x, 16000, subtype="FLOAT")
    g, s = reference.tokenize(r.tok, path)
    codes = (codec or r.codec).encode(path)
    assert codes.tokens.shape == (1, 1, s.size) and codes.globals.shape == (1, 32)
    np.testing.assert_array_equal(codes.tokens[0, 0].numpy(), s)
    np.testing.assert_array_equal(codes.globals[0].numpy(), g)
    want = reference.detokenize(r.ref, g, s)
    got = (codec or r.codec).decode(codes)[0, 0].numpy()
    assert got.shape == want.shape == (320 * s.size,)
    assert np.abs(got - want).max() <= AUDIO_PARITY
    return codes


@pytest.mark.parametrize("n", [400, 719, 720, 16000, 16320])
def test_tokens_and_audio_equal_spark_at_every_length_rule(spark, tmp_path, n):
    """(N - 400) // 320 + 1 tokens: 400 samples are one, 720 two; the reference clip repeats
    the item to 6 s."""
    codes = check(spark("tiny"), noise(n, n), tmp_path / "x.wav")
    assert codes.tokens.shape[-1] == (n - 400) // 320 + 1


def test_reference_clips_of_6_s_and_longer_and_quiet_input(spark, tmp_path):
    r = spark("tiny")
    check(r, noise(96000, 1), tmp_path / "six.wav")  # exactly the clip
    check(r, noise(100007, 2), tmp_path / "long.wav")  # the first 6 s of it
    check(r, noise(8000, 3, level=0.01), tmp_path / "quiet.wav")  # peak < 0.1: raised first


def test_global_tokens_follow_the_speaker_clip(spark):
    """The calibrated speaker branch: different clips give different global tokens, many
    values among the 32."""
    codec = spark("tiny").codec
    a, b = codec.encode(noise(32000, 5)), codec.encode(noise(32000, 6, level=0.05) ** 3 * 40)
    assert (a.globals != b.globals).sum() > 8
    assert len(set(a.globals[0].tolist())) > 5


def test_without_volume_normalisation_equals_spark_without(spark, tmp_path):
    """volume="asis": what Spark's tokenizer gives with its config's switch off (the
    global tokens change, the semantic tokens need not)."""
    r = spark("tiny")
    codec = audiotok.load(r.folder, volume="asis")
    assert codec.info()["volume_normalize"] is False
    tok = reference.tokenizer(r.ref, r.w2v)
    tok.config["volume_normalize"] = False
    x = noise(24000, 7, level=0.02)
    path = tmp_path / "quiet.wav"
    sf.write(path, x, 16000, subtype="FLOAT")
    g, s = reference.tokenize(tok, path)
    plain = codec.encode(path)
    np.testing.assert_array_equal(plain.globals[0].numpy(), g)
    np.testing.assert_array_equal(plain.tokens[0, 0].numpy(), s)
    assert (r.codec.encode(path).globals[0].numpy() != g).any()


def test_mel_equals_torchaudio(spark):
    r = spark("tiny")
    clip = torch.from_numpy(noise(96000, 8))[None]
    want = r.ref.mel_transformer(clip)
    got = r.codec.model.mel(clip)
    assert got.shape == want.shape == (1, 128, 301)
    assert (got - want).abs().max() <= 1e-6 * want.abs().max()


def test_batches_and_decoding_need_the_global_tokens(spark, tmp_path):
    """A ragged batch gives each item its tokens alone; decoding without the utterance tokens,
    with the wrong count or out of range is a clear error (clamp=True clamps); .codes files
    keep them, .npy files refuse them."""
    codec = spark("tiny").codec
    xs = [noise(n, 10 + n) for n in (5000, 12345, 800)]
    batch = codec.encode(xs)
    for i, x in enumerate(xs):
        alone = codec.encode(x)
        n = int(alone.lengths[0])
        assert torch.equal(batch.tokens[i, :, :n], alone.tokens[0])
        assert torch.equal(batch.globals[i], alone.globals[0])
    with pytest.raises(CodesError, match="32 global tokens"):
        codec.decode(batch.tokens)
    with pytest.raises(CodesError, match=r"globals must be \[3, 32\]"):
        codec.decode(batch.tokens, globals=batch.globals[:, :31])
    bad = batch.globals.clone()
    bad[1, 4] = 4096
    with pytest.raises(CodesError, match="4096 at item 1, global token 4 is outside 0..4095"):
        codec.decode(batch.tokens, globals=bad)
    clamped = codec.decode(batch.tokens, globals=bad, clamp=True)
    bad[1, 4] = 4095
    assert torch.equal(clamped, codec.decode(batch.tokens, globals=bad))
    batch.save(tmp_path / "b.codes")
    back = audiotok.Codes.load(tmp_path / "b.codes")
    assert torch.equal(back.globals, batch.globals) and torch.equal(back.tokens, batch.tokens)
    assert torch.equal(codec.decode(back), codec.decode(batch))
    with pytest.raises(CodesError, match="carry utterance tokens; save as .codes"):
        batch[0].save(tmp_path / "one.npy")
    with pytest.raises(AudioError, match="at least 400 samples"):
        codec.encode(np.zeros(399, np.float32))
    other = audiotok.load(spark("tiny").folder / "BiCodec")  # (the BiCodec folder loads too)
    assert torch.equal(other.encode(xs[2]).tokens, codec.encode(xs[2]).tokens)


def test_command_line_keeps_the_global_tokens(spark, tmp_path):
    """encode writes them into .codes files (and refuses .npy), decode and decode --stream
    use them: the library's audio."""
    from click.testing import CliRunner

    from audiotok.cli import main

    r = spark("tiny")
    x = noise(9000, 20)
    sf.write(tmp_path / "x.wav", x, 16000, subtype="FLOAT")
    run = CliRunner().invoke
    model = ["--model", str(r.folder)]
    got = run(main, ["encode", str(tmp_path / "x.wav"), "-o", str(tmp_path / "x.codes"), *model])
    assert got.exit_code == 0 and "+ 32 global tokens" in got.output, got.output
    codes = audiotok.Codes.load(tmp_path / "x.codes")
    want = r.codec.encode(tmp_path / "x.wav")
    assert torch.equal(codes.globals, want.globals) and torch.equal(codes.tokens, want.tokens)
    audio = r.codec.decode(want)[0, 0].numpy()
    for extra in ([], ["--stream", "--push-frames", "4"]):
        out = tmp_path / f"y{len(extra)}.wav"
        got = run(main, ["decode", str(tmp_path / "x.codes"), "-o", str(out), *extra, *model])
        assert got.exit_code == 0, got.output
        y, rate = sf.read(out, dtype="float32")
        assert rate == 16000 and y.shape == audio.shape
        assert np.abs(y - audio).max() <= 2**-15  # (16-bit PCM)
    got = run(main, ["encode", str(tmp_path / "x.wav"), "-o", str(tmp_path / "x.npy"), *model])
    assert got.exit_code != 0 and "carry utterance tokens; save as .codes" in got.output


def test_evaluation_counts_the_global_tokens(spark):
    """`audiotok eval` reconstructs through the codes' own global tokens and counts their bits
    (13 a frame, 32 x 12 an item)."""
    from audiotok.eval.systems import CodecSystem

    codec = spark("tiny").codec
    x = noise(16000, 30)
    out = CodecSystem("bicodec", "tiny", codec).run(x, 16000)
    assert out.bits == 49 * 13 + 32 * 12
    assert np.abs(out.audio - codec.decode(codec.encode(x))[0, 0].numpy()).max() == 0
