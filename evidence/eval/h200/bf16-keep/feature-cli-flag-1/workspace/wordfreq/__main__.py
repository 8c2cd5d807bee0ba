import sys

from wordfreq.cli import main

sys.exit(main())
