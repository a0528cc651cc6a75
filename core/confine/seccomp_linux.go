package confine

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter. Its default is to allow: Landlock does the files,
// the filter takes away what Landlock does not cover. Every denial
// returns an error (the handler sees a failed call, not a crash), but a
// system call of another architecture (a 32-bit call from a 64-bit
// process, which the filter below could not read correctly) kills the
// process.

// denied are the system calls that fail with EPERM, whatever their
// arguments. Names the architecture lacks (iopl on arm64) are skipped.
var denied = []struct {
	names []string
	why   string
}{
	{[]string{"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "process_mrelease",
		"pidfd_getfd", "kcmp", "get_robust_list"}, "reach into another process"},
	{[]string{"bpf", "perf_event_open", "userfaultfd", "fanotify_init"}, "kernel interfaces with a history of privilege escalations"},
	{[]string{"keyctl", "add_key", "request_key"}, "the kernel keyrings hold the user's other secrets"},
	{[]string{"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "open_tree_attr",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"}, "mounts"},
	{[]string{"setns", "unshare"}, "namespaces (clone's CLONE_NEW* flags below)"},
	{[]string{"open_by_handle_at", "name_to_handle_at"}, "file handles open files by inode, past Landlock"},
	{[]string{"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
		"swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "sethostname", "setdomainname",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm", "vhangup",
		"lookup_dcookie", "nfsservctl", "uselib"}, "the system's, not a plugin's (they matter when the core runs as root)"},
}

// unavailable are the system calls that fail with ENOSYS, so that
// libraries fall back: clone3 (its flags are behind a pointer the filter
// cannot read; glibc falls back to clone) and io_uring (its operations,
// sockets included, bypass the filter).
var unavailable = []string{"clone3", "io_uring_setup", "io_uring_enter", "io_uring_register"}

// cloneNewFlags are clone's CLONE_NEW* flags (CLONE_NEWTIME is clone3's
// only): a new namespace of any kind.
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// personality flags that weaken the process's own memory protection.
const personalityUnsafe = 0x0100000 | 0x0400000 // MMAP_PAGE_ZERO, READ_IMPLIES_EXEC

// The ioctl and fcntl commands the filter refuses (low 32 bits
// compared: the kernel reads them as unsigned int, so high bits set by a
// caller must not slip them past the filter).
const (
	tiocsti    = 0x5412 // push input into the terminal: keystrokes to whoever reads it
	tioclinux  = 0x541c // the Linux console's equivalent
	fSetown    = 8      // F_SETOWN: SIGIO and SIGURG to another process
	fSetownEx  = 15     // F_SETOWN_EX
	arg1Offset = 24     // seccomp_data.args[1]
)

// filterTarget is the process the filter is for: its pid (the
// launcher's, which the handler keeps), whether it leads its own process
// group (the core starts it with Setpgid), and whether Landlock scopes
// signals (ABI ≥ 6); without that scope the filter confines them.
type filterTarget struct {
	pid          int
	ownGroup     bool
	scopeSignals bool
}

// seccompProgram assembles the filter for t on this architecture.
func seccompProgram(t filterTarget) ([]bpf.Instruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: filterGroups(info, t)}
	body, err := policy.Assemble() // for this architecture, which info is
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	pre, err := prefix(info)
	if err != nil {
		return nil, err
	}
	return append(pre, body...), nil
}

// filterGroups are the filter's rules for t, with the system call names
// of the architecture info (go-seccomp-bpf refuses a name the
// architecture lacks).
func filterGroups(info *arch.Info, t filterTarget) []seccomp.SyscallGroup {
	have := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if _, ok := info.SyscallNames[n]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	errno := func(e unix.Errno) seccomp.Action { return seccomp.ActionErrno | seccomp.Action(e) }
	ne := func(arg uint32, v uint64) seccomp.Condition {
		return seccomp.Condition{Argument: arg, Operation: seccomp.NotEqual, Value: v}
	}
	pid := uint64(t.pid)
	// notSelf: the pid argument arg is neither 0 (the caller) nor its pid.
	notSelf := func(arg uint32) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{ne(arg, 0), ne(arg, pid)}
	}
	cond := func(name string, c ...seccomp.Condition) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: name, Conditions: c}
	}

	var perm []string
	for _, d := range denied {
		perm = append(perm, have(d.names...)...)
	}
	groups := []seccomp.SyscallGroup{
		// No socket of its own: every family, AF_UNIX included, so no
		// connect(2) to a pathname socket (the control socket, D-Bus,
		// docker.sock), which Landlock below ABI 9 does not cover; and no
		// reconnecting an inherited one.
		{Names: have("socket", "connect"), Action: errno(unix.EACCES)},
		// Socket pairs: AF_UNIX stream or seqpacket only. A datagram
		// socket could sendto(2) any pathname datagram socket (type bit
		// 2 is set for SOCK_DGRAM and SOCK_RAW, which AF_UNIX maps to it).
		{NamesWithCondtions: []seccomp.NameWithConditions{
			cond("socketpair", ne(0, unix.AF_UNIX)),
			cond("socketpair", seccomp.Condition{Argument: 1, Operation: seccomp.BitsSet, Value: 0x2}),
		}, Action: errno(unix.EACCES)},
		{Names: have(unavailable...), Action: errno(unix.ENOSYS)},
		{Names: perm, Action: errno(unix.EPERM)},
		{NamesWithCondtions: []seccomp.NameWithConditions{
			cond("clone", seccomp.Condition{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNewFlags}),
			cond("personality", seccomp.Condition{Argument: 0, Operation: seccomp.BitsSet, Value: personalityUnsafe},
				ne(0, 0xffffffff)),
			// Another process's limits, priority, CPUs or memory: only
			// its own (0 or its pid). Landlock's scopes do not cover
			// these, and the core runs as the same user.
			{Name: "prlimit64", Conditions: notSelf(0)},
			{Name: "sched_setaffinity", Conditions: notSelf(0)},
			{Name: "sched_setscheduler", Conditions: notSelf(0)},
			{Name: "sched_setparam", Conditions: notSelf(0)},
			{Name: "sched_setattr", Conditions: notSelf(0)},
			{Name: "migrate_pages", Conditions: notSelf(0)},
			{Name: "move_pages", Conditions: notSelf(0)},
			cond("setpriority", ne(0, unix.PRIO_PROCESS)),
			{Name: "setpriority", Conditions: notSelf(1)},
			cond("ioprio_set", ne(0, 1)), // IOPRIO_WHO_PROCESS
			{Name: "ioprio_set", Conditions: notSelf(1)},
		}, Action: errno(unix.EPERM)},
	}
	if !t.scopeSignals {
		groups = append(groups, signalGroup(t, errno(unix.EPERM)))
	}
	return groups
}

