"""S3 token-to-audio streams (CosyVoice 2's chunk-aware mode) against the reference's own stream
loop, `CosyVoice2Model.tts(stream=True)` of cosyvoice-minicpmo, on random weights with voiced
F0: the chunked flow (streaming masks, the pre-lookahead's context tokens), the vocoder's mel,
source and speech caches and its cross-fades, the offline last chunk, chunk for chunk within
AUDIO_PARITY under the same seed; pushes of any size give the same audio. The exact stream
against decode(chunked=True), and its vocoder pushed in pieces against one whole run (and the
reference-mode vocoder on a short mel); bad inputs refused."""

from pathlib import Path

import numpy as np
import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError
from audiotok.models.s3.token2wav.hift import HiftNoise
from audiotok.models.s3.token2wav.vocoder_stream import (
    F0_BLOCK,
    F0_REACH,
    NOISE_FRAMES,
    REACH,
    ExactVocoder,
)
from tests.bounds import AUDIO_PARITY, SAME_MODEL
from tests.models.s3 import reference
from tests.models.s3 import t2w_reference as t2w
from tests.models.s3.test_token2wav import _voice


@pytest.fixture(scope="module")
def cosyvoice(tmp_path_factory):
    """(the reference's CosyVoice2Model over a flow and HiFT, audiotok's codec of the same
    weights in CosyVoice 2's folder layout)."""
    from tests.models.s3 import onnx_graphs

    flow, hift = t2w.cosyvoice_flow(), t2w.cosyvoice_hift()
    import cosyvoice.cli.model as cli

    folder = tmp_path_factory.mktemp("cosyvoice2")
    tokenizer = reference.reference_model("v2_25hz", small=True)
    onnx_graphs.build(tokenizer.state_dict(), "v2_25hz", folder / "speech_tokenizer_v2.onnx")
    torch.save(flow.state_dict(), folder / "flow.pt")
    torch.save(hift.state_dict(), folder / "hift.pt")
    return cli.CosyVoice2Model(None, flow, hift), audiotok.load(folder)


def _reference_stream(model, tokens: list[int], voice, seed: int) -> list[np.ndarray]:
    """The reference's chunks: its tts(stream=True) loop, the tokens all known at its start
    (its LLM thread replaced by one that hands them over)."""

    def llm_job(text, prompt_text, prompt_speech_token, embedding, uuid):
        model.tts_speech_token_dict[uuid] = list(tokens)
        model.llm_end_dict[uuid] = True

    model.llm_job = llm_job
    torch.manual_seed(seed)
    with torch.inference_mode():
        return [c["tts_speech"][0].numpy() for c in model.tts(
            flow_embedding=voice.embedding[None], flow_prompt_speech_token=voice.tokens[None],
            prompt_speech_feat=voice.mel[None], stream=True)]


@pytest.mark.parametrize("p, t", [(25, 80), (6, 100)])
def test_the_stream_equals_the_reference_loop(cosyvoice, p, t):
    """A prompt on a chunk boundary (hops 25, 25, ...) and one that is not (the first hop padded
    to 44): chunk for chunk the reference's audio; any pushes give the same."""
    ref, codec = cosyvoice
    voice = _voice(p)
    tokens = torch.randint(0, 6561, (t,), generator=torch.Generator().manual_seed(t))
    want = _reference_stream(ref, tokens.tolist(), voice, seed=4)
    hops = [25 + (-p) % 25] + [25] * 10
    chunks = []
    with codec.stream_decoder(voice=voice, seed=4) as dec:
        at = 0
        for step in range(t):  # one token at a time
            got = dec.push(tokens[None, None, step: step + 1])
            if got.shape[-1]:
                chunks.append(got[0, 0].numpy())
                # a chunk is out as soon as its tokens and the 3 after them are in
                assert step + 1 == sum(hops[: len(chunks)]) + 3
            at = step + 1
        chunks.append(dec.flush()[0, 0].numpy())
    assert at == t and len(chunks) == len(want) >= 3
    for i, (a, b) in enumerate(zip(chunks, want, strict=True)):
        assert a.shape == b.shape, i
        assert np.abs(a - b).max() <= AUDIO_PARITY, i
    streamed = np.concatenate(chunks)
    assert streamed.shape == (960 * t,) and np.abs(streamed).max() > 0.01
    rng = np.random.default_rng(1)  # pushes of 1..40 tokens: the same audio
    pieces, at = [], 0
    with codec.stream_decoder(voice=voice, seed=4) as dec:
        while at < t:
            n = int(rng.integers(1, 41))
            pieces.append(dec.push(tokens[None, None, at: at + n])[0, 0].numpy())
            at += n
        pieces.append(dec.flush()[0, 0].numpy())
    assert np.abs(np.concatenate(pieces) - streamed).max() <= SAME_MODEL


