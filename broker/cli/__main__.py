"""`python -m odradek.broker.cli ...`: how the tests and the image start a broker."""

import sys

from . import main

if __name__ == "__main__":  # not when a package walk imports every module
    sys.exit(main())
