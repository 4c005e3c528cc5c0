"""The official ONNX files: weights read from graphs laid out as they are (onnx_graphs.py),
equal to what s3tokenizer's own converters read and to the model they came from; the variant
told by the graph (both v1 files share a name); hub names through a local cache."""

import pytest
import torch

import audiotok
from audiotok.errors import AudiotokError
from tests.models.s3 import reference
from tests.models.s3.conftest import VARIANTS

onnx_graphs = pytest.importorskip("tests.models.s3.onnx_graphs")


@pytest.mark.parametrize("variant", VARIANTS)
def test_weights_equal_the_package_converters_and_the_model(s3_refs, tmp_path, variant):
    from audiotok.models.s3.official import read_onnx

    s3 = reference.import_s3tokenizer()
    r = s3_refs(variant)
    # (both v1 files are speech_tokenizer_v1.onnx: the graph says which)
    path = onnx_graphs.build(r.ref.state_dict(), variant, tmp_path / "speech_tokenizer_v1.onnx")
    convert = s3.onnx2torch_v3 if variant == "v3_25hz" else s3.onnx2torch
    theirs = convert(str(path))
    force = {"variant": "v3_25hz"} if variant == "v3_25hz" else {}  # (2 blocks: v2's depth)
    ours, config = read_onnx(path, **force)
    want = r.ref.state_dict()
    assert set(ours) == set(theirs) == set(want)
    for k, v in want.items():
        assert torch.equal(ours[k], v) and torch.equal(theirs[k], v), k
    assert config.variant == variant and config.ln_eps == 1e-5
    codec = audiotok.load(path, **force)
    w = reference.speech_like(30000)
    reference.assert_codes_equal(r.ref, w, codec.encode(w[None], 16000).tokens[0, 0],
                                 reference.reference_codes(r.ref, [w])[0])


def test_epsilon_wrong_variants_and_other_files(s3_refs, tmp_path):
    from audiotok.models.s3.official import read_onnx

    sd = s3_refs("v2_25hz").ref.state_dict()
    path = onnx_graphs.build(sd, "v2_25hz", tmp_path / "a.onnx", eps=1e-6)
    assert read_onnx(path)[1].ln_eps == 1e-6
    with pytest.raises(AudiotokError, match="like v2_25hz, not v1"):
        audiotok.load(path, variant="v1")
    (tmp_path / "junk.onnx").write_bytes(b"\x00not a model")
    with pytest.raises(AudiotokError, match="ONNX"):
        audiotok.load(tmp_path / "junk.onnx")


def test_hub_names_through_a_local_cache(s3_refs, tmp_path):
    """s3-v1-25hz: CosyVoice-300M-25Hz's speech_tokenizer_v1.onnx (25 Hz, from its graph)."""
    r = s3_refs("v1_25hz")
    path = onnx_graphs.build(r.ref.state_dict(), "v1_25hz", tmp_path / "speech_tokenizer_v1.onnx")
    w = reference.speech_like(20000)
    variant, codes, _ = reference.load_by_name(
        tmp_path, "FunAudioLLM/CosyVoice-300M-25Hz", {"speech_tokenizer_v1.onnx": path},
        "s3-v1-25hz", w)
    assert variant == "v1_25hz"
    reference.assert_codes_equal(r.ref, w, torch.tensor(codes),
                                 reference.reference_codes(r.ref, [w])[0])