@pytest.mark.parametrize("p, t", [(25, 80), (6, 120)])
def test_the_exact_stream_equals_the_chunked_decode(cosyvoice, p, t):
    """Tokens pushed one at a time: decode(chunked=True)'s audio; the first audio once the
    first chunk's tokens and the 3 after them are in, less the frames the vocoder's reach holds
    back (to the F0 block before its reach, then REACH + 1)."""
    _, codec = cosyvoice
    voice = _voice(p)
    tokens = torch.randint(0, 6561, (1, 1, t), generator=torch.Generator().manual_seed(t))
    want = codec.decode(tokens, voice=voice, seed=4, chunked=True)[0, 0].numpy()
    hop = 25 + (-p) % 25
    pieces, first = [], None
    with codec.stream_decoder(voice=voice, seed=4, exact=True) as dec:
        for step in range(t):
            got = dec.push(tokens[..., step: step + 1])[0, 0].numpy()
            if got.size and first is None:
                first = (step + 1, got.size)
            pieces.append(got)
        pieces.append(dec.flush()[0, 0].numpy())
    frames = (2 * hop - F0_REACH) // F0_BLOCK * F0_BLOCK - 1 - REACH
    assert first == (hop + 3, 480 * frames)
    got = np.concatenate(pieces)
    assert got.shape == want.shape == (960 * t,)
    assert np.abs(got - want).max() <= AUDIO_PARITY and np.abs(want).max() > 0.01
    offline = codec.decode(tokens, voice=voice, seed=4)[0, 0].numpy()
    assert np.abs(offline - want).max() > 1e-3  # (the chunk masks change the flow's mel)


def test_a_bfloat16_stream(cosyvoice):
    """In bfloat16 (the flow; the vocoder in float32) the exact stream gives the chunked
    decode's audio, of the same length as float32's and near it (the bound catches a broken
    reduced path, not parity)."""
    _, codec = cosyvoice
    half = audiotok.load(Path(codec.source).parent, dtype="bfloat16")
    voice = _voice(7)
    tokens = torch.randint(0, 6561, (1, 1, 40), generator=torch.Generator().manual_seed(9))
    want = half.decode(tokens, voice=voice, seed=4, chunked=True)[0, 0]
    with half.stream_decoder(voice=voice, seed=4, exact=True) as dec:
        got = torch.cat([dec.push(tokens[..., a: a + 6]) for a in range(0, 40, 6)]
                        + [dec.flush()], -1)[0, 0]
    full = codec.decode(tokens, voice=voice, seed=4, chunked=True)[0, 0]
    assert got.shape == want.shape == full.shape == (960 * 40,)
    assert (got - want).abs().max() <= AUDIO_PARITY
    assert 10 * torch.log10(full.pow(2).sum() / (want - full).pow(2).sum()) > 30


def test_the_vocoder_stream_equals_one_whole_run(cosyvoice):
    """A mel pushed in pieces of 1..59 frames: the audio of one run over the whole mel (15 s,
    F0 voiced); on a short mel also the reference-mode vocoder given the same noise (the two
    differ by how each interpolates the phase to the audio rate: torch computes the weights
    from a sample's index in float32)."""
    _, codec = cosyvoice
    hift = codec.decoder.hift
    rng = np.random.default_rng(0)
    for m in (750, 60):
        mel = torch.randn(1, 80, m, generator=torch.Generator().manual_seed(m))
        with torch.inference_mode():
            whole = ExactVocoder(hift, [torch.Generator().manual_seed(3)]).push(mel, True)
            vocoder, out, at = ExactVocoder(hift, [torch.Generator().manual_seed(3)]), [], 0
            while at < m:
                n = int(rng.integers(1, 60))
                out.append(vocoder.push(mel[..., at: at + n], at + n >= m))
                at += n
        got = torch.cat(out, -1)
        assert got.shape == whole.shape == (1, 1, 480 * m)
        torch.testing.assert_close(got, whole, rtol=0, atol=SAME_MODEL)
        assert vocoder.mel.shape[-1] <= 2 * REACH + 60  # (what no window reads is dropped)
    g = torch.Generator().manual_seed(3)
    blocks = [HiftNoise.draw(hift.config, 1, NOISE_FRAMES, g) for _ in range(2)]
    noise = torch.cat([b.noise for b in blocks], 1)[:, : 480 * 60]
    with torch.inference_mode():
        ref = hift(mel, HiftNoise(blocks[0].phase, noise))
    torch.testing.assert_close(whole, ref, rtol=0, atol=AUDIO_PARITY)
    assert whole.abs().max() > 0.05


