"""CAMPPlus: the speaker embedding of a voice (16 kHz speech -> x-vector [192]).

Features: Kaldi filterbanks (80 bins, 25 ms frames every 10 ms, as torchaudio's
compliance.kaldi.fbank computes them with its defaults), less their mean over the utterance.
Net: a 2-D residual front end over (frequency, time), a TDNN layer, three densely connected
blocks of context-aware (CAM) TDNN layers with transitions, statistics pooling (mean and
standard deviation over time), a 1x1 convolution and a BatchNorm without affine parameters.
Names are the reference's (Chatterbox's `speaker_encoder.*`)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ....errors import AudiotokError, CheckpointError
from .config import SPEAKER_DIM

SAMPLE_RATE = 16000
FRAME, SHIFT, FFT = 400, 160, 512
N_BINS = 80
LOW_HZ = 20.0
PREEMPHASIS = 0.97
EPSILON = torch.finfo(torch.float32).eps


def _mel(hz):
    return 1127.0 * (1.0 + hz / 700.0).log() if torch.is_tensor(hz) \
        else 1127.0 * math.log(1.0 + hz / 700.0)


def kaldi_mel_banks() -> torch.Tensor:
    """[80, 257] triangles equally spaced on the Kaldi mel scale from 20 Hz to 8 kHz, built
    in float32 as torchaudio builds them (the last FFT bin gets no weight)."""
    low, high = _mel(LOW_HZ), _mel(SAMPLE_RATE / 2)
    delta = (high - low) / (N_BINS + 1)
    b = torch.arange(N_BINS, device="cpu")[:, None]
    left, centre, right = low + b * delta, low + (b + 1.0) * delta, low + (b + 2.0) * delta
    mel = _mel(SAMPLE_RATE / FFT * torch.arange(FFT / 2, device="cpu"))[None]
    up, down = (mel - left) / (centre - left), (right - mel) / (right - centre)
    banks = torch.max(torch.zeros(1, device="cpu"), torch.min(up, down))
    return F.pad(banks, (0, 1))


def kaldi_fbank(audio: torch.Tensor) -> torch.Tensor:
    """Log filterbanks [F, 80] of one utterance [N] (16 kHz, float in [-1, 1]): frames of 400
    samples every 160 (none past the end), DC removed, pre-emphasis 0.97, the Povey window,
    a 512-point power spectrum, the mel banks, log floored at float32's epsilon."""
    frames = audio.float().unfold(0, FRAME, SHIFT)
    frames = frames - frames.mean(1, keepdim=True)
    previous = torch.cat([frames[:, :1], frames[:, :-1]], 1)
    frames = frames - PREEMPHASIS * previous
    window = torch.hann_window(FRAME, periodic=False, device=audio.device).pow(0.85)
    frames = F.pad(frames * window, (0, FFT - FRAME))
    power = torch.fft.rfft(frames).abs().pow(2.0)
    energies = torch.mm(power, kaldi_mel_banks().to(audio.device).T)
    return torch.max(energies, torch.tensor(EPSILON, device=audio.device)).log()


class BatchNorm(nn.Module):
    """Inference BatchNorm over axis 1 (any rank): running mean and variance, eps 1e-5, with or
    without affine parameters (no batch counter: the weights' `num_batches_tracked` is
    dropped)."""

    def __init__(self, channels: int, affine: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(channels)) if affine else None
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=False, eps=1e-5)


class BNReLU(nn.Module):
    """BatchNorm then ReLU (`batchnorm`; affine=False: BatchNorm alone)."""

    def __init__(self, channels: int, affine: bool = True):
        super().__init__()
        self.batchnorm = BatchNorm(channels, affine)
        self.relu = affine

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.batchnorm(x)
        return F.relu(x) if self.relu else x


class ResBlock2d(nn.Module):
    """relu(BN(conv3(relu(BN(conv3_stride(f,1)(x))))) + shortcut(x))."""

    def __init__(self, planes_in: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(planes_in, planes, 3, stride=(stride, 1), padding=1, bias=False)
        self.bn1 = BatchNorm(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = BatchNorm(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or planes_in != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(planes_in, planes, 1, stride=(stride, 1), bias=False),
                BatchNorm(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + self.shortcut(x))


class FrontEnd(nn.Module):
    """[B, 80, T] -> [B, 320, T]: 2-D convolutions that halve the frequency axis three times."""

    def __init__(self, channels: int = 32):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1, bias=False)
        self.bn1 = BatchNorm(channels)
        self.layer1 = nn.Sequential(ResBlock2d(channels, channels, 2),
                                    ResBlock2d(channels, channels, 1))
        self.layer2 = nn.Sequential(ResBlock2d(channels, channels, 2),
                                    ResBlock2d(channels, channels, 1))
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = BatchNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x[:, None])))
        x = self.layer2(self.layer1(x))
        x = F.relu(self.bn2(self.conv2(x)))
        return x.flatten(1, 2)


