"""fastcal: one-pass calibration metrics."""
__version__ = "0.1.0"
