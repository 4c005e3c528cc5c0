"""The kernel forms layers run, and the per-CPU rules that choose them: the one place where
audiotok's speed work lives. Layers (nn/) and models call these functions and read like the
math; each form computes the same sums as the plain torch call (rounding aside).

ruleset.py: which form runs where, per CPU (defaults measured on the CPUs the project has run on;
`audiotok bench --kernels` measures this machine's). products.py: x @ W^T. convs.py:
convolutions, transposed convolutions and their streamed forms. attention.py: full attention
and a streaming step's. norms.py: normalisations. derivations.py: tensors derived once from a
weight (packed copies, polyphase weights, search matrices).
"""

from .attention import few_queries, few_query_attention, full_attention
from .convs import (
    cat_time,
    channels_last,
    channels_last_fits,
    conv1d,
    conv1d_padded,
    conv2d_nwc,
    conv_transpose1d_padded,
    is_channels_last,
    polyphase_transposed,
    reflect_pad,
    short_conv1d,
    transposed_new_samples,
)
from .derivations import derived
from .norms import group_norm
from .products import cpu_float32, linear, onednn_rule, packed_weights, rule_product
from .ruleset import Rules, rules, use_rules

__all__ = [
    "Rules", "cat_time", "channels_last", "channels_last_fits", "conv1d", "conv1d_padded",
    "conv2d_nwc", "conv_transpose1d_padded", "cpu_float32", "derived", "few_queries",
    "few_query_attention", "full_attention", "group_norm", "is_channels_last", "linear",
    "onednn_rule", "packed_weights", "polyphase_transposed", "reflect_pad", "rule_product",
    "rules", "short_conv1d", "transposed_new_samples", "use_rules",
]
