"""Deployment runtimes (converted artifacts); imported only inside worker processes."""
