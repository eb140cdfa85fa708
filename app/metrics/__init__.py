"""metrics domain."""
