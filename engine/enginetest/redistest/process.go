package redistest

import (
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// process is a server started in its own process group, so that a signal reaches it and anything
// it forks, and set to be killed by the kernel if the test binary dies first.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
}

func startProcess(cmd *exec.Cmd) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child ends, not the process: hold this
		// goroutine on its thread until the child is gone, so the Go scheduler cannot retire the
		// thread and take the server down early.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// signal sends sig to the process group.
func (p *process) signal(sig syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, sig) }

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// wait reports whether the process exited within d.
func (p *process) wait(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.exited:
		return true
	case <-timer.C:
		return false
	}
}
