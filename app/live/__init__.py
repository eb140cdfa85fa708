"""live domain."""
