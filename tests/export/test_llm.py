"""Codes <-> language-model token ids, with tokenizers built here (the `tokenizers` package)
carrying the speech tokens in the same order as the real fish-speech S2 and Llasa tokenizers."""

import numpy as np
import pytest
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

from audiotok.export.llm import GenericIds, TokenIdError, Vocab, scheme_for
from audiotok.models.s2.llm import FishS2Ids
from audiotok.models.xcodec2.llm import LlasaIds

FISH_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|im_start|>",
                 "<|im_end|>", "<|phoneme_start|>", "<|phoneme_end|>", "<|tool_call_start|>",
                 "<|tool_call_end|>", "<|text|>", "<|voice|>", "<|interleave|>",
                 "<|audio_start|>", "<|audio_end|>", "<|audio|>"]
LLASA_SPECIALS = ["<|TEXT_GENERATION_START|>", "<|TEXT_GENERATION_END|>",
                  "<|TEXT_UNDERSTANDING_START|>", "<|TEXT_UNDERSTANDING_END|>",
                  "<|SPEECH_GENERATION_START|>", "<|SPEECH_GENERATION_END|>",
                  "<|SPEECH_UNDERSTANDING_START|>", "<|SPEECH_UNDERSTANDING_END|>"]
WORDS = ["[UNK]", "hello", "world", "the", "speech", "model"]


def tokenizer(path, specials, speech):
    """A word-level tokenizer with a small text vocabulary, then `specials`, then `speech`
    added as special tokens in that order (so their ids are consecutive, as in the real ones)."""
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in specials + speech])
    tok.save(str(path))
    return tok


@pytest.fixture(scope="module")
def fish_tok(tmp_path_factory):
    path = tmp_path_factory.mktemp("fish") / "tokenizer.json"
    return path, tokenizer(path, FISH_SPECIALS, [f"<|semantic:{i}|>" for i in range(4096)])


@pytest.fixture(scope="module")
def llasa_tok(tmp_path_factory):
    path = tmp_path_factory.mktemp("llasa") / "tokenizer.json"
    return path, tokenizer(path, LLASA_SPECIALS, [f"<|s_{i}|>" for i in range(65536)])


def random_tokens(sizes, frames, seed=0):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, s, frames) for s in sizes])


def test_fish_s2(fish_tok):
    path, tok = fish_tok
    scheme = FishS2Ids.from_tokenizer(path.parent)  # the folder holding tokenizer.json
    assert scheme.begin == tok.token_to_id("<|semantic:0|>") == len(WORDS) + len(FISH_SPECIALS)
    tokens = random_tokens(scheme.sizes, 37)
    tokens[0, :3] = [0, 4095, 7]
    matrix = scheme.to_ids(tokens)
    assert matrix.shape == (11, 37)
    assert np.array_equal(matrix[0], tokens[0] + scheme.begin)
    assert np.array_equal(matrix[1:], tokens)  # the semantic codebook again, then residuals
    assert np.array_equal(scheme.from_ids(matrix), tokens)
    # the text form is what the tokenizer itself turns into those ids
    text = scheme.to_text(tokens)
    assert text.startswith("<|semantic:0|><|semantic:4095|><|semantic:7|>")
    assert tok.encode(text).ids == matrix[0].tolist()
    assert np.array_equal(scheme.from_text(text), tokens[:1])
    assert np.array_equal(scheme.from_ids(matrix[0]), tokens[:1])
    with pytest.raises(TokenIdError, match=f"id {scheme.begin - 1} at position 2 is not a "
                                           "<\\|semantic:i\\|> token"):
        scheme.from_ids(np.array([scheme.begin, scheme.begin + 1, scheme.begin - 1]))
    bad = matrix.copy()
    bad[1, 5] = (bad[1, 5] + 1) % 4096
    with pytest.raises(TokenIdError, match="row 0 and row 1 disagree at frame 5"):
        scheme.from_ids(bad)
    with pytest.raises(TokenIdError, match="'<\\|s_3\\|>' is not a <\\|semantic:i\\|> token"):
        scheme.from_text("<|semantic:1|><|s_3|>")
    with pytest.raises(TokenIdError, match="token 1024 at codebook 3, frame 0 is outside"):
        scheme.to_ids(np.where(np.arange(10)[:, None] == 3, 1024, tokens))


