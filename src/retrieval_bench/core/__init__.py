"""The ground layer: errors, files, the stage command line, paths, params, locking, endpoint
trust, and the shapes every layer above shares (question sets, relevance, the run table)."""
