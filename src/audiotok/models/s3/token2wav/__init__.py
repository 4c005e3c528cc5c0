"""S3 tokens back to audio: CosyVoice 2's token-to-audio model (Chatterbox's S3Gen shares it):
the flow (flow.py: encoder.py, estimator.py), the HiFT vocoder (hift.py), the speaker encoder
(campplus.py), voices (voice.py) and checkpoint layouts (weights.py); model.py joins them."""
