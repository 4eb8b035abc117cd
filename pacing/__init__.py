"""Send and request rates shared by every process, through PostgreSQL."""
