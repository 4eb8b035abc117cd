"""Fake provider servers: real HTTP on 127.0.0.1 that the real client libraries talk to."""
