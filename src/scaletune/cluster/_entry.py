"""A worker process's entry point: `python -m scaletune.cluster._entry FD PARENT_PID`.

FD is the worker's end of a socketpair with its controller. A fresh interpreter, not
multiprocessing's spawn, so a worker never re-imports the controller's __main__ (a script
without an `if __name__ == "__main__"` guard still works). Nothing imports this module.
"""

import sys
from multiprocessing.connection import Connection

from scaletune.cluster._process import serve

if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])), int(sys.argv[2]))
