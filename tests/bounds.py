"""Bounds on float32 audio that tests compare against, each with its reason.

A bound must hold on every CPU the suite runs on (AMD EPYC, Intel Xeon), under either product
rule (nn/kernels) and at 1 or 2 threads: it sits well above the rounding of the kernels, never
at one machine's. The measured values in the reasons come from the whole suite run under both
rules at 1 and 2 threads.
"""

# Decoded audio against a reference package's decode of the same codes: the project's parity
# rule (the two sides run different code, so their kernels and summation orders differ).
AUDIO_PARITY = 1e-4

# audiotok's own model in another arrangement: a stream against the offline decode, an item in
# a batch against the item alone, the server, an export or CUDA graphs against the library. The
# arithmetic is the same; the kernel forms differ with the shapes (few-row products in a push,
# whole-signal convolutions offline), so only rounding differs: at most 2.1e-6 measured.
SAME_MODEL = 1e-5

# The same layers over the same data, only grouped otherwise (segments' LSTMs as one batch,
# pieces of one signal, windows of one encoder pass): at most 7e-8 measured.
ROUNDING = 1e-6
