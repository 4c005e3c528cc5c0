"""S3 token-to-audio against its references on random weights: the flow's mel against
Chatterbox's and CosyVoice 2's flows, HiFT's audio against both vocoders (SineGen and SineGen2,
voiced, unvoiced and switching), under the same noise (each reference seeded, audiotok given
the seed); CAMPPlus, its Kaldi filterbank and the prompt mel bit for bit; the whole decode
through each one's checkpoint layout (Chatterbox's s3gen.safetensors, CosyVoice 2's folder,
whose campplus.onnx makes the front end's speaker embeddings); voices, batches and bad
inputs."""

import sys

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import audiotok
from audiotok.errors import AudiotokError, CheckpointError
from audiotok.models.s3.token2wav.campplus import CAMPPlus, kaldi_fbank
from audiotok.models.s3.token2wav.config import CHATTERBOX, COSYVOICE2, small
from audiotok.models.s3.token2wav.flow import Flow
from audiotok.models.s3.token2wav.hift import HiFT, HiftNoise
from audiotok.models.s3.token2wav.voice import Voice, prompt_mel
from audiotok.models.s3.token2wav.weights import hift_state_dict
from tests.bounds import AUDIO_PARITY, SAME_MODEL
from tests.models.s3 import reference
from tests.models.s3 import t2w_reference as t2w

MEL_PARITY = 1e-4  # the bound on the flow's mel (values up to about 5)


def _voice(p: int, frames: int | None = None, seed: int = 3) -> Voice:
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 6561, (p,), generator=g)
    tokens[:2] = torch.tensor([0, 6560])[:p]  # the first and last ids
    return Voice(tokens, torch.randn(2 * p if frames is None else frames, 80, generator=g),
                 torch.randn(192, generator=g))


def _ref_dict(voice: Voice, with_len: bool) -> dict:
    p, f = voice.tokens.numel(), voice.mel.shape[0]
    return dict(prompt_token=voice.tokens[None], prompt_token_len=torch.tensor([p]),
                prompt_feat=voice.mel[None], prompt_feat_len=torch.tensor([f]) if with_len
                else None, embedding=voice.embedding[None])


@pytest.fixture(scope="module")
def flows():
    """(Chatterbox's flow, CosyVoice 2's flow, audiotok's flow with each one's weights)."""
    cb, cv = t2w.chatterbox_flow(), t2w.cosyvoice_flow()
    ours = {}
    for name, ref in (("chatterbox", cb), ("cosyvoice", cv)):
        ours[name] = Flow(small().flow).eval()
        ours[name].load_state_dict(ref.state_dict(), strict=True)
    return cb, cv, ours


@pytest.mark.parametrize("p, t, frames", [(0, 1, 0), (0, 4, 0), (7, 2, 14), (7, 13, 14),
                                          (6, 11, 11), (5, 11, 11)])
def test_the_flow_equals_both_references(flows, p, t, frames):
    """Prompt or none, 1..13 tokens (the lookahead's padding), a prompt mel a frame short of
    two a token, and one a frame longer (Chatterbox's odd prompt: its tokens cut, its mel
    kept; the output a frame shorter)."""
    cb, cv, ours = flows
    voice = _voice(p, frames) if p else Voice(torch.zeros(0, dtype=torch.long),
                                               torch.zeros(0, 80), torch.randn(192))
    tokens = torch.randint(0, 6561, (1, t), generator=torch.Generator().manual_seed(t))
    torch.manual_seed(5)
    with torch.inference_mode():
        want_cb, _ = cb.inference(token=tokens, token_len=torch.tensor([t]), finalize=True,
                                  n_timesteps=10, **_ref_dict(voice, False))
        noise = torch.randn(1, 80, 2 * (p + t), generator=torch.Generator().manual_seed(5))
        got_cb = ours["chatterbox"](tokens, voice.tokens[None], voice.mel[None],
                                    voice.embedding[None], noise)
        want_cv, _ = cv.inference(token=tokens, token_len=torch.tensor([t]), streaming=False,
                                  finalize=True, **_ref_dict(voice, True))
        fixed = torch.randn(1, 80, 15000, generator=torch.Generator().manual_seed(0))
        got_cv = ours["cosyvoice"](tokens, voice.tokens[None], voice.mel[None],
                                   voice.embedding[None], fixed)
    assert got_cb.shape == want_cb.shape == (1, 80, 2 * (p + t) - frames)
    torch.testing.assert_close(got_cb, want_cb, rtol=0, atol=MEL_PARITY)
    assert got_cv.shape == want_cv.shape
    torch.testing.assert_close(got_cv, want_cv, rtol=0, atol=MEL_PARITY)
    assert want_cb.abs().max() > 1  # (a mel, not a trivial output)


