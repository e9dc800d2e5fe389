"""Test-only module whose import starts a thread: a template that imported it must refuse to fork."""

import threading
import time

threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
