"""`retrieval-bench compare`: its inputs (runs at revisions), its outcome and its report."""
