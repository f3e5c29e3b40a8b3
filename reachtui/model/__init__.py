"""Everything that imports torch/transformers lives here, imported lazily; nothing else does."""