def test_llasa(llasa_tok):
    path, tok = llasa_tok
    scheme = LlasaIds.from_tokenizer(path)
    assert scheme.begin == tok.token_to_id("<|s_0|>") == len(WORDS) + 8
    tokens = random_tokens([65536], 120, seed=1)
    ids = scheme.to_ids(tokens)
    assert ids[0] == tok.token_to_id("<|SPEECH_GENERATION_START|>")
    assert ids[-1] == tok.token_to_id("<|SPEECH_GENERATION_END|>")
    text = scheme.to_text(tokens)
    assert tok.encode(text).ids == ids.tolist()
    assert np.array_equal(scheme.from_ids(ids), tokens)
    assert np.array_equal(scheme.from_ids(ids[:-1]), tokens)  # generation cut before its end
    assert np.array_equal(scheme.from_text(text), tokens)
    assert np.array_equal(scheme.from_text(scheme.to_text(tokens, markers=False)), tokens)
    with pytest.raises(TokenIdError, match="id 3 at position 1 is not an <\\|s_i\\|> token"):
        scheme.from_ids(np.array([scheme.start, ids[1], 3, scheme.stop]))
    with pytest.raises(TokenIdError, match="unexpected text 'hello'"):
        scheme.from_text("<|s_1|> hello <|s_2|>")


def test_tokenizers_without_the_tokens(tmp_path, fish_tok):
    path = tmp_path / "plain.json"
    tokenizer(path, FISH_SPECIALS, [])
    with pytest.raises(TokenIdError, match="has no '<\\|semantic:0\\|>' token"):
        FishS2Ids.from_tokenizer(path)
    shuffled = [f"<|s_{i}|>" for i in range(16)]
    shuffled[3], shuffled[9] = shuffled[9], shuffled[3]
    path = tmp_path / "shuffled.json"
    tokenizer(path, LLASA_SPECIALS, shuffled)
    with pytest.raises(TokenIdError, match="'<\\|s_3\\|>' has id .* must be consecutive"):
        LlasaIds.from_tokenizer(path, codebook_size=16)
    (tmp_path / "special_tokens.json").write_text('{"<|semantic:0|>": 100, "<|semantic:1|>": 101}')
    assert FishS2Ids.from_tokenizer(tmp_path / "special_tokens.json", (2,)).begin == 100
    with pytest.raises(TokenIdError, match="no such tokenizer file"):
        Vocab(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenIdError, match="no tokenizer.json or special_tokens.json"):
        Vocab(tmp_path / "empty")
    with pytest.raises(TokenIdError, match="unknown scheme 'gpt'"):
        scheme_for("gpt", (4,))
    with pytest.raises(TokenIdError, match="one codebook"):
        scheme_for("llasa", (4, 4), fish_tok[0])


@pytest.mark.parametrize("order", ["frame", "codebook"])
@pytest.mark.parametrize("delay", [False, True])
def test_generic_round_trips(order, delay):
    sizes = (8, 4, 4, 16)
    scheme = GenericIds(sizes, offset=1000, order=order, delay=delay)
    for frames, seed in ((1, 0), (2, 1), (13, 2)):
        tokens = random_tokens(sizes, frames, seed)
        ids = scheme.to_ids(tokens)
        assert ids.size == len(sizes) * (frames + (len(sizes) - 1 if delay else 0))
        assert np.array_equal(scheme.from_ids(ids), tokens)
        assert np.array_equal(scheme.from_text(scheme.to_text(tokens)), tokens)
        real = ids[ids != scheme.pad]
        assert real.min() >= 1000 and real.max() < 1000 + sum(sizes)


def test_generic_layouts():
    tokens = np.array([[1, 2, 3], [0, 1, 2]])  # 2 codebooks of 4, 3 frames
    assert GenericIds((4, 4)).to_ids(tokens).tolist() == [1, 4, 2, 5, 3, 6]
    assert GenericIds((4, 4), order="codebook").to_ids(tokens).tolist() == [1, 2, 3, 4, 5, 6]
    # MusicGen's delay: codebook 1 one frame later, the gaps filled with pad_id
    delayed = GenericIds((4, 4), order="codebook", delay=True, pad_id=99)
    assert delayed.to_ids(tokens).tolist() == [1, 2, 3, 99, 99, 4, 5, 6]
    assert GenericIds((4, 4), delay=True, pad_id=99).to_ids(tokens).tolist() == \
        [1, 99, 2, 4, 3, 5, 99, 6]
    with pytest.raises(TokenIdError, match="gap holds an id other than pad_id 99"):
        delayed.from_ids(np.array([1, 2, 3, 7, 99, 4, 5, 6]))
    with pytest.raises(TokenIdError, match="id 5 at codebook 0, frame 1 is outside that "
                                           "codebook's ids 0..3"):
        GenericIds((4, 4), order="codebook").from_ids(np.array([1, 5, 3, 4, 5, 6]))
    with pytest.raises(TokenIdError, match="multiple of 2 codebooks"):
        GenericIds((4, 4)).from_ids(np.arange(5))
    with pytest.raises(TokenIdError, match="pad_id 3 falls inside"):
        GenericIds((4, 4), pad_id=3)