def test_stream_inputs_are_refused_clearly(cosyvoice, s2_codec, monkeypatch):
    _, codec = cosyvoice
    with pytest.raises(AudiotokError, match="needs a voice"):
        with codec.stream_decoder():
            pass
    with pytest.raises(AudiotokError, match="steps"), codec.stream_decoder(voice=_voice(3),
                                                                           steps=0):
        pass
    with pytest.raises(AudiotokError, match="exact must be"), \
            codec.stream_decoder(voice=_voice(3), exact="yes"):
        pass
    from audiotok.errors import CodesError

    with codec.stream_decoder(voice=_voice(3)) as dec:
        with pytest.raises(CodesError):
            dec.push(torch.full((1, 1, 2), 6561))
        assert dec.push(torch.zeros(1, 1, 4, dtype=torch.long)).shape == (1, 1, 0)
        assert dec.flush().shape == (1, 1, 960 * 4)  # (the refused push left nothing behind)
    with pytest.raises(AudiotokError, match="takes no voice"):
        s2_codec.stream_decoder(voice=_voice(3))
    from dataclasses import replace

    # Chatterbox's S3Gen draws its flow noise per call: no chunk stream holds it fixed
    monkeypatch.setattr(codec.decoder, "config", replace(codec.decoder.config, noise="drawn"))
    with pytest.raises(AudiotokError, match="draw their flow noise"), \
            codec.stream_decoder(voice=_voice(3)):
        pass
    with pytest.raises(AudiotokError, match="draw their flow noise"):
        codec.decode(torch.zeros(1, 1, 4, dtype=torch.long), voice=_voice(3), chunked=True)
    monkeypatch.setattr(codec.decoder, "config", replace(codec.decoder.config, noise="fixed"))
    monkeypatch.setattr(codec.decoder.hift, "config", replace(codec.decoder.hift.config,
                                                              sine="sinegen"))
    with pytest.raises(AudiotokError, match="SineGen2"), \
            codec.stream_decoder(voice=_voice(3), exact=True):
        pass


def test_the_flow_runs_items_of_any_length_and_voice_as_rows_of_one_call(cosyvoice):
    """Flow.rows: items of other lengths, prompts and voices, with a stream's context tokens or
    without, in the streaming mode or not, as one padded call: each item's mel is its mel
    alone."""
    from audiotok.models.s3.token2wav.flow import FlowRow

    _, codec = cosyvoice
    model = codec.decoder
    g = torch.Generator().manual_seed(5)
    voices = [_voice(p, seed=p) for p in (6, 25, 13)]
    items = [(voices[0], 40), (voices[1], 9), (voices[2], 27), (voices[0], 1)]
    for streaming, context in ((True, True), (True, False), (False, False)):
        rows = []
        for voice, t in items:
            frames = 2 * (voice.tokens.numel() + t)
            rows.append(FlowRow(torch.randint(0, 6561, (t,), generator=g), voice.tokens,
                                voice.mel, voice.embedding, model.noise(frames, None)[0],
                                torch.randint(0, 6561, (3,), generator=g) if context else None))
        with torch.inference_mode():
            together = model.flow.rows(rows, 3, streaming)
            for row, mel in zip(rows, together, strict=True):
                alone = model.flow.rows([row], 3, streaming)[0]
                assert mel.shape == alone.shape == (80, 2 * row.tokens.numel())
                torch.testing.assert_close(mel, alone, rtol=0, atol=SAME_MODEL)
        assert together[0].abs().max() > 0.1


