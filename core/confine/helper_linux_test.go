package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The helper modes of the test binary (helperEnv).
const (
	helperProbe  = "probe"  // run the probes, report them on stdout
	helperLegacy = "legacy" // confine itself as on a kernel of Landlock ABI 5, then probe
	helperNoop   = "noop"   // exit 0 at once: the benchmark's handler
)

// probeEnv carries a probeSetup as JSON to the helper.
const probeEnv = "CONFINE_TEST_PROBE"

// probeSetup is what the test prepared for the probes.
type probeSetup struct {
	Canary   string // a file outside the policy (a stand-in for the user's home)
	ReadFile string // a file in a Read tree
	ReadDir  string // a Read tree, where writing must fail
	WriteDir string // a Write tree
	Unix     string // a pathname Unix socket the test listens on
	Abstract string // an abstract Unix socket the test listens on (no leading NUL)
	UDP      string // a UDP address the test listens on
	Parent   int    // the test's pid
	Policy   Policy // for the legacy mode, which confines itself
}

// probeResult is one line of the helper's output: a probe and its error
// ("" when the call succeeded), or the process's own facts.
type probeResult struct {
	Probe string `json:"probe"`
	Err   string `json:"err,omitempty"`
	// For the "self" line.
	Pid, Pgid, Pdeathsig int
	Status               map[string]string
}

// probes are the calls a confined handler must not be able to make (and
// two it must), each against what the test set up. Every one succeeds
// unconfined: the test runs them both ways.
var probes = []struct {
	name string
	run  func(s probeSetup) error
}{
	{"read-canary", func(s probeSetup) error { _, err := os.ReadFile(s.Canary); return err }},
	{"read-tree", func(s probeSetup) error { _, err := os.ReadFile(s.ReadFile); return err }},
	{"write-tree", func(s probeSetup) error {
		return os.WriteFile(filepath.Join(s.WriteDir, "written"), []byte("ok"), 0o600)
	}},
	{"write-read-tree", func(s probeSetup) error {
		return os.WriteFile(filepath.Join(s.ReadDir, "written"), []byte("no"), 0o600)
	}},
	{"list-etc", func(probeSetup) error { _, err := os.ReadDir("/etc"); return err }},
	{"socket-inet", func(probeSetup) error { return socketClose(unix.AF_INET, unix.SOCK_STREAM) }},
	{"socket-unix", func(probeSetup) error { return socketClose(unix.AF_UNIX, unix.SOCK_STREAM) }},
	{"connect-unix-path", func(s probeSetup) error { return connectUnix(s.Unix) }},
	{"connect-abstract", func(s probeSetup) error { return connectUnix("@" + s.Abstract) }},
	{"udp-send", func(s probeSetup) error {
		c, err := net.Dial("udp", s.UDP)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("out"))
		return err
	}},
	{"kill-parent", func(s probeSetup) error { return unix.Kill(s.Parent, 0) }},
	{"proc-parent-environ", func(s probeSetup) error {
		_, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.Parent))
		return err
	}},
	{"prlimit-parent", func(s probeSetup) error {
		var lim unix.Rlimit
		return unix.Prlimit(s.Parent, unix.RLIMIT_NOFILE, nil, &lim)
	}},
	{"ptrace-child", ptraceChild},
	{"clone-newuser", func(probeSetup) error {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		return cmd.Run()
	}},
	{"io-uring", func(probeSetup) error {
		var params [120]byte // struct io_uring_params
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		if e != 0 {
			return e
		}
		return unix.Close(int(fd))
	}},
	{"socketpair-dgram", func(probeSetup) error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	}},
	// Must work confined too.
	{"socketpair-unix", func(probeSetup) error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	}},
	{"inherited-socket", inheritedSocket},
	{"inherited-pipe", func(probeSetup) error {
		_, err := unix.Write(4, []byte("through the pipe\n"))
		return err
	}},
	{"signal-self", func(probeSetup) error { return unix.Kill(os.Getpid(), 0) }},
	{"signal-own-group", func(probeSetup) error { return unix.Kill(0, 0) }},
	{"exec-system", func(probeSetup) error { return exec.Command("/bin/true").Run() }},
}

