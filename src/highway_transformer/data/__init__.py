"""Data: corpora (downloaded and checked), vocabularies and subword tokenizers, the token
cache, language-model batching, music, images, synthetic and toy translation tasks, and the
trivial baselines every model must beat."""
