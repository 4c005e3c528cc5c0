// Loads a codec GGUF with s2.cpp's AudioCodec, encodes audio and decodes codes given as raw files.
// usage: check_codec MODEL.gguf AUDIO.f32 CODES.i32 FRAMES OUT_CODES.i32 OUT_AUDIO.f32
#include "s2_codec.h"
#include <cstdio>
#include <cstdlib>
#include <vector>

template <typename T> static std::vector<T> slurp(const char * path) {
    std::vector<T> v;
    FILE * f = std::fopen(path, "rb");
    if (!f) { std::perror(path); std::exit(3); }
    T x;
    while (std::fread(&x, sizeof(T), 1, f) == 1) v.push_back(x);
    std::fclose(f);
    return v;
}

template <typename T> static void spill(const char * path, const std::vector<T> & v) {
    FILE * f = std::fopen(path, "wb");
    std::fwrite(v.data(), sizeof(T), v.size(), f);
    std::fclose(f);
}

int main(int argc, char ** argv) {
    if (argc != 7) { std::fprintf(stderr, "usage: %s MODEL AUDIO CODES FRAMES OUT_CODES OUT_AUDIO\n", argv[0]); return 1; }
    s2::AudioCodec codec;
    if (!codec.load(argv[1])) { std::fprintf(stderr, "load failed\n"); return 2; }
    std::printf("loaded: rate %d, codebooks %d, samples per frame %d\n", codec.sample_rate(),
                codec.num_codebooks(), codec.samples_per_code_frame());
    auto audio = slurp<float>(argv[2]);
    std::vector<int32_t> codes_out;
    int32_t frames_out = 0;
    if (!codec.encode(audio.data(), (int32_t) audio.size(), 2, codes_out, frames_out)) { std::fprintf(stderr, "encode failed\n"); return 4; }
    spill(argv[5], codes_out);
    auto codes = slurp<int32_t>(argv[3]);
    std::vector<float> audio_out;
    if (!codec.decode(codes.data(), std::atoi(argv[4]), 2, audio_out)) { std::fprintf(stderr, "decode failed\n"); return 5; }
    spill(argv[6], audio_out);
    std::printf("encoded %d frames, decoded %zu samples\n", frames_out, audio_out.size());
    return 0;
}
