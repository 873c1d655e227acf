"""Scoring one system: every metric per question, the judged view, equal-context budgets, per-question tables and the Scoring settings."""
