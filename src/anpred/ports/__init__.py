"""A user's own port of the reference module to another library, run as a participant."""
