"""The `laredo` command line: operators' and scripts' access to the OAM and Query services."""

import os
import sys

if "grpc" not in sys.modules:
    # grpc's core logs a TLS handshake failure on stderr in its own format before the CLI explains it; run as
    # the console script (the first to load grpc), the CLI keeps stderr to its own messages unless the user
    # asks grpc for logs with GRPC_VERBOSITY.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
