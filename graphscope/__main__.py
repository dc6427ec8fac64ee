import sys

from graphscope.cli.main import main

sys.exit(main())
