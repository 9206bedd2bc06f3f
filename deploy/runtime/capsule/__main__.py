"""`python3 /opt/tuneplane/capsule`: the job runner, from the capsule directory.

Running a directory puts it first on sys.path without touching PYTHONPATH, so the
runner imports this `tuneplane` while train.sh's own PYTHONPATH stays as the image set
it (external recipes) or gets the capsule prepended by the runner (platform recipes).
"""

import sys

from tuneplane.runner.job import main

sys.exit(main())
