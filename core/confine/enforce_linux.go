package confine

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// enforce confines the calling thread by p, with the kernel features of
// s: capabilities dropped (when it has any), no_new_privs and Landlock,
// then the seccomp filter. The caller holds its OS thread locked and execs
// the handler from it next: capabilities, Landlock domains and seccomp
// filters are per thread, and exec leaves the new program only the thread
// that called it. The launcher's other threads (the Go runtime's) run
// none of the handler's code and die at the exec.
func enforce(p Policy, s Support) error {
	if err := s.Missing(); err != nil {
		return err
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := restrictLandlock(s.Landlock, p.Rules()); err != nil {
		return err
	}
	pid := os.Getpid()
	pgid, err := unix.Getpgid(0)
	if err != nil {
		return fmt.Errorf("process group: %w", err)
	}
	prog, err := seccompProgram(filterTarget{pid: pid, ownGroup: pgid == pid, scopeSignals: s.Landlock >= landlockScoped})
	if err != nil {
		return err
	}
	if err := loadSeccomp(prog); err != nil {
		return err
	}
	// Check on this thread what the handler will inherit.
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 1 {
		return fmt.Errorf("no_new_privs is not set (%d, %v)", v, err)
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil || v != 2 {
		return fmt.Errorf("the seccomp filter is not in force (mode %d, %v)", v, err)
	}
	return nil
}

// dropCapabilities leaves the handler no capability, also when the core
// runs as root: ambient and inheritable sets cleared, the bounding set
// emptied, and SECBIT_NOROOT locked so that exec as uid 0 grants none.
// A process without capabilities has nothing to drop; with
// no_new_privs, exec cannot give it any.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	if data[0].Permitted == 0 && data[1].Permitted == 0 && data[0].Inheritable == 0 && data[1].Inheritable == 0 && os.Geteuid() != 0 {
		return nil
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != syscall.EINVAL {
		return fmt.Errorf("capabilities: clear the ambient set: %w", err)
	}
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if err == syscall.EINVAL {
			break // past the last capability this kernel knows
		}
		if err != nil {
			return fmt.Errorf("capabilities: drop %d from the bounding set: %w", c, err)
		}
	}
	const secure = 1<<0 | 1<<1 | 1<<6 | 1<<7 // SECBIT_NOROOT, SECBIT_NO_CAP_AMBIENT_RAISE, each locked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secure, 0, 0, 0); err != nil {
		return fmt.Errorf("capabilities: securebits: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capabilities: clear the inheritable set: %w", err)
	}
	return nil
}
