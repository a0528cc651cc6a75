package confine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil"
	"golang.org/x/sys/unix"
)

// requireKernel fails the test under the project's CI, and skips it
// elsewhere, when this kernel cannot confine.
func requireKernel(t testing.TB) Support {
	t.Helper()
	s := Probe()
	if err := s.Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("%v (support: %s)", err, s))
	}
	return s
}

// probeFixture is what the probes run against: a policy for the test
// binary as a handler, files in and out of it, and sockets the test
// listens on.
type probeFixture struct {
	setup  probeSetup
	policy Policy
}

func newProbeFixture(t *testing.T) probeFixture {
	t.Helper()
	root := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"home", "plugin", "data"} {
		dirs[d] = filepath.Join(root, d)
		if err := os.Mkdir(dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	canary := filepath.Join(dirs["home"], "canary")
	readFile := filepath.Join(dirs["plugin"], "manifest.toml")
	for _, f := range []string{canary, readFile} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A short folder: a socket path has at most 107 bytes.
	sockDir, err := os.MkdirTemp("", "confine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "core.sock")
	abstract := fmt.Sprintf("carapace-confine-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	var listeners []interface{ Close() error }
	for _, addr := range []string{sock, "@" + abstract} {
		l, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, l)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listeners = append(listeners, udp)
	t.Cleanup(func() {
		for _, l := range listeners {
			l.Close()
		}
	})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Plugin: "probe", Exec: exe, Read: []string{dirs["plugin"]}, Write: []string{dirs["data"]}}
	return probeFixture{
		setup: probeSetup{Canary: canary, ReadFile: readFile, ReadDir: dirs["plugin"], WriteDir: dirs["data"],
			Unix: sock, Abstract: abstract, UDP: udp.LocalAddr().String(), Parent: os.Getpid(), Policy: p},
		policy: p,
	}
}

// probeRun is what one run of the helper reported and passed back.
type probeRun struct {
	results map[string]probeResult
	self    probeResult
	pid     int
	fromFd  string // read on the socket pair end the handler passed over fd 3
	fromFd4 string // read from the pipe on fd 4
}

// run starts the test binary as a probe handler in mode, confined by
// Wrap when wrap is set, with a socket on fd 3 and a pipe on fd 4, in its
// own process group with a parent-death signal, as the core starts one.
func (f probeFixture) run(t *testing.T, mode string, wrap bool) probeRun {
	t.Helper()
	setup, err := json.Marshal(f.setup)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(f.policy.Exec, "handler-argument")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, probeEnv+"="+string(setup))
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(pair[0]), "test end")
	theirs := os.NewFile(uintptr(pair[1]), "handler end")
	defer ours.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.ExtraFiles = []*os.File{theirs, pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if wrap {
		if err := Wrap(cmd, f.policy); err != nil {
			t.Fatalf("Wrap: %v", err)
		}
	}
	err = cmd.Start()
	theirs.Close()
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the handler (%s) failed: %v\nstdout:\n%s\nstderr:\n%s", mode, err, stdout.String(), stderr.String())
	}
	out := probeRun{results: map[string]probeResult{}, pid: cmd.Process.Pid}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var r probeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("helper output %q: %v", sc.Text(), err)
		}
		if r.Probe == "self" {
			out.self = r
		} else {
			out.results[r.Probe] = r
		}
	}
	out.fromFd = readPassed(t, ours)
	b, _ := bufioReadAll(pr)
	out.fromFd4 = b
	return out
}

// readPassed reads the socket the handler passed over the pair (if it
// did) and what it wrote there.
func readPassed(t *testing.T, c *os.File) string {
	t.Helper()
	conn, err := net.FileConn(c)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	uc := conn.(*net.UnixConn)
	_ = uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return ""
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return ""
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return ""
	}
	passed := os.NewFile(uintptr(fds[0]), "passed")
	defer passed.Close()
	s, _ := bufioReadAll(passed)
	return s
}

func bufioReadAll(f *os.File) (string, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.String(), err
}

