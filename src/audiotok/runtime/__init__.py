"""The ONNX runtime: an export folder (audiotok export --format onnx) run with onnxruntime and
numpy, without torch. `audiotok.load(folder)` gives an OnnxCodec with the torch codecs' API:
encode (any audio input, resampled and downmixed) to Codes holding numpy arrays (they save and
load as the torch codecs' do: `load_codes(path, arrays=True)`), decode (tokens or Codes of
either kind), and exact stream_decoder / stream_encoder (causal codecs); inputs and errors as
there.

    codec = audiotok.load("codec_onnx/")
    codes = codec.encode("speech.wav")     # Codes: tokens [1, K, T] numpy int64
    audio = codec.decode(codes)            # float32 [B, 1, N]
    with codec.stream_decoder() as dec:
        pcm = dec.push(tokens[:, :, :4])   # [1, 1, 4 * samples_per_frame]
    with codec.stream_encoder() as enc:
        tokens = enc.push(pcm[:, 0])       # [1, K, 4]
"""

from .codec import MANIFEST, OnnxCodec
from .streams import OnnxStreamDecoder, OnnxStreamEncoder

__all__ = ["MANIFEST", "OnnxCodec", "OnnxStreamDecoder", "OnnxStreamEncoder"]
