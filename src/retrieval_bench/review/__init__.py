"""`retrieval-bench review`: people review a seeded sample of the golden set in a local page (the
question marked, the panel's pooled chunks graded 0-3), their clicks appended to data/reviews/
(goldenset.reviews); Label Studio export and import; Cohen's kappa of two reviewers."""
