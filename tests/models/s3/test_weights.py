"""S3 checkpoints: s3tokenizer state dicts (v1's rate from `variant`), Chatterbox's s3gen
safetensors (through a hub cache laid out as ResembleAI/chatterbox), audiotok folders;
detection and clear errors."""

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import audiotok
from audiotok.errors import AudiotokError
from tests.models.s3 import reference


def test_state_dicts_load_with_the_variant_v1_needs(s3_refs, tmp_path):
    w = reference.speech_like(20000)
    for variant in ("v1", "v1_25hz"):
        r = s3_refs(variant)
        with pytest.raises(AudiotokError, match="variant='v1'.*variant='v1_25hz'"):
            audiotok.load(r.pt)
        codec = audiotok.load(r.pt, variant=variant)
        assert codec.config.variant == variant and codec.frame_rate == (50 if variant == "v1"
                                                                        else 25)
        assert torch.equal(codec.encode(w[None], 16000).tokens[0, 0],
                           reference.reference_codes(r.ref, [w])[0])
        codec.save_pretrained(tmp_path / variant)  # the folder says its variant
        again = audiotok.load(tmp_path / variant)
        assert again.config == codec.config and again.weights_sha256() == codec.weights_sha256()
    for variant, layers in (("v2_25hz", 6), ("v3_25hz", 12)):  # told apart by their layers
        ref = reference.reference_model(variant, small=True, layers=layers)
        pt = reference.save_pt(ref, tmp_path / f"{variant}.pt")
        assert audiotok.load(pt).config.variant == variant
    with pytest.raises(AudiotokError, match="not v2_25hz"):
        audiotok.load(s3_refs("v1").pt, variant="v2_25hz")
    with pytest.raises(AudiotokError, match="merge must be one of"):
        audiotok.load(s3_refs("v2_25hz").pt, merge="overlap")


def test_chatterbox_s3gen_through_the_hub_cache(s3_refs, tmp_path):
    """s3gen.safetensors: the tokenizer's tensors under `tokenizer.` among S3Gen's own (its
    decoder's too: the codec then decodes)."""
    r = s3_refs("v2_25hz")
    s3 = reference.import_s3tokenizer()
    tensors = {f"tokenizer.{k}": v.contiguous() for k, v in r.ref.state_dict().items()}
    tensors["tokenizer._mel_filters"] = torch.from_numpy(
        np.load(f"{s3.__path__[0]}/assets/mel_filters.npz")["mel_128"])
    tensors["tokenizer.window"] = torch.hann_window(400)
    # S3Gen's other parts: its flow, vocoder (`mel2wav`) and speaker encoder (a small one)
    from audiotok.models.s3.token2wav.config import CHATTERBOX, small
    from audiotok.models.s3.token2wav.model import Token2Wav

    decoder = Token2Wav(small(CHATTERBOX)).state_dict()
    tensors.update({k.replace("hift.", "mel2wav.", 1): v.contiguous() for k, v in decoder.items()})
    save_file(tensors, str(tmp_path / "s3gen.safetensors"))
    w = reference.speech_like(30000)
    variant, codes, stderr = reference.load_by_name(
        tmp_path, "ResembleAI/chatterbox", {"s3gen.safetensors": tmp_path / "s3gen.safetensors"},
        "s3-chatterbox", w)
    assert variant == "v2_25hz"
    assert codes == reference.reference_codes(r.ref, [w])[0].tolist()
    assert "MIT" in stderr  # the licence notice


def test_detection_and_bad_files(s3_refs, tmp_path):
    from audiotok.models.family import Checkpoint
    from audiotok.models.registry import FAMILIES

    detect = FAMILIES["s3"].detect
    assert detect(Checkpoint(s3_refs("v2_25hz").pt))
    torch.save({"encoder.conv1.weight": torch.zeros(2)}, tmp_path / "other.pt")
    assert not detect(Checkpoint(tmp_path / "other.pt"))
    torch.save({"quantizer._codebook.project_down.weight": torch.zeros(8, 4)}, tmp_path / "q.pt")
    with pytest.raises(AudiotokError):
        audiotok.load(tmp_path / "q.pt")
