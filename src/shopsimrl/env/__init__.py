"""env package."""
