import sys

from workloads.runner import main

sys.exit(main())
