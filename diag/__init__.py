"""diag: root causes, evidence, memory arithmetic and flag fixes for SGLang server failures."""
__version__ = "0.1.0"
