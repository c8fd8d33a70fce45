"""The ``bayescal`` command line (a thin layer over the library)."""

from __future__ import annotations

import argparse
import sys


def _demo(args: argparse.Namespace) -> int:
    from bayescal.datasets import make_dirgen
    from bayescal.maps import dirgen_map
    from bayescal.metrics import classwise_ece, expected_calibration_error, log_loss

    q, y, alpha, pi = make_dirgen(args.n, args.k, rng=args.seed)
    rows = [("uncalibrated", q), ("true DirGen map", dirgen_map(q, alpha, pi))]
    print(f"{'method':<20}{'log-loss':>10}{'ECE':>8}{'cw-ECE':>8}")
    for name, p in rows:
        print(
            f"{name:<20}{log_loss(y, p):>10.4f}{expected_calibration_error(y, p):>8.4f}"
            f"{classwise_ece(y, p):>8.4f}"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bayescal", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job on a built-in default")
    demo.add_argument("--n", type=int, default=5000)
    demo.add_argument("--k", type=int, default=4)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bayescal`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