// socketClose makes a socket and closes it.
func socketClose(family, typ int) error {
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// connectUnix connects a stream socket to addr ("@name" is abstract).
func connectUnix(addr string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: addr})
}

// ptraceChild seizes a child of its own (so that the control works
// without privileges under Yama's ptrace_scope 1) and lets it go.
func ptraceChild(probeSetup) error {
	cmd := exec.Command("/bin/sleep", "30")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the tracee: %w", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	runtime.LockOSThread() // the tracer is a thread
	defer runtime.UnlockOSThread()
	return unix.PtraceSeize(cmd.Process.Pid)
}

// inheritedSocket writes on fd 3, an inherited Unix socket, and passes
// the test a new socket pair's end over it (SCM_RIGHTS), then writes on
// the other end: the egress the SDK needs.
func inheritedSocket(probeSetup) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := unix.Sendmsg(3, []byte("fd"), unix.UnixRights(fds[1]), nil, 0); err != nil {
		return fmt.Errorf("sendmsg: %w", err)
	}
	if _, err := unix.Write(fds[0], []byte("through the passed socket\n")); err != nil {
		return fmt.Errorf("write on the pair: %w", err)
	}
	return nil
}

// startPdeathsig is the parent-death signal as the process started with,
// read while package initialization holds the main thread: the setting
// is the main thread's (a new thread starts without one).
var startPdeathsig = func() int {
	var sig int32
	if _, _, e := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0); e != 0 {
		return -1
	}
	return int(sig)
}()

// runHelper is the test binary as a handler.
func runHelper(mode string) int {
	if mode == helperNoop {
		return 0
	}
	var s probeSetup
	if err := json.Unmarshal([]byte(os.Getenv(probeEnv)), &s); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	out := json.NewEncoder(os.Stdout)
	switch mode {
	case helperProbe:
	case helperLegacy:
		// Launch as on a kernel without Landlock's scopes (ABI 5), where
		// the seccomp filter confines signals instead, and exec the probes.
		runtime.LockOSThread()
		if err := enforce(s.Policy, Support{OS: "linux", Landlock: landlockScoped - 1, Seccomp: true}); err != nil {
			fmt.Fprintln(os.Stderr, "helper: enforce:", err)
			return 2
		}
		var env []string
		for _, kv := range withoutOurs(os.Environ()) {
			if !strings.HasPrefix(kv, helperEnv+"=") {
				env = append(env, kv)
			}
		}
		env = append(env, helperEnv+"="+helperProbe)
		err := syscall.Exec(s.Policy.Exec, os.Args, env)
		fmt.Fprintln(os.Stderr, "helper: exec:", err)
		return 2
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
		return 2
	}
	for _, p := range probes {
		r := probeResult{Probe: p.name}
		if err := p.run(s); err != nil {
			r.Err = err.Error()
			var errno syscall.Errno
			if errors.As(err, &errno) {
				r.Err = fmt.Sprintf("%s (%d)", err, int(errno))
			}
		}
		if err := out.Encode(r); err != nil {
			return 2
		}
	}
	self := probeResult{Probe: "self", Pid: os.Getpid(), Status: map[string]string{}}
	self.Pgid, _ = unix.Getpgid(0)
	self.Pdeathsig = startPdeathsig
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		self.Err = err.Error()
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "NoNewPrivs" || k == "Seccomp" || k == "CapEff" || k == "CapBnd" || k == "CapPrm") {
			self.Status[k] = strings.TrimSpace(v)
		}
	}
	if err := out.Encode(self); err != nil {
		return 2
	}
	if _, ok := os.LookupEnv(envPolicy); ok {
		fmt.Fprintln(os.Stderr, "helper: the launcher's variable reached the handler")
		return 3
	}
	return 0
}