def _our_hift(ref, sine: str) -> HiFT:
    cfg = small(CHATTERBOX if sine == "sinegen" else COSYVOICE2).hift
    ours = HiFT(cfg).eval()
    ours.load_state_dict(hift_state_dict(ref.state_dict()), strict=True)
    return ours


@pytest.mark.parametrize("sine", ["sinegen", "sinegen2"])
@pytest.mark.parametrize("f0_bias, loud", [(150.0, False), (None, False), (9.955, False),
                                           (150.0, True)])
def test_hift_equals_both_references(sine, f0_bias, loud):
    """Voiced (F0 ~ 150 Hz), unvoiced (random weights' F0 ~ 0), frames either side of 10 Hz
    (F0 of 9.95-10.07 Hz), and loud (log-magnitudes raised by 6: the clip at 100 and the
    output clamp at 0.99)."""
    maker = t2w.chatterbox_hift if sine == "sinegen" else t2w.cosyvoice_hift
    ref = maker(f0_bias=f0_bias)
    if loud:
        with torch.no_grad():
            ref.conv_post.bias[:9] += 6.0
    ours = _our_hift(ref, sine)
    mel = torch.randn(2, 80, 23, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(9)
    with torch.inference_mode():
        want, source = ref.inference(speech_feat=mel)
        noise = HiftNoise.draw(ours.config, 2, 23, torch.Generator().manual_seed(9))
        got = ours(mel, noise)
        f0 = ours.f0_predictor(mel)
    assert got.shape == (2, 1, 480 * 23)
    torch.testing.assert_close(got[:, 0], want, rtol=0, atol=AUDIO_PARITY)
    voiced = (f0 > 10).float().mean()
    if f0_bias == 9.955:
        assert 0.05 < voiced < 0.95  # both kinds of frame
    if loud:
        assert want.abs().max() >= 0.99  # clamped


def test_campplus_filterbank_and_prompt_mel_bit_for_bit():
    t2w.load_references()
    from chatterbox.models.s3gen import xvector  # (its Kaldi: torchaudio's own)
    from chatterbox.models.s3gen.utils.mel import mel_spectrogram

    ref = t2w.campplus()
    ours = CAMPPlus().eval()
    ours.load_state_dict({k: v for k, v in ref.state_dict().items()
                          if not k.endswith("num_batches_tracked")}, strict=True)
    wave = reference.speech_like(16000 * 3 + 123, seed=4)[None]
    with torch.inference_mode():
        assert torch.equal(kaldi_fbank(wave[0]), xvector.Kaldi.fbank(wave, num_mel_bins=80))
        assert torch.equal(ours.embed(wave[0]), ref.inference(wave)[0])
    speech24 = reference.speech_like(24000 * 2 + 77, seed=5)
    assert torch.equal(prompt_mel(speech24), mel_spectrogram(speech24[None])[0].T)


@pytest.fixture(scope="module")
def chatterbox_file(tmp_path_factory):
    """A Chatterbox s3gen.safetensors (small tokenizer, flow, HiFT, CAMPPlus) and the reference
    S3Token2Wav built from the same modules."""
    ref = t2w.chatterbox_s3gen()
    tokenizer = reference.reference_model("v2_25hz", small=True)
    sd = {f"tokenizer.{k}": v for k, v in tokenizer.state_dict().items()}
    sd.update({k: v for k, v in ref.state_dict().items() if not k.startswith("tokenizer.")})
    path = tmp_path_factory.mktemp("chatterbox") / "s3gen.safetensors"
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    return path, ref


def test_chatterbox_decode_equals_its_s3gen(chatterbox_file, tmp_path):
    path, ref = chatterbox_file
    codec = audiotok.load(path)
    assert codec.sample_rate == 24000 and codec.input_rate == 16000
    assert codec.info()["token2wav"] == {"noise": "drawn", "excitation": "sinegen", "steps": 10,
                                         "makes_voices": True}
    voice = codec.make_voice(reference.speech_like(16000 * 2 + 100, seed=1), 16000)
    assert voice.mel.shape[0] == 2 * voice.tokens.numel() == 100
    codes = codec.encode(reference.speech_like(16000, seed=2)[None], 16000)
    got = codec.decode(codes, voice=voice, seed=7)
    torch.manual_seed(7)
    with torch.inference_mode():
        want, _ = ref.inference(codes.tokens[:, 0], ref_dict=_ref_dict(voice, False))
    assert got.shape == (1, 1, 960 * 25) == (1, 1, want.shape[-1])
    torch.testing.assert_close(got[:, 0], want, rtol=0, atol=AUDIO_PARITY)
    assert got[0, 0, :480].abs().max() == 0 and want.abs().max() > 0.01  # the fade-in
    # the voice through a file, the codec through its own folder: the same audio
    voice.save(tmp_path / "v.voice")
    torch.testing.assert_close(codec.decode(codes, voice=tmp_path / "v.voice", seed=7), got,
                               rtol=0, atol=0)
    codec.save_pretrained(tmp_path / "saved")
    again = audiotok.load(tmp_path / "saved").decode(codes, voice=voice, seed=7)
    torch.testing.assert_close(again, got, rtol=0, atol=SAME_MODEL)


def test_bfloat16_runs_the_flow_and_keeps_the_vocoder_in_float32(chatterbox_file):
    """dtype=bfloat16: the flow's encoder and U-Net in bfloat16, its Euler state, the vocoder
    and the speaker encoder in float32 (never rounded: the voice's embedding is float32's);
    a voice made and decoded in (the stream: test_token2wav_stream.py). The bound
    is not parity: it catches a broken reduced path (the vocoder's phase in bfloat16 gives
    noise; this small model measured 42.8 dB against float32)."""
    path = chatterbox_file[0]
    full, half = audiotok.load(path), audiotok.load(path, dtype="bfloat16")
    t2w_model = half.model.token2wav
    assert t2w_model.flow.decoder.estimator.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for m in (t2w_model.hift, t2w_model.speaker_encoder)
               for p in m.parameters())
    prompt = reference.speech_like(16000 * 2, seed=3)
    voice = half.make_voice(prompt, 16000)
    assert torch.equal(voice.embedding, full.make_voice(prompt, 16000).embedding)
    tokens = torch.randint(0, 6561, (1, 1, 30), generator=torch.Generator().manual_seed(2))
    want = full.decode(tokens, voice=voice, seed=1)
    got = half.decode(tokens, voice=voice, seed=1)
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert 10 * torch.log10(want.pow(2).sum() / (got - want).pow(2).sum()) > 30


