"""The LLM layer: providers behind one interface, cost, hygiene, rate limits, sync and batch runs."""
