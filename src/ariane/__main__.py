"""``python -m ariane``: the same as the ``ariane`` console script."""

import sys

from ariane import cli

if __name__ == "__main__":
    sys.exit(cli.main())
