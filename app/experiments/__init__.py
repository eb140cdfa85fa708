"""experiments domain."""
