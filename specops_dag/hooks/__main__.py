"""`python -m specops_dag.hooks EVENT`: the hooks without the console script."""

import sys

from specops_dag.hooks import main

sys.exit(main())
