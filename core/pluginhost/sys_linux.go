package pluginhost

import "syscall"

// sysProcAttr puts the handler in a process group of its own and has the
// kernel kill it if the core dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