def test_an_item_decodes_alone_in_any_batch(chatterbox_file):
    codec = audiotok.load(chatterbox_file[0])
    voice = _voice(5)
    g = torch.Generator().manual_seed(11)
    tokens = torch.randint(0, 6561, (3, 1, 9), generator=g)
    lengths = [9, 6, 9]
    from audiotok.codes import Codes

    codes = Codes(tokens, torch.tensor(lengths), "s3", 24000, 960)
    batch = codec.decode(codes, voice=voice, seed=[4, 5, 6])
    for i, n in enumerate(lengths):
        alone = codec.decode(tokens[i: i + 1, :, :n], voice=voice, seed=4 + i)
        assert batch.shape[-1] == 960 * 9 and alone.shape[-1] == 960 * n
        torch.testing.assert_close(batch[i: i + 1, :, : 960 * n], alone, rtol=0, atol=SAME_MODEL)
        assert not batch[i, :, 960 * n:].any()


def test_cosyvoice_folder_decodes_as_its_flow_and_hift_and_its_campplus_makes_voices(
        tmp_path, monkeypatch):
    """CosyVoice 2's folder: the tokenizer, flow.pt and hift.pt decode as its flow and HiFT do;
    campplus.onnx beside them makes voices with the front end's speaker embeddings."""
    from tests.models.s3 import onnx_graphs

    flow, hift = t2w.cosyvoice_flow(), t2w.cosyvoice_hift()
    tokenizer = reference.reference_model("v2_25hz", small=True)
    onnx_graphs.build(tokenizer.state_dict(), "v2_25hz", tmp_path / "speech_tokenizer_v2.onnx")
    torch.save(flow.state_dict(), tmp_path / "flow.pt")
    torch.save({f"generator.{k}": v for k, v in hift.state_dict().items()},
               tmp_path / "hift.pt")  # (the prefix some copies carry)
    codec = audiotok.load(tmp_path)
    assert codec.info()["token2wav"]["noise"] == "fixed"
    voice = _voice(6)
    tokens = torch.randint(0, 6561, (1, 1, 11), generator=torch.Generator().manual_seed(8))
    got = codec.decode(tokens, voice=voice, seed=3)
    with torch.inference_mode():
        mel, _ = flow.inference(token=tokens[:, 0], token_len=torch.tensor([11]), streaming=False,
                                finalize=True, **_ref_dict(voice, True))
        torch.manual_seed(3)
        want, _ = hift.inference(speech_feat=mel)
    torch.testing.assert_close(got[:, 0], want, rtol=0, atol=AUDIO_PARITY)
    # without campplus.onnx the folder has no speaker encoder: voices come from files
    assert codec.info()["token2wav"]["makes_voices"] is False
    with pytest.raises(AudiotokError, match="speaker encoder.*campplus.onnx"):
        codec.make_voice(np.zeros(16000, np.float32), 16000)

    # with it, campplus.onnx runs on onnxruntime as CosyVoice's front end runs it: the voice's
    # embedding equals the front end's; within 1e-5 of the torch CAMPPlus of the same weights
    # (the graph folds BatchNorms into convolutions); broken files are refused
    campplus = t2w.campplus_onnx(tmp_path / "campplus.onnx")
    codec = audiotok.load(tmp_path)
    assert codec.info()["token2wav"]["makes_voices"] is True
    speech = 0.1 * torch.randn(1, 37_000, generator=torch.Generator().manual_seed(5))
    voice = codec.make_voice(speech[0].numpy(), 16000)
    want = t2w.cosyvoice_speaker_embedding(tmp_path / "campplus.onnx", speech)
    assert torch.equal(voice.embedding, want[0].float())
    ours = CAMPPlus().eval()
    ours.load_state_dict({k: v for k, v in campplus.state_dict().items()
                          if not k.endswith("num_batches_tracked")})
    with torch.inference_mode():
        torch.testing.assert_close(voice.embedding, ours.embed(speech[0]), rtol=0, atol=1e-5)
    n = voice.tokens.numel()
    assert voice.tokens.tolist() == codec.encode(speech, 16000).tokens[0, 0, :n].tolist()
    (tmp_path / "campplus.onnx").write_bytes(b"not onnx")
    with pytest.raises(CheckpointError, match="campplus.onnx: not a readable ONNX graph"):
        audiotok.load(tmp_path).make_voice(speech[0].numpy(), 16000)
    from onnx import TensorProto, helper, save

    features = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", 40])
    save(helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                                             [features], [helper.make_tensor_value_info(
                                                 "y", TensorProto.FLOAT, ["b", "t", 40])])),
         str(tmp_path / "campplus.onnx"))
    with pytest.raises(CheckpointError, match=r"not a CAMPPlus graph.*\[batch, frames, 80\]"):
        audiotok.load(tmp_path).make_voice(speech[0].numpy(), 16000)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # (as if not installed)
    with pytest.raises(AudiotokError, match="runs it on onnxruntime.*pip install onnxruntime"):
        audiotok.load(tmp_path).make_voice(speech[0].numpy(), 16000)