class CAMLayer(nn.Module):
    """A dilated convolution gated by a context: sigmoid(linear2(relu(linear1(mean over time +
    mean over each 100-frame segment))))."""

    def __init__(self, channels: int, out: int, dilation: int, segment: int = 100):
        super().__init__()
        self.segment = segment
        self.linear_local = nn.Conv1d(channels, out, 3, padding=dilation, dilation=dilation,
                                      bias=False)
        self.linear1 = nn.Conv1d(channels, channels // 2, 1)
        self.linear2 = nn.Conv1d(channels // 2, out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seg = F.avg_pool1d(x, self.segment, self.segment, ceil_mode=True)
        seg = seg.repeat_interleave(self.segment, -1)[..., : x.shape[-1]]
        context = F.relu(self.linear1(x.mean(-1, keepdim=True) + seg))
        return self.linear_local(x) * torch.sigmoid(self.linear2(context))


class DenseLayer(nn.Module):
    """BN-ReLU, 1x1 convolution to 128, BN-ReLU, CAM layer to 32 channels (the growth)."""

    def __init__(self, channels: int, dilation: int, growth: int = 32, bottleneck: int = 128):
        super().__init__()
        self.nonlinear1 = BNReLU(channels)
        self.linear1 = nn.Conv1d(channels, bottleneck, 1, bias=False)
        self.nonlinear2 = BNReLU(bottleneck)
        self.cam_layer = CAMLayer(bottleneck, growth, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))


class Conv1x1(nn.Module):
    """A 1x1 convolution with BN(-ReLU) around it (`linear`, `nonlinear`)."""

    def __init__(self, channels: int, out: int, before: bool, affine: bool = True, **conv):
        super().__init__()
        self.before = before
        self.nonlinear = BNReLU(channels if before else out, affine)
        self.linear = nn.Conv1d(channels, out, conv.pop("kernel", 1), bias=False, **conv)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.before:
            return self.linear(self.nonlinear(x))
        return self.nonlinear(self.linear(x))


class CAMPPlus(nn.Module):
    def __init__(self, embedding: int = 192, growth: int = 32):
        super().__init__()
        self.head = FrontEnd()
        channels = 128
        layers = {"tdnn": Conv1x1(320, channels, before=False, kernel=5, stride=2, padding=2)}
        for i, (count, dilation) in enumerate(zip((12, 24, 16), (1, 2, 2), strict=True)):
            block = nn.Module()
            for j in range(count):
                block.add_module(f"tdnnd{j + 1}", DenseLayer(channels + j * growth, dilation))
            layers[f"block{i + 1}"] = block
            channels += count * growth
            layers[f"transit{i + 1}"] = Conv1x1(channels, channels // 2, before=True)
            channels //= 2
        layers["out_nonlinear"] = BNReLU(channels)
        layers["dense"] = Conv1x1(2 * channels, embedding, before=False, affine=False)
        self.xvector = nn.ModuleDict(layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """features [B, T, 80] (mean-normalised filterbanks) -> x-vectors [B, 192]."""
        x = self.xvector["tdnn"](self.head(features.transpose(1, 2)))
        for i in (1, 2, 3):
            for layer in self.xvector[f"block{i}"].children():
                x = torch.cat([x, layer(x)], 1)
            x = self.xvector[f"transit{i}"](x)
        x = self.xvector["out_nonlinear"](x)
        stats = torch.cat([x.mean(-1), x.std(-1, unbiased=True)], -1)
        return self.xvector["dense"](stats[:, :, None])[:, :, 0]

    def embed(self, audio: torch.Tensor) -> torch.Tensor:
        """The x-vector [192] of one utterance [N] at 16 kHz."""
        features = kaldi_fbank(audio)
        return self(features[None] - features.mean(0, keepdim=True))[0]


class OnnxCAMPPlus:
    """CosyVoice 2's `campplus.onnx` on onnxruntime, run as CosyVoice's front end runs it (one
    thread, every graph optimisation): the same mean-normalised filterbanks [1, T, 80] in, the
    x-vector [1, 192] out. Any exported CAMPPlus graph works, whatever its tensor names; the
    session opens on the first voice."""

    def __init__(self, path: str):
        self.path = path
        self._session = None

    def _open(self):
        try:
            import onnxruntime as ort
        except ImportError:
            raise AudiotokError(f"making a voice with {self.path} runs it on onnxruntime, "
                                "which is not installed: pip install onnxruntime") from None
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = 1
        try:
            session = ort.InferenceSession(self.path, options,
                                           providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 (onnxruntime raises its own error types)
            raise CheckpointError(f"{self.path}: not a readable ONNX graph ({e})") from None
        inputs = session.get_inputs()
        if len(inputs) != 1 or len(inputs[0].shape) != 3 or inputs[0].shape[2] != N_BINS:
            raise CheckpointError(f"{self.path}: not a CAMPPlus graph (it must take one input "
                                  f"[batch, frames, {N_BINS}])")
        self._session = session
        return session

    def embed(self, audio: torch.Tensor) -> torch.Tensor:
        """The x-vector [192] of one utterance [N] at 16 kHz."""
        session = self._session or self._open()
        features = kaldi_fbank(audio.cpu())
        features = (features - features.mean(0, keepdim=True))[None].numpy()
        out = session.run(None, {session.get_inputs()[0].name: features})[0]
        if out.size != SPEAKER_DIM:
            raise CheckpointError(f"{self.path}: gave {list(out.shape)}, not an x-vector of "
                                  f"{SPEAKER_DIM}")
        return torch.from_numpy(out.reshape(SPEAKER_DIM).copy()).to(audio.device)
