"""Calendar providers: one module per provider, each with the same ``fetch``."""