def test_bad_inputs_are_refused_clearly(chatterbox_file, tmp_path):
    codec = audiotok.load(chatterbox_file[0])
    tokens = torch.zeros(1, 1, 5, dtype=torch.long)
    with pytest.raises(AudiotokError, match="needs a voice"):
        codec.decode(tokens)
    (tmp_path / "bad.voice").write_bytes(b"not a voice")
    with pytest.raises(AudiotokError, match="unreadable voice file"):
        codec.decode(tokens, voice=tmp_path / "bad.voice")
    with pytest.raises(AudiotokError, match="no such voice"):
        codec.decode(tokens, voice=tmp_path / "missing.voice")
    with pytest.raises(AudiotokError, match="steps"):
        codec.decode(tokens, voice=_voice(2), steps=0)
    with pytest.raises(AudiotokError, match="one per item"):
        codec.decode(tokens, voice=_voice(2), seed=[1, 2])
    with pytest.raises(AudiotokError, match="tokens must be int64"):
        Voice(torch.tensor([6561]), torch.zeros(2, 80), torch.zeros(192))
    with pytest.raises(AudiotokError, match="more than 2 per token"):
        Voice(torch.tensor([1]), torch.zeros(4, 80), torch.zeros(192))
    from audiotok.errors import CodesError

    with pytest.raises(CodesError):
        codec.decode(torch.full((1, 1, 3), 6561), voice=_voice(2))
    # CosyVoice 2's noise buffer holds 300 s of mel (prompt included)
    cosy = audiotok.load(chatterbox_file[0])
    from dataclasses import replace

    cosy.decoder.config = replace(cosy.decoder.config, noise="fixed")
    with pytest.raises(AudiotokError, match="noise buffer"):
        cosy.decode(torch.zeros(1, 1, 7501, dtype=torch.long), voice=_voice(2))


