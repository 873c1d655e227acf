"""The golden set: questions anchored to evidence, their selection, cache and echo gauge."""
