"""The server process every fault-suite server class shares (faultrun.py's Redis, backends.py's
ZooKeeper, PostgreSQL and etcd): one process in self.proc, its pid, signalled and killed
(kill -9); stop() as the backends' servers stop (a server class may have its own)."""

import os
import signal


class ServerProcess:
    """One server process in self.proc: signalled, killed (kill -9) and stopped (resumed if
    paused, then killed: the run's data dies with it)."""

    def pid(self):
        return self.proc.pid

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except OSError:
                pass
            self.proc.kill()  # nothing to flush: the run's data dies with it
            self.proc.wait(timeout=10)
