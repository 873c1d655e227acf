"""Load chunks: read a corpus and cut it into chunks."""
