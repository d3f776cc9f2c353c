"""``python -m tracking compare``: EKF vs UKF consistency on range-bearing tracking."""

from tracking.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
