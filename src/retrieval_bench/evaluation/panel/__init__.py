"""The panel's leaderboard: report and plots, costs and the Pareto front, the declared headline."""
