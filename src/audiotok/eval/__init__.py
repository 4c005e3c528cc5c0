"""Codec evaluation: reconstruction metrics, token statistics, reports (`audiotok eval`)."""

from .metrics import METRICS, measure
from .runner import EvalSettings, evaluate
from .tokens import TokenCounts, token_stats, tokens_folder_stats

__all__ = ["METRICS", "EvalSettings", "TokenCounts", "evaluate", "measure", "token_stats",
           "tokens_folder_stats"]
