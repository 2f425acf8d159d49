package rushbench

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill a child when the bench dies, even by SIGKILL: a server left
// behind would hold its port and its database.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