def test_tokenize_llm_column(tmp_path, fish_tok, llasa_tok):
    """`tokenize --llm`: each row's llm_ids are the scheme's ids of its tokens; another scheme on
    a rerun is refused."""
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from audiotok.cli import main
    from tests.pipeline.conftest import S2_MODEL, XC_MODEL, make_corpus

    corpus = make_corpus(tmp_path / "corpus", {"a.wav": (1.3, 44100, 1), "b.wav": (0.7, 16000, 1)},
                         bad=False)

    def run(model, out, *llm):  # in this process: the command as a user runs it
        r = CliRunner().invoke(main, ["tokenize", str(corpus), "-m", model, "-o", str(out),
                                      "--workers", "0", "-q", *llm])
        r.returncode = r.exit_code
        return r

    def rows(out):
        return [r for f in sorted(out.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]

    cases = [(S2_MODEL, ("--llm", "fish-s2", "--tokenizer", str(fish_tok[0])),
              FishS2Ids.from_tokenizer(fish_tok[0], (256,) + (64,) * 9)),
             (XC_MODEL, ("--llm", "llasa", "--tokenizer", str(llasa_tok[0])),
              LlasaIds.from_tokenizer(llasa_tok[0])),
             (S2_MODEL, ("--llm", "generic", "--llm-offset", "500", "--llm-delay"),
              GenericIds((256,) + (64,) * 9, offset=500, delay=True))]
    for i, (model, args, scheme) in enumerate(cases):
        out = tmp_path / f"out{i}"
        p = run(model, out, *args)
        assert p.returncode == 0, p.stderr
        got = rows(out)
        assert len(got) == 2
        for r in got:
            tokens = np.asarray(r["tokens"]).reshape(r["num_codebooks"], -1)
            assert r["llm_ids"] == scheme.sequence(tokens).tolist()
    p = run(S2_MODEL, tmp_path / "out0", "--llm", "generic")
    assert p.returncode == 101 and "llm: {" in p.stderr and "other settings" in p.stderr
    p = run(S2_MODEL, tmp_path / "x", "--llm", "llasa", "--tokenizer", str(llasa_tok[0]))
    assert p.returncode == 101 and "one codebook" in p.stderr
    p = run(S2_MODEL, tmp_path / "x", "--llm", "fish-s2")
    assert p.returncode == 101
    assert "<|semantic:i|> ids of the semantic codebook) reads its ids from the language " \
        "model's tokenizer" in p.stderr


def test_neutts(tmp_path):
    """NeuTTS (neutts 1.4.1): `<|speech_i|>` tokens between the speech generation markers."""
    from audiotok.models.neucodec.llm import NeuTTSIds

    path = tmp_path / "tokenizer.json"
    tok = tokenizer(path, LLASA_SPECIALS, [f"<|speech_{i}|>" for i in range(65536)])
    scheme = scheme_for("neutts", (65536,), path)
    assert isinstance(scheme, NeuTTSIds)
    assert scheme.begin == tok.token_to_id("<|speech_0|>") == len(WORDS) + 8
    tokens = np.array([[0, 65535, 1234, 7]])
    ids = scheme.to_ids(tokens)
    begin = scheme.begin
    assert ids.tolist() == [tok.token_to_id("<|SPEECH_GENERATION_START|>"), begin,
                            begin + 65535, begin + 1234, begin + 7,
                            tok.token_to_id("<|SPEECH_GENERATION_END|>")]
    text = scheme.to_text(tokens)
    assert text == ("<|SPEECH_GENERATION_START|><|speech_0|><|speech_65535|><|speech_1234|>"
                    "<|speech_7|><|SPEECH_GENERATION_END|>")
    assert tok.encode(text).ids == ids.tolist()
    assert np.array_equal(scheme.from_ids(ids), tokens)
    assert np.array_equal(scheme.from_ids(ids[:-1]), tokens)  # generation cut before its end
    assert np.array_equal(scheme.from_text(text), tokens)
    assert scheme.describe()["speech_begin_id"] == begin
    with pytest.raises(TokenIdError, match="id 3 at position 1 is not a <\\|speech_i\\|> token"):
        scheme.from_ids(np.array([scheme.start, ids[1], 3, scheme.stop]))
    with pytest.raises(TokenIdError, match="'<\\|s_3\\|>' is not a <\\|speech_i\\|> token"):
        scheme.from_text("<|speech_1|><|s_3|>")
    with pytest.raises(TokenIdError, match="for one codebook"):
        scheme_for("neutts", (4, 4), path)
