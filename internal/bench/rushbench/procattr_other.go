//go:build !linux

package rushbench

import "os/exec"

// dieWithParent does nothing where the kernel offers no parent-death signal: a child outlives a
// bench killed by SIGKILL there.
func dieWithParent(*exec.Cmd) {}
