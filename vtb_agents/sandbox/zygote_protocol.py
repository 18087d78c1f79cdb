"""What the host (``forkserver.py``) and the fork server (``zygote.py``) agree on; standard
library only, because the zygote loads it by path inside its sandbox."""

from __future__ import annotations

import struct

FDS = 6
"""fds per fork request: ctl in, ctl out, stdout, stderr, the task's folder, the status socket."""
STATUS = struct.Struct(">i")
"""A worker's end on its status socket: its exit status (signal n as 128 + n)."""
HELLO = b"hello"
"""The task's first process says it on the status socket once it has its user namespace."""
GO = b"g"
"""The host's answer to the hello, once that process is in the task's memory cgroup."""
