"""Floor 4, running requests: tasks (a prompt and its reply parser, jobs), the sync and batch
runners, which runner and its one-line stops (runner), what a run did and its bar (progress), and
paid, the one entry point for paid work. Stands on every room below."""
