"""Load audiotok's codec GGUF with a real s2.cpp build and compare with the reference.

Build s2.cpp (https://github.com/rodrigomatta/s2.cpp, checked at commit 2c33261 with its ggml
submodule at 57ea0bc) with this folder's driver added to its CMakeLists.txt:

    cp benchmarks/codecs/s2cpp/check_codec.cpp $S2CPP/
    printf 'add_executable(check_codec ${S2_CORE_SOURCES} check_codec.cpp)\\n%s\\n' \\
        's2_configure_target(check_codec)' >> $S2CPP/CMakeLists.txt
    cmake -S $S2CPP -B $S2CPP/build -DCMAKE_BUILD_TYPE=Release
    cmake --build $S2CPP/build --target check_codec -j2

then:

    python benchmarks/codecs/s2cpp/compare.py $S2CPP/build/check_codec

It exports the tiny test checkpoint (f16 and f32), has s2.cpp encode two golden signals and
decode their reference codes, and prints the token agreement and the largest audio differences
against the reference (float32 weights and f16-rounded weights), next to s2.cpp's own merged f16
golden file.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "s2_tiny"


def main() -> None:
    driver = Path(sys.argv[1])
    golden = np.load(DATA / "expected_pth.npz")
    golden16 = np.load(DATA / "expected_gguf_f16.npz")
    import audiotok
    from audiotok.models.s2.gguf import export_gguf

    codec = audiotok.load(DATA / "codec.pth")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = {f"audiotok {dt}": export_gguf(codec, tmp / f"codec_{dt}.gguf", dt)
                 for dt in ("f16", "f32")}
        files["s2.cpp's own merged f16 (golden)"] = DATA / "codec_merged_f16.gguf"
        print("| file | signal | s2.cpp tokens = reference | audio vs reference (f32 weights) "
              "| audio vs reference (f16 weights) |")
        print("|---|---|---|---|---|")
        for name, path in files.items():
            for n in (30000, 132377):
                codes = golden[f"codes_{n}"]
                golden[f"audio_{n}"].astype(np.float32).tofile(tmp / "audio.f32")
                codes.astype(np.int32).tofile(tmp / "codes.i32")
                r = subprocess.run([driver, path, tmp / "audio.f32", tmp / "codes.i32",
                                    str(codes.shape[1]), tmp / "out.i32", tmp / "out.f32"],
                                   capture_output=True, text=True)
                if r.returncode:
                    why = [line.split(": ", 1)[-1] for line in r.stderr.splitlines()
                           if "GGML_ASSERT" in line] or [f"exit status {r.returncode}"]
                    print(f"| {name} | {n} samples | fails: {why[0].strip()} | | |")
                    continue
                tokens = np.fromfile(tmp / "out.i32", np.int32).reshape(codes.shape[0], -1)
                audio = np.fromfile(tmp / "out.f32", np.float32)
                ref16 = golden16.get(f"decoded_{n}") if f"decoded_{n}" in golden16 else None
                d16 = f"{np.abs(audio - ref16).max():.2e}" if ref16 is not None else "-"
                print(f"| {name} | {n} samples | {(tokens == codes).mean():.2%} | "
                      f"{np.abs(audio - golden[f'decoded_{n}']).max():.2e} | {d16} |")


if __name__ == "__main__":
    main()
