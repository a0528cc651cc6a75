package confine

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData lays out struct seccomp_data for x/net/bpf's VM, which
// loads 32-bit words big-endian: each word is written big-endian where
// the kernel would read it natively, so both read the same values.
func seccompData(nr int, archID uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], archID)
	for i, a := range args {
		off := 16 + 8*i
		lo, hi := off, off+4
		if !littleEndian() {
			lo, hi = hi, lo
		}
		binary.BigEndian.PutUint32(b[lo:], uint32(a))
		binary.BigEndian.PutUint32(b[hi:], uint32(a>>32))
	}
	return b
}

// TestSeccompProgram runs the filter in a BPF interpreter for calls and
// arguments the probes cannot make (other architectures, high bits in
// 32-bit arguments, other pids), each next to the same call allowed.
func TestSeccompProgram(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	const pid = 4242
	neg := uint64(0xffffffffffffffff - pid + 1) // -pid, sign-extended
	allow := uint32(seccomp.ActionAllow)
	errno := func(e unix.Errno) uint32 { return uint32(seccomp.ActionErrno) | uint32(e) }
	kill := uint32(seccomp.ActionKillProcess)
	nr := func(name string) int {
		n, ok := info.SyscallNames[name]
		if !ok {
			t.Fatalf("%s: no such system call on %s", name, info.Name)
		}
		return n
	}
	type call struct {
		name   string
		args   []uint64
		scoped bool // Landlock scopes signals (ABI ≥ 6)
		want   uint32
	}
	calls := []call{
		{"read", nil, true, allow},
		{"socket", []uint64{unix.AF_INET, unix.SOCK_STREAM}, true, errno(unix.EACCES)},
		{"socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM}, true, errno(unix.EACCES)},
		{"connect", []uint64{3}, true, errno(unix.EACCES)},
		{"socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, true, allow},
		{"socketpair", []uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET}, true, allow},
		{"socketpair", []uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, true, errno(unix.EACCES)},
		{"socketpair", []uint64{unix.AF_UNIX, unix.SOCK_RAW}, true, errno(unix.EACCES)},
		{"socketpair", []uint64{unix.AF_INET, unix.SOCK_STREAM}, true, errno(unix.EACCES)},
		{"socketpair", []uint64{1<<32 | unix.AF_UNIX, unix.SOCK_STREAM}, true, errno(unix.EACCES)},
		{"clone3", nil, true, errno(unix.ENOSYS)},
		{"io_uring_setup", nil, true, errno(unix.ENOSYS)},
		{"clone", []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, true, allow},
		{"clone", []uint64{uint64(unix.SIGCHLD) | unix.CLONE_NEWUSER}, true, errno(unix.EPERM)},
		{"clone", []uint64{uint64(unix.SIGCHLD) | unix.CLONE_NEWNET}, true, errno(unix.EPERM)},
		{"unshare", []uint64{unix.CLONE_NEWNS}, true, errno(unix.EPERM)},
		{"ptrace", nil, true, errno(unix.EPERM)},
		{"bpf", nil, true, errno(unix.EPERM)},
		{"mount", nil, true, errno(unix.EPERM)},
		{"open_by_handle_at", nil, true, errno(unix.EPERM)},
		{"personality", []uint64{0xffffffff}, true, allow},
		{"personality", []uint64{0x0040000}, true, allow}, // ADDR_NO_RANDOMIZE, as the race detector sets
		{"personality", []uint64{0x0400000}, true, errno(unix.EPERM)},
		{"prlimit64", []uint64{0, unix.RLIMIT_NOFILE}, true, allow},
		{"prlimit64", []uint64{pid, unix.RLIMIT_NOFILE}, true, allow},
		{"prlimit64", []uint64{1, unix.RLIMIT_NOFILE}, true, errno(unix.EPERM)},
		{"setpriority", []uint64{unix.PRIO_PROCESS, 0}, true, allow},
		{"setpriority", []uint64{unix.PRIO_PROCESS, 1}, true, errno(unix.EPERM)},
		{"setpriority", []uint64{unix.PRIO_USER, 0}, true, errno(unix.EPERM)},
		{"sched_setaffinity", []uint64{0}, true, allow},
		{"sched_setaffinity", []uint64{1}, true, errno(unix.EPERM)},
		// 32-bit commands: the high half must not hide them.
		{"ioctl", []uint64{0, unix.TIOCSTI}, true, errno(unix.EPERM)},
		{"ioctl", []uint64{0, 1<<32 | unix.TIOCSTI}, true, errno(unix.EPERM)},
		{"ioctl", []uint64{0, unix.TIOCGWINSZ}, true, allow},
		{"fcntl", []uint64{3, unix.F_SETOWN}, true, errno(unix.EPERM)},
		{"fcntl", []uint64{3, 1<<32 | unix.F_SETOWN_EX}, true, errno(unix.EPERM)},
		{"fcntl", []uint64{3, unix.F_SETFD}, true, allow},
		// Signals: Landlock's scope (ABI ≥ 6) leaves them to it ...
		{"kill", []uint64{1, 0}, true, allow},
		// ... else only the process and its own group.
		{"kill", []uint64{1, 0}, false, errno(unix.EPERM)},
		{"kill", []uint64{0xffffffffffffffff, 9}, false, errno(unix.EPERM)}, // -1: every process
		{"kill", []uint64{pid, 0}, false, allow},
		{"kill", []uint64{0, 0}, false, allow},
		{"kill", []uint64{neg, 0}, false, allow},
		{"kill", []uint64{uint64(uint32(neg)), 0}, false, allow},
		{"kill", []uint64{1<<32 | pid, 0}, false, errno(unix.EPERM)},
		{"tgkill", []uint64{pid, 4243, 23}, false, allow},
		{"tgkill", []uint64{1, 1, 23}, false, errno(unix.EPERM)},
		{"tkill", []uint64{1, 9}, false, errno(unix.EPERM)},
		{"rt_sigqueueinfo", []uint64{1, 9}, false, errno(unix.EPERM)},
		{"pidfd_open", []uint64{pid, 0}, false, allow},
		{"pidfd_open", []uint64{1, 0}, false, errno(unix.EPERM)},
	}
	progs := map[bool]*bpf.VM{}
	for _, scoped := range []bool{true, false} {
		prog, err := seccompProgram(filterTarget{pid: pid, ownGroup: true, scopeSignals: scoped})
		if err != nil {
			t.Fatal(err)
		}
		if len(prog) > 4096 {
			t.Fatalf("%d instructions: over the kernel's 4096", len(prog))
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatal(err)
		}
		progs[scoped] = vm
		// Another architecture is killed, whatever the call.
		other := uint32(arch.I386.ID)
		if info.ID == arch.I386.ID {
			other = uint32(arch.X86_64.ID)
		}
		calls = append(calls, call{fmt.Sprintf("read/%d", other), nil, scoped, kill})
	}
	for _, c := range calls {
		t.Run(fmt.Sprintf("%s%v/scoped=%v", c.name, c.args, c.scoped), func(t *testing.T) {
			id := uint32(info.ID)
			name := c.name
			if c.want == kill {
				fmt.Sscanf(c.name, "read/%d", &id)
				name = "read"
			}
			got, err := progs[c.scoped].Run(seccompData(nr(name), id, c.args...))
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != c.want {
				t.Errorf("filter returns %#x, want %#x", got, c.want)
			}
		})
	}
	// Without its own process group, the group is not its own.
	prog, err := seccompProgram(filterTarget{pid: pid, ownGroup: false, scopeSignals: false})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []uint64{0, neg} {
		if got, _ := vm.Run(seccompData(nr("kill"), uint32(info.ID), target, 0)); uint32(got) != errno(unix.EPERM) {
			t.Errorf("kill(%d) outside its own group: %#x, want EPERM", int64(target), got)
		}
	}
	if got, _ := vm.Run(seccompData(nr("kill"), uint32(info.ID), pid, 0)); uint32(got) != allow {
		t.Errorf("kill(self) outside its own group: %#x, want allow", got)
	}
}

// TestSeccompNames checks the filter's rules against the system call
// tables of both architectures Carapace ships for: go-seccomp-bpf
// refuses a name the running one lacks, and the launcher would then fail
// (closed) on every start. The program itself is assembled for the
// running architecture only (TestSeccompProgram).
func TestSeccompNames(t *testing.T) {
	for _, info := range []*arch.Info{arch.X86_64, arch.AARCH64} {
		for _, scoped := range []bool{true, false} {
			for _, g := range filterGroups(info, filterTarget{pid: 1, ownGroup: true, scopeSignals: scoped}) {
				names := slices.Clone(g.Names)
				for _, c := range g.NamesWithCondtions {
					names = append(names, c.Name)
				}
				for _, n := range names {
					if _, ok := info.SyscallNames[n]; !ok {
						t.Errorf("%s: no system call %q", info.Name, n)
					}
				}
			}
		}
		if _, err := prefix(info); err != nil {
			t.Errorf("%s: %v", info.Name, err)
		}
	}
	// The control: a name arm64 lacks is caught.
	if _, ok := arch.AARCH64.SyscallNames["iopl"]; ok {
		t.Error("arm64 has iopl: the table check cannot tell")
	}
}
