//go:build !linux

package pluginhost

import "syscall"

// sysProcAttr puts the handler in a process group of its own. There is no
// Pdeathsig here: the SDK notices that the core died when its parent changes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
