"""Delivery channels: one small interface (``base.Sender``), one module each."""