@pytest.mark.parametrize("exact", [False, True])
def test_engine_streams_share_their_flow_calls(cosyvoice, monkeypatch, exact):
    """Three decode streams in other voices, opened at other steps and pushing other sizes, in
    one engine: the flows of the chunks that come due in the same step run as one call, and
    each stream's audio is its library stream's alone."""
    from audiotok.models.s3.token2wav.flow import Flow
    from audiotok.server import Engine, EngineSettings

    _, codec = cosyvoice
    g = torch.Generator().manual_seed(6)
    # voice, tokens, push size, opening step: the first chunks (after prompts of 6, 25 and 13
    # tokens: 44, 25 and 37 tokens and 3 more) all come due at step 1
    plans = [(_voice(6, seed=1), 70, 24, 0), (_voice(25, seed=2), 60, 14, 0),
             (_voice(13, seed=3), 55, 40, 1)]
    tokens = [torch.randint(0, 6561, (1, 1, t), generator=g) for _, t, _, _ in plans]
    want = []
    for (voice, t, size, _), x in zip(plans, tokens, strict=True):
        with codec.stream_decoder(voice=voice, seed=0, exact=exact) as dec:
            want.append(torch.cat([dec.push(x[..., a: a + size]) for a in range(0, t, size)]
                                  + [dec.flush()], -1)[0, 0])
    calls, rows = [], Flow.rows

    def counted(self, items, *args):
        calls.append(len(items))
        return rows(self, items, *args)

    monkeypatch.setattr(Flow, "rows", counted)
    made = iter(voice for voice, *_ in plans)
    monkeypatch.setattr(codec, "make_voice", lambda audio, rate: next(made))
    engine = Engine({"s3": codec}, EngineSettings(max_streams=3), start=False)
    ids = [engine.voices.add("s3", codec, np.zeros(16000, np.float32), 16000).id for _ in plans]
    streams, sent, got = [None] * 3, [0] * 3, [[] for _ in plans]
    for step in range(60):
        for i, (_, t, size, opens) in enumerate(plans):
            if step == opens:
                streams[i] = engine.open_decode_stream("s3", voice=ids[i], exact=exact)
            if streams[i] is not None and sent[i] < t:
                streams[i].push(tokens[i][0, :, sent[i]: sent[i] + size])
                sent[i] += size
                if sent[i] >= t:
                    streams[i].finish()
        engine.step()
        for i, s in enumerate(streams):
            if s is not None:
                got[i] += s.available()
        if all(s is not None and s.state == "done" for s in streams):
            break
    for i, w in enumerate(want):
        audio = torch.from_numpy(np.concatenate(got[i]))
        assert audio.shape == w.shape == (960 * plans[i][1],)
        torch.testing.assert_close(audio, w, rtol=0, atol=SAME_MODEL)
    assert max(calls) == 3  # (the guided pair doubles each call's rows inside the flow)
    assert len(calls) < sum(1 + t // 25 for _, t, _, _ in plans)
    assert engine.rows_in_use() == 0


def test_the_onnx_export_decodes_in_a_voice_without_torch(cosyvoice, tmp_path):
    """`audiotok export` of CosyVoice 2's folder: the tokenizer's graphs and the flow encoder,
    estimator and vocoder (real-valued, dynamic); the torch-free runtime decodes a ragged batch
    in a .voice file as the torch model does given the same noise (the runtime draws the
    excitation's noise from numpy's generator: `draws`), F0 voiced, trimmed alike; no voice,
    a file that is not one and zero steps are refused clearly."""
    import json

    import onnx

    from audiotok.models.s3.token2wav.runtime import draws
    from tests.helpers import export_onnx_cli, run_torch_free, torch_free_script

    _, codec = cosyvoice
    out = tmp_path / "onnx"
    export_onnx_cli(Path(codec.source).parent, out)
    manifest = json.loads((out / "audiotok_onnx.json").read_text())
    assert set(manifest["graphs"]) == {"features", "encoder", "flow_encoder", "estimator",
                                       "vocoder"}
    for graph in ("flow_encoder", "estimator", "vocoder"):
        ops = {node.op_type for node in onnx.load(str(out / f"{graph}.onnx")).graph.node}
        assert not ops & {"DFT", "STFT", "Col2Im"}, (graph, ops)
    voice = _voice(7)
    voice.save(tmp_path / "v.voice")
    g = torch.Generator().manual_seed(12)
    tokens, lengths = torch.randint(0, 6561, (2, 1, 30), generator=g), [30, 19]
    np.savez(tmp_path / "in.npz", tokens=tokens.numpy(), lengths=np.array(lengths))
    script = torch_free_script(f"""
        from audiotok.codes import Codes
        codes = Codes(d["tokens"], d["lengths"], "s3", 24000, 960)
        r["audio"] = codec.decode(codes, voice={str(tmp_path / "v.voice")!r}, seed=[3, 4],
                                  steps=3)
        from audiotok.errors import AudiotokError
        for i, kw in enumerate([{{}}, {{"voice": folder + "/flow_noise.npy"}},
                                {{"voice": {str(tmp_path / "v.voice")!r}, "steps": 0}}]):
            try:
                codec.decode(codes, **kw)
            except AudiotokError as e:
                r[f"refused_{{i}}"] = np.array(str(e))
    """)
    r = run_torch_free(script, out, tmp_path / "in.npz", tmp_path, "CosyVoice")
    assert "needs a voice" in str(r["refused_0"])
    assert "voice file" in str(r["refused_1"]) and "positive integer" in str(r["refused_2"])
    got = r["audio"]
    model, settings = codec.decoder, manifest["token2wav"]
    assert got.shape == (2, 1, 960 * 30)
    with torch.inference_mode():
        for i, (n, seed) in enumerate(zip(lengths, (3, 4), strict=True)):
            frames = 2 * (7 + n)
            mel = model.flow(tokens[i: i + 1, 0, :n], voice.tokens[None], voice.mel[None],
                             voice.embedding[None], model.noise(frames, None), 3)
            noise = torch.from_numpy(draws(settings, mel.shape[-1], seed))
            want = model.hift(mel, HiftNoise(torch.zeros(1, 9), noise))[0, 0].numpy()
            assert np.abs(got[i, 0, : 960 * n] - want).max() <= AUDIO_PARITY
            assert not got[i, 0, 960 * n:].any() and np.abs(want).max() > 0.01
