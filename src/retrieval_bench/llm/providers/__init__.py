"""Floor 2, the providers: the Provider interface (base), one module per API (anthropic,
anthropic_batch, openai_compatible), the registry by generate.provider name, the reply schema sent
with a request, tokens counted without a tokenizer, and the deterministic stub server. Stands on
transport/."""