// signalGroup confines signals when Landlock cannot (ABI < 6): kill(2)
// only to the process itself or, when it leads its own group, to that
// group (0 or -pid, in either width a caller may pass); the thread
// signals and pidfd_open only within the process. A pidfd can then name
// only the process and its own children.
func signalGroup(t filterTarget, action seccomp.Action) seccomp.SyscallGroup {
	pid := uint64(t.pid)
	ne := func(arg uint32, v uint64) seccomp.Condition {
		return seccomp.Condition{Argument: arg, Operation: seccomp.NotEqual, Value: v}
	}
	kill := seccomp.ArgumentConditions{ne(0, pid)}
	if t.ownGroup {
		neg := -int64(t.pid)
		kill = append(kill, ne(0, 0), ne(0, uint64(neg)), ne(0, uint64(uint32(int32(neg)))))
	}
	g := seccomp.SyscallGroup{Action: action, NamesWithCondtions: []seccomp.NameWithConditions{{Name: "kill", Conditions: kill}}}
	for _, name := range []string{"tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open"} {
		g.NamesWithCondtions = append(g.NamesWithCondtions, seccomp.NameWithConditions{
			Name: name, Conditions: seccomp.ArgumentConditions{ne(0, pid)}})
	}
	return g
}

// prefix comes before go-seccomp-bpf's program: it kills a call of
// another architecture (go-seccomp-bpf's own check lets those through
// to the default, allow) and refuses ioctl TIOCSTI/TIOCLINUX and fcntl
// F_SETOWN/F_SETOWN_EX comparing the command's low 32 bits only.
func prefix(info *arch.Info) ([]bpf.Instruction, error) {
	type check struct {
		nr   uint32
		vals []uint32
	}
	var checks []check
	for _, c := range []struct {
		names []string
		vals  []uint32
	}{
		{[]string{"ioctl"}, []uint32{tiocsti, tioclinux}},
		{[]string{"fcntl", "fcntl64"}, []uint32{fSetown, fSetownEx}},
	} {
		for _, n := range c.names {
			if nr, ok := info.SyscallNames[n]; ok {
				checks = append(checks, check{uint32(nr), c.vals})
			}
		}
	}
	off := uint32(arg1Offset)
	if !littleEndian() {
		off += 4
	}
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}
	// Each check: load nr; not ours → next check; load arg1's low half;
	// each value → deny (the RetConstant after the last check).
	size := 0
	for _, c := range checks {
		size += 3 + len(c.vals)
	}
	denyAt := len(p) + size + 1 // after the checks and the jump over deny
	for _, c := range checks {
		p = append(p,
			bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.nr, SkipFalse: uint8(1 + len(c.vals))},
			bpf.LoadAbsolute{Off: off, Size: 4},
		)
		for _, v := range c.vals {
			skip := denyAt - len(p) - 1
			if skip > 255 {
				return nil, fmt.Errorf("seccomp: prefix too long")
			}
			p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(skip)})
		}
	}
	p = append(p,
		bpf.Jump{Skip: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(unix.EPERM)},
	)
	return p, nil
}

// littleEndian reports the byte order seccomp_data's arguments are in.
func littleEndian() bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return b[0] == 1
}

// loadSeccomp installs prog on the calling thread, the one that execs the
// handler. no_new_privs must be set already.
func loadSeccomp(prog []bpf.Instruction) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("seccomp: assemble: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// The calling thread only, as Landlock: it execs the handler.
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: load the filter: %w", errno)
	case r != 0:
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}
