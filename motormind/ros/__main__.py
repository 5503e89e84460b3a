import sys

from .nodes import main

sys.exit(main())
