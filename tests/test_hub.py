"""Model names resolve through huggingface_hub; tested offline against a local cache laid out
like the fishaudio/s2-pro repository."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import audiotok
from audiotok.errors import ModelNotFoundError
from tests.conftest import S2_TINY

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LLM_CONFIG = {"model_type": "fish_qwen3_omni", "architectures": ["FishQwen3OmniForCausalLM"]}


def lay_out_repo(d):
    """Files as in fishaudio/s2-pro: the codec beside the language model's own config."""
    d.mkdir(parents=True)
    shutil.copy(S2_TINY / "codec.pth", d / "codec.pth")
    (d / "config.json").write_text(json.dumps(LLM_CONFIG))
    (d / "README.md").write_text("# Fish Audio S2 Pro\n")
    (d / "tokenizer.json").write_text("{}")


def test_repo_directory_as_path(tmp_path, s2_golden):
    lay_out_repo(tmp_path / "s2-pro")
    codec = audiotok.load(tmp_path / "s2-pro")
    assert codec.source.endswith("codec.pth")
    codes = codec.encode(s2_golden["audio_30000"])
    assert codes.tokens[0].tolist() == s2_golden["codes_30000"].tolist()


def _run(code, env_extra):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **env_extra}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)


def test_name_resolves_through_hub_cache(tmp_path):
    cache = tmp_path / "cache"
    repo = cache / "models--fishaudio--s2-pro"
    lay_out_repo(repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    code = (
        "import audiotok, numpy as np\n"
        "c = audiotok.load('s2-pro')\n"
        f"z = np.load(r'{S2_TINY / 'expected_pth.npz'}')\n"
        "ok = (c.encode(z['audio_30000']).tokens[0].numpy() == z['codes_30000']).all()\n"
        "print(c.source, bool(ok))\n"
    )
    out = _run(code, {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(repo / "snapshots" / COMMIT / "codec.pth"), "True"]
    assert "Fish Audio Research License" in out.stderr


def cache_repo(cache, repo_id: str, files: dict):
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name, source in files.items():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)  # ("encoder/x.pt")
        shutil.copy(source, snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


def test_xcodec2_names_resolve_through_hub_cache(tmp_path):
    xc = S2_TINY.parent / "xcodec2_tiny"
    cache = tmp_path / "cache"
    hf = cache_repo(cache, "HKUSTAudio/xcodec2-hf", {
        "model.safetensors": xc / "hf" / "model.safetensors",
        "config.json": xc / "hf" / "config.json"})
    original = cache_repo(cache, "HKUSTAudio/xcodec2", {
        "model.safetensors": xc / "original" / "model.safetensors",
        "config.json": xc / "original" / "config.json"})
    code = (
        "import audiotok, numpy as np\n"
        f"z = np.load(r'{xc / 'cases.npz'}')\n"
        "for name in ('xcodec2-hf', 'xcodec2'):\n"
        "    c = audiotok.load(name)\n"
        "    ok = (c.encode(z['n8000_waveform']).tokens[0].numpy() == z['n8000_codes'][0]).all()\n"
        "    print(c.source, bool(ok))\n"
    )
    out = _run(code, {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(hf / "model.safetensors"), "True",
                                  str(original / "model.safetensors"), "True"]
    assert out.stderr.count("CC-BY-NC-4.0") == 1


def test_offline_without_cache_says_what_to_do(tmp_path):
    code = "import audiotok\naudiotok.load('s2-pro')\n"
    out = _run(code, {"HF_HUB_CACHE": str(tmp_path / "empty"), "HF_HOME": str(tmp_path)})
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert "ModelNotFoundError" in last and "fishaudio/s2-pro" in last
    assert "--model PATH" in last


def test_unknown_name():
    with pytest.raises(ModelNotFoundError, match="neither an existing file or directory"):
        audiotok.load("no-such-model")


def load_through_cache(tmp_path, repo_id: str, folder, name: str, audio, rate: int,
                       options: str = ""):
    """`audiotok.load(name + options)` in a fresh offline process, from a hub cache holding
    `folder`'s model.safetensors and config.json as `repo_id`: (its stdout source, stderr,
    the codes of `audio` [N] at `rate`)."""
    import numpy as np

    snapshot = cache_repo(tmp_path / "cache", repo_id, {
        "model.safetensors": folder / "model.safetensors",
        "config.json": folder / "config.json"})
    np.save(tmp_path / "x.npy", np.asarray(audio, np.float32))
    code = ("import audiotok, numpy as np\n"
            f"c = audiotok.load({name!r}{options})\n"
            f"t = c.encode(np.load(r'{tmp_path / 'x.npy'}'), {rate}).tokens\n"
            f"np.save(r'{tmp_path / 'codes.npy'}', t.numpy())\n"
            "print(c.source)\n")
    out = _run(code, {"HF_HUB_CACHE": str(tmp_path / "cache"),
                      "HF_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(snapshot / "model.safetensors")]
    return out.stderr, np.load(tmp_path / "codes.npy")
