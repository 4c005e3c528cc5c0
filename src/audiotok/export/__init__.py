"""Export to other runtimes: ONNX graphs (`export_onnx`), codec GGUF for s2.cpp (`export_gguf`),
and language-model token ids (`audiotok.export.llm`). Importing this package imports no torch."""


def __getattr__(name: str):
    if name == "export_gguf":
        from .gguf import export_gguf

        return export_gguf
    if name == "export_onnx":
        from .onnx import export_onnx

        return export_onnx
    raise AttributeError(f"module 'audiotok.export' has no attribute {name!r}")


__all__ = ["export_gguf", "export_onnx"]
