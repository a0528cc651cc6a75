package measure

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/ipc"
)

// IPCRunner runs the real ipc binary against one session socket.
type IPCRunner struct {
	Bin    string     // path of the ipc binary
	Socket string     // the session socket
	Env    []string   // added to the child's environment
	Stats  *ProcStats // if set, accumulates the children's resource usage
}

// ProcStats sums the resource usage of child processes.
type ProcStats struct {
	Runs        int
	CPU         time.Duration // user + system
	MinorFaults int64
	VolSwitches int64 // voluntary context switches (blocking)
	InvSwitches int64 // involuntary context switches (preemption)
}

func (s *ProcStats) add(ps *os.ProcessState) {
	if s == nil || ps == nil {
		return
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return
	}
	s.Runs++
	s.CPU += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	s.MinorFaults += int64(ru.Minflt)
	s.VolSwitches += int64(ru.Nvcsw)
	s.InvSwitches += int64(ru.Nivcsw)
}

// Per returns the averages per run.
func (s ProcStats) Per() (cpu time.Duration, faults, vol, inv float64) {
	if s.Runs == 0 {
		return 0, 0, 0, 0
	}
	n := float64(s.Runs)
	return s.CPU / time.Duration(s.Runs), float64(s.MinorFaults) / n, float64(s.VolSwitches) / n, float64(s.InvSwitches) / n
}

var echoed = []byte(`"message":"hello"`)

// Run executes `ipc tool.invoke.echo '{"message":"hello"}'` once — exec to
// exit, stdout captured through a pipe as an agent's shell would — and
// checks it printed the echo and exited 0.
func (r IPCRunner) Run() error {
	cmd := exec.Command(r.Bin, EchoTopic, `{"message":"hello"}`)
	cmd.Env = append([]string{"CARAPACE_IPC_ENDPOINT=ipc://" + r.Socket, "PATH=/usr/bin:/bin"}, r.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r.Stats.add(cmd.ProcessState)
	if err != nil {
		return fmt.Errorf("ipc: %v: %s", err, errb.Bytes())
	}
	if !bytes.Contains(out.Bytes(), echoed) {
		return fmt.Errorf("ipc printed %q", out.Bytes())
	}
	return nil
}

// Help executes `ipc --help`: the process start and the Go runtime's and
// packages' initialisation, with no connection.
func (r IPCRunner) Help() error {
	cmd := exec.Command(r.Bin, "--help")
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, r.Env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	r.Stats.add(cmd.ProcessState)
	if err != nil {
		return fmt.Errorf("ipc --help: %v", err)
	}
	return nil
}

// Call makes the same call in this process with ipc.Call, the client code
// of the ipc binary: a new DEALER over the hardened transport, its
// handshake, the request and the close, without a process to start.
func (r IPCRunner) Call() error {
	res, e := ipc.Call(context.Background(), "ipc://"+r.Socket, EchoTopic, []byte(`{"message":"hello"}`), ipc.ClientOptions{})
	if e != nil {
		return e
	}
	if !bytes.Contains(res, echoed) {
		return fmt.Errorf("ipc.Call returned %s", res)
	}
	return nil
}

// ExecTrue executes /bin/true, the cost of starting any process from this
// one, or returns an error if it is missing.
func ExecTrue() error { return exec.Command("/bin/true").Run() }

// helloSource is the Go hello-world bin/ipc is compared with.
const helloSource = `package main

import "os"

func main() { os.Stdout.WriteString("hello\n") }
`

// BuildHello builds a Go hello-world into dir the way make build builds
// bin/ipc (CGO_ENABLED=0, -trimpath, -ldflags '-s -w', this machine's
// Go) and returns its path: the yardstick of an ipc run.
func BuildHello(dir string) (string, error) {
	src := filepath.Join(dir, "hello")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(helloSource), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hello.bin")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the hello-world: %v\n%s", err, out)
	}
	return bin, nil
}

// ExecHello returns a function that executes the hello-world at bin,
// stdout through a pipe as an ipc run's.
func ExecHello(bin string) func() error {
	return func() error {
		cmd := exec.Command(bin)
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			return err
		}
		if out.String() != "hello\n" {
			return fmt.Errorf("the hello-world printed %q", out.String())
		}
		return nil
	}
}
