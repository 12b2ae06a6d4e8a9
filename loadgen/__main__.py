"""`python -m loadgen` is the same as the `dsv4-qual` console script."""

from loadgen.cli import main

if __name__ == "__main__":
    main()