def test_a_v1_tokenizer_with_a_decoder_is_refused(tmp_path):
    tokenizer = reference.reference_model("v1_25hz", small=True)
    flow, hift = t2w.chatterbox_flow(), t2w.chatterbox_hift()
    sd = {f"tokenizer.{k}": v for k, v in tokenizer.state_dict().items()}
    sd.update({f"flow.{k}": v for k, v in flow.state_dict().items()})
    sd.update({f"mel2wav.{k}": v for k, v in hift.state_dict().items()})
    save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp_path / "s3gen.safetensors"))
    with pytest.raises(CheckpointError, match="decodes v2 tokens"):
        audiotok.load(tmp_path / "s3gen.safetensors", variant="v1_25hz")


def test_the_command_line_makes_voices_and_decodes_in_them(chatterbox_file, tmp_path):
    import soundfile as sf
    from click.testing import CliRunner

    from audiotok.cli import main
    from audiotok.codes import load_codes

    model = str(chatterbox_file[0])
    sf.write(tmp_path / "prompt.wav", reference.speech_like(16000 * 2, seed=1).numpy(), 16000)
    sf.write(tmp_path / "speech.wav", reference.speech_like(16000, seed=2).numpy(), 16000)

    def run(*args, code=0):
        r = CliRunner().invoke(main, list(args), catch_exceptions=False)
        assert r.exit_code == code, r.output
        return r.output

    assert "50 prompt tokens (2.00 s)" in run("voice", str(tmp_path / "prompt.wav"), "-o",
                                               str(tmp_path / "me.voice"), "-m", model)
    run("encode", str(tmp_path / "speech.wav"), "-o", str(tmp_path / "speech.codes"), "-m", model)
    out = run("decode", str(tmp_path / "speech.codes"), "-o", str(tmp_path / "out.wav"),
              "--voice", str(tmp_path / "me.voice"), "-m", model, "--subtype", "FLOAT")
    audio, rate = sf.read(tmp_path / "out.wav", dtype="float32")
    codec = audiotok.load(model)
    want = codec.decode(load_codes(tmp_path / "speech.codes"),
                        voice=Voice.load(tmp_path / "me.voice"))
    assert rate == 24000 and audio.shape == (24000,) and "out.wav" in out
    np.testing.assert_allclose(audio, want[0, 0].numpy(), rtol=0, atol=SAME_MODEL)
    # without a voice: refused at once; reconstruct: each input its own voice prompt
    assert "decodes in a voice" in run("decode", str(tmp_path / "speech.codes"), "-o",
                                       str(tmp_path / "x.wav"), "-m", model, code=2)
    assert not (tmp_path / "x.wav").exists()
    run("reconstruct", str(tmp_path / "speech.wav"), "-o", str(tmp_path / "again.wav"),
        "-m", model, "--subtype", "FLOAT")
    again, _ = sf.read(tmp_path / "again.wav", dtype="float32")
    own = codec.decode(codec.encode(str(tmp_path / "speech.wav")),
                       voice=codec.make_voice(str(tmp_path / "speech.wav")))
    np.testing.assert_allclose(again, own[0, 0].numpy(), rtol=0, atol=SAME_MODEL)


