"""The planning layer: questions asked over many predictions. sweeps, the fleet planner, device comparison,
levers, static batching curves, the highest arrival rate within limits (rate_search) and product figures.
Imports serving, physics and below. See docs/architecture.md.
"""