// deniedConfined are the probes a confined handler must fail, with the
// errno the mechanism gives ("" any); every other probe must succeed.
var deniedConfined = map[string]string{
	"read-canary":         "(13)", // Landlock: EACCES
	"write-read-tree":     "(13)",
	"list-etc":            "(13)",
	"socket-inet":         "(13)", // seccomp: EACCES
	"socket-unix":         "(13)",
	"connect-unix-path":   "(13)",
	"connect-abstract":    "(13)",
	"udp-send":            "permission denied",
	"kill-parent":         "(1)", // Landlock's scope (or seccomp): EPERM
	"proc-parent-environ": "(13)",
	"prlimit-parent":      "(1)",
	"ptrace-child":        "(1)",
	"clone-newuser":       "operation not permitted",
	"io-uring":            "(38)", // ENOSYS
	"socketpair-dgram":    "(13)",
}

// check compares a run with what confined (or not) should give.
func (r probeRun) check(t *testing.T, confined bool) {
	t.Helper()
	if len(r.results) != len(probes) {
		t.Fatalf("%d probe results, want %d: %v", len(r.results), len(probes), r.results)
	}
	for _, p := range probes {
		got := r.results[p.name]
		want, deny := deniedConfined[p.name]
		switch {
		case confined && deny && got.Err == "":
			t.Errorf("%s: succeeded confined", p.name)
		case confined && deny && !strings.Contains(got.Err, want):
			t.Errorf("%s: failed with %q, want %q", p.name, got.Err, want)
		case (!confined || !deny) && got.Err != "":
			t.Errorf("%s: failed (confined %v): %s", p.name, confined, got.Err)
		}
	}
	s := r.self
	if s.Err != "" {
		t.Errorf("/proc/self/status: %s", s.Err)
	}
	if s.Pid != r.pid || s.Pgid != r.pid || s.Pdeathsig != int(syscall.SIGKILL) {
		t.Errorf("handler pid %d, pgid %d, parent-death signal %d; want the started pid %d for both and %d",
			s.Pid, s.Pgid, s.Pdeathsig, r.pid, syscall.SIGKILL)
	}
	if r.fromFd != "through the passed socket\n" {
		t.Errorf("over the passed socket: %q", r.fromFd)
	}
	if r.fromFd4 != "through the pipe\n" {
		t.Errorf("from the pipe: %q", r.fromFd4)
	}
	nnp, mode := "0", "0"
	if confined {
		nnp, mode = "1", "2"
	}
	if s.Status["NoNewPrivs"] != nnp || s.Status["Seccomp"] != mode {
		t.Errorf("status %v, want NoNewPrivs %s and Seccomp %s", s.Status, nnp, mode)
	}
	zero := "0000000000000000"
	if confined && (s.Status["CapEff"] != zero || s.Status["CapBnd"] != zero || s.Status["CapPrm"] != zero) {
		t.Errorf("confined capabilities %v, want none", s.Status)
	}
	if !confined && os.Geteuid() == 0 && s.Status["CapEff"] == zero {
		t.Errorf("unconfined root handler has no capabilities (%v): the control does not tell", s.Status)
	}
}

// TestConfinedProbes runs the probes in the test binary as a handler,
// unconfined (every probe succeeds: the positive control) and confined by
// Wrap through each launcher: the binary re-executed (self mode) and
// bin/carapace-confine.
func TestConfinedProbes(t *testing.T) {
	s := requireKernel(t)
	t.Logf("support: %s", s)
	f := newProbeFixture(t)
	t.Run("unconfined", func(t *testing.T) {
		f.run(t, helperProbe, false).check(t, false)
	})
	t.Run("self", func(t *testing.T) {
		if _, self := findLauncher(); !self {
			t.Fatal("a carapace-confine beside the test binary: self mode is not tested")
		}
		f.run(t, helperProbe, true).check(t, true)
	})
	t.Run("launcher", func(t *testing.T) {
		useLauncher(t, buildLauncher(t))
		f.run(t, helperProbe, true).check(t, true)
	})
	t.Run("legacy signals", func(t *testing.T) {
		// The seccomp filter's signal rules, which stand in for
		// Landlock's scopes below ABI 6, on this kernel.
		f.run(t, helperLegacy, false).check(t, true)
	})
}

// buildLauncher builds cmd/carapace-confine as the Makefile does.
func buildLauncher(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), launcherName)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "../../cmd/carapace-confine")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the launcher: %v\n%s", err, b)
	}
	return out
}

// useLauncher makes Wrap start path for the rest of the test.
func useLauncher(t testing.TB, path string) {
	old := findLauncher
	findLauncher = func() (string, bool) { return path, false }
	t.Cleanup(func() { findLauncher = old })
}