def test_the_token2wav_preset_through_a_hub_cache(tmp_path):
    """`s3-v2-token2wav` fetches CosyVoice2-0.5B's tokenizer, flow.pt, hift.pt and
    campplus.onnx (here from a local cache laid out as the hub's, offline)."""
    import json

    from audiotok.models.s3.token2wav.model import Token2Wav
    from tests.models.s3 import onnx_graphs
    from tests.test_hub import _run, cache_repo

    decoder = Token2Wav(small(COSYVOICE2)).state_dict()
    torch.save({k[5:]: v for k, v in decoder.items() if k.startswith("flow.")},
               tmp_path / "flow.pt")
    torch.save({k[5:]: v for k, v in decoder.items() if k.startswith("hift.")},
               tmp_path / "hift.pt")
    tokenizer = reference.reference_model("v2_25hz", small=True)
    onnx_graphs.build(tokenizer.state_dict(), "v2_25hz", tmp_path / "speech_tokenizer_v2.onnx")
    t2w.campplus_onnx(tmp_path / "campplus.onnx")
    cache_repo(tmp_path / "cache", "FunAudioLLM/CosyVoice2-0.5B",
               {f: tmp_path / f for f in ("speech_tokenizer_v2.onnx", "flow.pt", "hift.pt",
                                          "campplus.onnx")})
    out = _run("import audiotok, json\nc = audiotok.load('s3-v2-token2wav')\n"
               "print(json.dumps([c.sample_rate, c.info()['token2wav']]))\n",
               {"HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "h")})
    assert out.returncode == 0, out.stderr
    rate, t2w_info = json.loads(out.stdout.strip().splitlines()[-1])
    assert rate == 24000 and t2w_info == {"noise": "fixed", "excitation": "sinegen2",
                                          "steps": 10, "makes_voices": True}


def test_the_onnx_export_of_a_codec_with_a_decoder_holds_the_tokenizer(chatterbox_file,
                                                                       tmp_path):
    from audiotok.export.onnx import export_onnx

    codec = audiotok.load(chatterbox_file[0])
    runtime = audiotok.load(export_onnx(codec, tmp_path / "onnx"))
    w = reference.speech_like(16000 + 77, seed=6).numpy()
    codes = runtime.encode(w, 16000)
    assert np.array_equal(codes.tokens, codec.encode(w, 16000).tokens.numpy())
    assert codes.sample_rate == 24000 and codes.samples_per_frame == 960
    with pytest.raises(AudiotokError, match="tokenizer only"):
        runtime.decode(codes)


def test_chatterbox_turbo_loads_its_tokenizer_alone(tmp_path):
    """s3gen_meanflow.safetensors (Chatterbox-Turbo): the mean-flow decoder is not run; the
    tokenizer encodes, decode says what to load instead."""
    from audiotok.models.s3.token2wav.model import Token2Wav

    tokenizer = reference.reference_model("v2_25hz", small=True)
    sd = {f"tokenizer.{k}": v for k, v in tokenizer.state_dict().items()}
    for k, v in Token2Wav(small(CHATTERBOX)).state_dict().items():
        sd[k.replace("hift.", "mel2wav.", 1)] = v
    sd["flow.decoder.estimator.time_embed_mixer.weight"] = torch.zeros(256, 512)
    save_file({k: v.contiguous() for k, v in sd.items()},
              str(tmp_path / "s3gen_meanflow.safetensors"))
    codec = audiotok.load(tmp_path / "s3gen_meanflow.safetensors")
    assert codec.decoder is None and codec.sample_rate == 16000
    codes = codec.encode(reference.speech_like(8000)[None], 16000)
    w = reference.speech_like(8000)
    reference.assert_codes_equal(tokenizer, w, codes.tokens[0, 0],
                                 reference.reference_codes(tokenizer, [w])[0])
    with pytest.raises(AudiotokError, match="no token-to-audio decoder"):
        codec.decode(codes)


def test_the_server_keeps_voices_and_decodes_in_them(chatterbox_file):
    """A voice uploaded once (POST /v1/voices), then decode requests that name it: the
    library's audio for the same voice; encoding as the library's; the limits, and bad requests
    (no voice, an unknown one, a stream) answered with the reason."""
    import io

    import soundfile as sf
    from fastapi.testclient import TestClient

    from audiotok.server.app import ServerSettings, create_app
    from audiotok.server.engine import Engine, EngineSettings
    from tests.conftest import S2_TINY

    codec = audiotok.load(chatterbox_file[0])
    engine = Engine({"s3": codec, "s2": audiotok.load(S2_TINY / "codec.pth")},
                    EngineSettings(max_voices=1, max_voice_seconds=3.0))

    def wav(seconds: float, seed: int) -> bytes:
        buf = io.BytesIO()
        sf.write(buf, reference.speech_like(int(16000 * seconds), seed=seed).numpy(), 16000,
                 format="WAV", subtype="FLOAT")
        return buf.getvalue()

    try:
        with TestClient(create_app(engine, ServerSettings(idle_timeout=5.0))) as c:
            r = c.post("/v1/voices?model=s3", content=wav(2, 1))
            assert r.status_code == 200, r.text
            made = r.json()
            assert made["prompt_tokens"] == 50 and made["seconds"] == 2.0
            r = c.post("/v1/encode?model=s3", content=wav(1, 5))
            want_tokens = codec.encode(reference.speech_like(16000, seed=5)[None], 16000).tokens
            assert r.status_code == 200 and r.json()["tokens"] == want_tokens[0].tolist()
            assert c.get("/v1/voices").json()["voices"] == [made]
            tokens = torch.randint(0, 6561, (1, 12), generator=torch.Generator().manual_seed(4))
            r = c.post(f"/v1/decode?model=s3&voice={made['voice']}&format=npz",
                       json={"tokens": tokens.tolist()})
            assert r.status_code == 200, r.text
            got = np.load(io.BytesIO(r.content))["audio"][0]
            voice = codec.make_voice(reference.speech_like(32000, seed=1), 16000)
            want = codec.decode(tokens[None], voice=voice)[0, 0].numpy()
            assert got.shape == want.shape == (960 * 12,)
            np.testing.assert_allclose(got, want, rtol=0, atol=SAME_MODEL)
            # streams: a voice needed, a known one, and weights whose noise holds still
            for start, why in (({}, "decodes in a voice"), ({"voice": "nope"}, "unknown voice"),
                               ({"voice": made["voice"]}, "draw their flow noise")):
                with c.websocket_connect("/v1/stream/decode") as ws:
                    ws.send_json({"type": "start", "model": "s3", **start})
                    doc = ws.receive_json()
                    assert doc["type"] == "error" and why in doc["message"], doc
                    assert doc["code"] == 1007
            # the limits: one voice kept (429), 3 s of prompt (413); bad requests (4xx)
            assert c.post("/v1/voices?model=s3", content=wav(1, 2)).status_code == 429
            assert c.delete(f"/v1/voices/{made['voice']}").json() == {"deleted": made["voice"]}
            assert c.post("/v1/voices?model=s3", content=wav(4, 2)).status_code == 413
            assert c.post("/v1/voices?model=s3", content=b"not audio").status_code == 400
            r = c.post("/v1/decode?model=s3&voice=nope", json={"tokens": [[1, 2, 3]]})
            assert r.status_code == 404 and "unknown voice" in r.json()["error"]
            r = c.post("/v1/decode?model=s3", json={"tokens": [[1, 2, 3]]})
            assert r.status_code == 400 and "decodes in a voice" in r.json()["error"]
            assert c.delete("/v1/voices/nope").status_code == 404
            # a model that decodes without a voice takes none
            r = c.post("/v1/voices?model=s2", content=wav(1, 2))
            assert r.status_code == 400 and "without a voice" in r.json()["error"]
            r = c.post("/v1/decode?model=s2&voice=abc", json={"tokens": [[1]] * 10})
            assert r.status_code == 400 and "without a voice" in r.json()["error"]
            with c.websocket_connect("/v1/stream/decode") as ws:
                ws.send_json({"type": "start", "model": "s2", "exact": True})
                doc = ws.receive_json()
                assert doc["code"] == 1007 and "one kind of decode stream" in doc["message"]
            assert c.get("/healthz").json() == {"status": "ok"}
    finally:
        engine.close(timeout=5)


def test_the_server_streams_in_a_stored_voice(chatterbox_file):
    """A WebSocket decode stream that names a stored voice: the library's stream in that voice
    (CosyVoice 2's chunks), tokens sent in pieces, or Chatterbox's LLM ids; its exact stream;
    "ready" says the stream kind."""
    import io
    from dataclasses import replace

    import soundfile as sf

    from tests.helpers import served_client, ws_stream_decode

    codec = audiotok.load(chatterbox_file[0])
    # CosyVoice 2's conventions (the same layout; streams need its fixed noise, the exact one
    # its SineGen2), with Chatterbox's speaker encoder, which makes the server's voices
    hift = replace(codec.decoder.config.hift, sine="sinegen2")
    codec.decoder.config = replace(codec.decoder.config, noise="fixed", fade_in=0, hift=hift)
    codec.decoder.hift.config = codec.decoder.hift.m_source.cfg = hift
    prompt = reference.speech_like(24000, seed=1)
    buf = io.BytesIO()
    sf.write(buf, prompt.numpy(), 16000, format="WAV", subtype="FLOAT")
    tokens = torch.randint(0, 6561, (1, 70), generator=torch.Generator().manual_seed(2))
    with served_client({"s3": codec}) as c:
        made = c.post("/v1/voices?model=s3", content=buf.getvalue()).json()
        ready, got, done = ws_stream_decode(c, "s3", tokens.numpy(), (30, 1, 33, 6),
                                            voice=made["voice"])
        # what Chatterbox's T3 writes (start 6561, the codes, stop 6562), as ids and as text
        ids = [6561, *tokens[0].tolist(), 6562]
        with c.websocket_connect("/v1/stream/decode") as ws:
            ws.send_json({"type": "start", "model": "s3", "voice": made["voice"],
                          "ids": "chatterbox", "sample_format": "f32le"})
            doc = ws.receive_json()
            assert doc["type"] == "ready", doc
            text = "".join(f"<|chatterbox_{i}|>" for i in ids[40:])
            ws.send_json({"type": "ids", "ids": ids[:40]})
            ws.send_json({"type": "text", "text": text[:50]})  # (a token split across pieces)
            ws.send_json({"type": "text", "text": text[50:]})  # (the stop id ends the input)
            pcm = []
            while (msg := ws.receive()).get("bytes") is not None:
                pcm.append(np.frombuffer(msg["bytes"], "<f4"))
            assert '"done"' in msg["text"]
        np.testing.assert_array_equal(np.concatenate(pcm), got)
        _, exact, _ = ws_stream_decode(c, "s3", tokens.numpy(), (20, 50),
                                       voice=made["voice"], exact=True)
        with c.websocket_connect("/v1/stream/decode") as ws:
            ws.send_json({"type": "start", "model": "s3", "voice": made["voice"],
                          "exact": "yes"})
            refused = ws.receive_json()
    assert ready["decode"] == "chunked" and done["frames"] == 70, (ready, done)
    assert refused["type"] == "error" and "exact must be" in refused["message"]
    voice = codec.make_voice(prompt, 16000)
    with codec.stream_decoder(voice=voice) as dec:
        want = torch.cat([dec.push(tokens[None]), dec.flush()], -1)[0, 0].numpy()
    assert got.shape == want.shape == (960 * 70,)
    np.testing.assert_allclose(got, want, rtol=0, atol=SAME_MODEL)
    want = codec.decode(tokens[None], voice=voice, chunked=True)[0, 0].numpy()
    np.testing.assert_allclose(exact, want, rtol=0, atol=AUDIO_PARITY)


def test_a_reconstruction_speaks_in_the_inputs_first_10_s(chatterbox_file):
    """own_conditioning (reconstruct, eval): the voice of the input's first 10 s, as Chatterbox
    cuts its decoder's prompt, not of the whole input."""
    codec = audiotok.load(chatterbox_file[0])
    audio = reference.speech_like(16000 * 12, seed=3)
    got = codec.own_conditioning(audio.numpy(), 16000)["voice"]
    want = codec.make_voice(audio[: 16000 * 10], 16000)
    assert got.tokens.numel() == 250 and torch.equal(got.tokens, want.tokens)
    torch.testing.assert_close(got.embedding, want.embedding, rtol=0, atol=SAME_MODEL)
    # (the 24 kHz copy was resampled with the 2 s after it: its last frames see them)
    assert got.mel.shape == want.mel.shape == (500, 80)
    torch.testing.assert_close(got.mel[:-3], want.mel[:-3], rtol=0, atol=SAME_MODEL)
