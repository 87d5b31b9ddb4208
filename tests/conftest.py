"""Suite-wide isolation: a developer's own per-user caches (the `edgecnn tune` kernel choices, saved
device plans) must not change which kernels the tests exercise."""

import os
import tempfile

os.environ["EDGECNN_CACHE_DIR"] = tempfile.mkdtemp(prefix="edgecnn-test-cache-")