// TestLauncherRefuses starts the launcher with policies it must refuse:
// it exits 126 with one line on stderr and runs nothing. The same start
// with a good policy runs the handler (the control).
func TestLauncherRefuses(t *testing.T) {
	requireKernel(t)
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	good := fmt.Sprintf(`{"plugin":"web","exec":%q,"write":[%q]}`, "/bin/sh", filepath.Dir(marker))
	for _, tc := range []struct {
		name, policy string // policy "-": no variable
		code         int
		line         string
	}{
		{"good policy", good, 0, ""},
		{"unknown field", `{"plugin":"web","exec":"/bin/sh","network":true}`, 126, `carapace-confine: plugin web: policy: invalid policy: decode: json: unknown field "network"`},
		{"relative path", `{"plugin":"web","exec":"/bin/sh","read":["plugins/web"]}`, 126, `carapace-confine: plugin web: policy: invalid policy: plugin web: read "plugins/web" is not an absolute path`},
		{"relative executable", `{"plugin":"web","exec":"sh"}`, 126, `carapace-confine: plugin web: policy: invalid policy: plugin web: executable "sh" is not an absolute path`},
		{"no policy", "-", 126, "carapace-confine: plugin ?: policy: " + envPolicy + " is not set: the launcher runs only for the core"},
		{"hostile name", `{"plugin":"a\nb","exec":"/bin/sh"}`, 126, `carapace-confine: plugin "a\nb": policy: invalid policy: plugin "a\nb": the name has a control character`},
		{"missing executable", `{"plugin":"web","exec":"/nonexistent/handler"}`, 126, "carapace-confine: plugin web: exec /nonexistent/handler: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(marker)
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(exe, "sh", "-c", "echo > "+marker+" && "+truePath)
			cmd.Env = append(withoutOurs(os.Environ()), envSelf+"=1")
			if tc.policy != "-" {
				cmd.Env = append(cmd.Env, envPolicy+"="+tc.policy)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err = cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr.String())
			}
			_, ran := os.Stat(marker)
			if (ran == nil) != (tc.code == 0) {
				t.Errorf("handler ran: %v, want %v", ran == nil, tc.code == 0)
			}
			if tc.code != 0 && stderr.String() != tc.line+"\n" {
				t.Errorf("stderr %q, want the one line %q", stderr.String(), tc.line)
			}
		})
	}
}

// TestWrap checks the command Wrap builds: the launcher first, the
// handler's arguments after it, the policy in the environment once, and
// nothing else of the command changed. A command for another executable
// than the policy's is refused.
func TestWrap(t *testing.T) {
	requireKernel(t)
	useLauncher(t, "/opt/carapace/bin/carapace-confine")
	p := Policy{Plugin: "web", Exec: "/p/web/handler", Read: []string{"/p/web"}}
	cmd := exec.Command(p.Exec, "--serve")
	cmd.Env = []string{"A=1", envPolicy + "=stale", "B=2"}
	cmd.Dir = "/p/web"
	cmd.ExtraFiles = []*os.File{os.Stdin}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.SysProcAttr = attr
	if err := Wrap(cmd, p); err != nil {
		t.Fatal(err)
	}
	if cmd.Path != "/opt/carapace/bin/carapace-confine" || !slices.Equal(cmd.Args, []string{launcherName, p.Exec, "--serve"}) {
		t.Errorf("command %s %q", cmd.Path, cmd.Args)
	}
	enc, _ := encodePolicy(p)
	if want := []string{"A=1", "B=2", envPolicy + "=" + enc}; !slices.Equal(cmd.Env, want) {
		t.Errorf("env %q, want %q", cmd.Env, want)
	}
	if cmd.Dir != "/p/web" || len(cmd.ExtraFiles) != 1 || cmd.SysProcAttr != attr {
		t.Errorf("Wrap changed the command's folder, files or attributes")
	}

	other := exec.Command("/p/other/handler")
	if err := Wrap(other, p); err == nil || other.Path != "/p/other/handler" {
		t.Errorf("Wrap of another executable: %v, path %s", err, other.Path)
	}
	bad := exec.Command(p.Exec)
	if err := Wrap(bad, Policy{Plugin: "web", Exec: p.Exec, Write: []string{"data"}}); err == nil || bad.Path != p.Exec {
		t.Errorf("Wrap with an invalid policy: %v, path %s", err, bad.Path)
	}
}
