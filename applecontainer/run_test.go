package applecontainer

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/testutil"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name           string
		env            map[string]string
		exit           int
		stdout, stderr string
	}{
		{"success", map[string]string{"FAKE_CONTAINER_RUN_STDOUT": "hello from the agent\n"}, 0, "hello from the agent\n", ""},
		{"exit status passed through", map[string]string{"FAKE_CONTAINER_RUN_EXIT": "3", "FAKE_CONTAINER_RUN_STDERR": "boom\n"}, 3, "", "boom\n"},
		{"both streams", map[string]string{"FAKE_CONTAINER_RUN_STDOUT": "out", "FAKE_CONTAINER_RUN_STDERR": "err", "FAKE_CONTAINER_RUN_EXIT": "1"}, 1, "out", "err"},
	}
	for _, version := range []string{"1.1.0", "1.2.2"} {
		for _, tt := range tests {
			t.Run(version+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				h := newHost(t)
				f := newFake(t, version, tt.env)
				var stdout, stderr testutil.Buffer
				exit, err := f.engine(t).Run(context.Background(), h.spec(), runtime.IO{Stdout: &stdout, Stderr: &stderr})
				if err != nil {
					t.Fatalf("Run: %v (stderr %q)", err, stderr.String())
				}
				if exit != tt.exit {
					t.Errorf("exit = %d, want %d", exit, tt.exit)
				}
				if stdout.String() != tt.stdout || stderr.String() != tt.stderr {
					t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tt.stdout, tt.stderr)
				}
				// The fake accepted every option (it refuses those its
				// version's Flags.swift lacks), with exactly runArgs's argv.
				args, err := runArgs(h.spec())
				if err != nil {
					t.Fatal(err)
				}
				if calls := f.calls(t); len(calls) != 1 || !slices.Equal(calls[0], args) {
					t.Errorf("calls %q, want [%q]", calls, args)
				}
				if left := f.containers(t); len(left) != 0 {
					t.Errorf("containers left: %q", left)
				}
			})
		}
	}
}

// The fake refuses an option its version lacks, as Apple's CLI does: the
// acceptance in TestRun means something.
func TestFakeRefusesUnknownOptions(t *testing.T) {
	tests := []struct {
		version string
		args    []string
		exit    int
		stderr  string
	}{
		{"1.2.2", []string{"run", "--security-opt", "no-new-privileges", "agent"}, 64, "Unknown option '--security-opt'"},
		{"1.2.2", []string{"run", "--pids-limit", "256", "agent"}, 64, "Unknown option '--pids-limit'"},
		{"1.2.2", []string{"run", "--cpus", "1.5", "agent"}, 64, "invalid for '--cpus"},
		{"1.1.0", []string{"run", "--read-only-path", "/proc", "agent"}, 64, "Unknown option '--read-only-path'"},
		{"1.2.2", []string{"run", "--read-only-path", "/proc", "--rm", "agent"}, 0, ""},
		{"1.2.2", []string{"run", "-v", "/nonexistent/x.sock:/run/carapace/ipc.sock", "agent"}, 1, "path '/nonexistent/x.sock' does not exist"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := newFake(t, tt.version, nil)
			cmd := exec.Command(f.bin, tt.args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			exit := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tt.exit || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit %d stderr %q, want %d and %q", exit, stderr.String(), tt.exit, tt.stderr)
			}
		})
	}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// runInBackground starts Run and returns a channel of its result.
func runInBackground(ctx context.Context, e *Engine, s runtime.Spec) <-chan [2]any {
	ch := make(chan [2]any, 1)
	go func() {
		exit, err := e.Run(ctx, s, runtime.IO{})
		ch <- [2]any{exit, err}
	}()
	return ch
}

func TestRunCancelStopsTheContainer(t *testing.T) {
	h := newHost(t)
	f := newFake(t, "1.2.2", map[string]string{"FAKE_CONTAINER_RUN_SLEEP": "30s"})
	e := f.engine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := runInBackground(ctx, e, h.spec())
	waitFor(t, "the container to start", func() bool { return slices.Contains(f.containers(t), "carapace-s1") })
	start := time.Now()
	cancel()
	r := <-res
	exit, err := r[0].(int), r[1].(error)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if exit != 143 {
		t.Errorf("exit = %d, want 143 (the agent's SIGTERM)", exit)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v to return after cancel", d)
	}
	cmds := f.commands(t)
	if cmds[0] != "run" || !slices.Contains(cmds, "stop") || slices.Contains(cmds, "delete") {
		t.Errorf("ran %q, want run then stop, no delete", cmds)
	}
	for _, c := range f.calls(t)[1:] {
		if want := []string{"stop", "-t", "5", "carapace-s1"}; !slices.Equal(c, want) {
			t.Errorf("call %q, want %q", c, want)
		}
	}
	if left := f.containers(t); len(left) != 0 {
		t.Errorf("containers left: %q", left)
	}
}

// A `container run` that outlives stop is killed, and its container,
// which --rm no longer removes, deleted.
func TestRunCancelKillsAStuckRun(t *testing.T) {
	h := newHost(t)
	f := newFake(t, "1.2.2", map[string]string{"FAKE_CONTAINER_RUN_SLEEP": "30s", "FAKE_CONTAINER_RUN_IGNORE_STOP": "1"})
	e := f.engine(t)
	e.stopGrace = 500 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := runInBackground(ctx, e, h.spec())
	waitFor(t, "the container to start", func() bool { return slices.Contains(f.containers(t), "carapace-s1") })
	cancel()
	r := <-res
	exit, err := r[0].(int), r[1].(error)
	if exit != -1 || !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %d, %v; want -1 and context.Canceled", exit, err)
	}
	cmds := f.commands(t)
	if !slices.Contains(cmds, "stop") || cmds[len(cmds)-1] != "delete" {
		t.Errorf("ran %q, want stops then delete", cmds)
	}
	if last := f.calls(t)[len(cmds)-1]; !slices.Equal(last, []string{"delete", "-f", "carapace-s1"}) {
		t.Errorf("last call %q", last)
	}
	if left := f.containers(t); len(left) != 0 {
		t.Errorf("containers left: %q", left)
	}
}

// A `container run` killed by someone else leaves its container: Run
// deletes it.
func TestRunKilledCLIDeletesTheContainer(t *testing.T) {
	h := newHost(t)
	f := newFake(t, "1.2.2", map[string]string{"FAKE_CONTAINER_RUN_SELFKILL": "1"})
	exit, err := f.engine(t).Run(context.Background(), h.spec(), runtime.IO{})
	if exit != -1 || err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Run = %d, %v; want -1 and an error saying killed", exit, err)
	}
	if got, want := f.commands(t), []string{"run", "delete"}; !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
	if left := f.containers(t); len(left) != 0 {
		t.Errorf("containers left: %q", left)
	}
}

func TestRunCancelledBeforeStart(t *testing.T) {
	h := newHost(t)
	f := newFake(t, "1.2.2", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	exit, err := f.engine(t).Run(ctx, h.spec(), runtime.IO{})
	if exit != -1 || !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %d, %v; want -1, context.Canceled", exit, err)
	}
	if calls := f.calls(t); len(calls) != 0 {
		t.Errorf("ran %q", calls)
	}
}

func TestRunResolvesSymlinkedSocket(t *testing.T) {
	h := newHost(t)
	link := filepath.Join(h.root, "sessions")
	if err := os.Symlink(h.sockDir, link); err != nil {
		t.Fatal(err)
	}
	s := h.spec()
	s.Mounts[0].Source = filepath.Join(link, "s1.sock")
	f := newFake(t, "1.2.2", nil)
	if exit, err := f.engine(t).Run(context.Background(), s, runtime.IO{}); exit != 0 || err != nil {
		t.Fatalf("Run = %d, %v", exit, err)
	}
	argv := f.calls(t)[0]
	if i := slices.Index(argv, h.sock+":"+runtime.SocketPath); i < 1 || argv[i-1] != "-v" {
		t.Errorf("argv %q has no -v %s:%s", argv, h.sock, runtime.SocketPath)
	}
	if strings.Contains(strings.Join(argv, " "), link) {
		t.Errorf("argv passes the symbolic link: %q", argv)
	}
}

func TestRunRefusesBeforeExec(t *testing.T) {
	tests := []struct {
		name string
		edit func(*runtime.Spec, *host)
	}{
		{"missing source", func(s *runtime.Spec, h *host) { s.Mounts[1].Source = filepath.Join(h.root, "gone") }},
		{"spec check: bad name", func(s *runtime.Spec, h *host) { s.Name = "bad name" }},
		{"spec check: nested sources", func(s *runtime.Spec, h *host) {
			s.Mounts = append(s.Mounts, runtime.Mount{Source: filepath.Join(h.root, "groups/main/workspace/sub"), Target: "/sub"})
		}},
		{"spec check: duplicate target", func(s *runtime.Spec, h *host) { s.Mounts[1].Target = runtime.SocketPath }},
		{"spec check: env", func(s *runtime.Spec, h *host) { s.Env = append(s.Env, "=x") }},
		{"socket others cannot write", func(s *runtime.Spec, h *host) {
			if err := os.Chmod(h.sock, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t)
			s := h.spec()
			tt.edit(&s, h)
			f := newFake(t, "1.2.2", nil)
			exit, err := f.engine(t).Run(context.Background(), s, runtime.IO{})
			if exit != -1 || !errors.Is(err, runtime.ErrInvalidSpec) {
				t.Errorf("Run = %d, %v; want -1, ErrInvalidSpec", exit, err)
			}
			if calls := f.calls(t); len(calls) != 0 {
				t.Errorf("ran %q", calls)
			}
		})
	}
}

func TestRunServicesDown(t *testing.T) {
	h := newHost(t)
	f := newFake(t, "1.2.2-stopped", nil)
	var stderr testutil.Buffer
	exit, err := f.engine(t).Run(context.Background(), h.spec(), runtime.IO{Stderr: &stderr})
	if exit != 1 || !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("Run = %d, %v; want 1, ErrUnavailable", exit, err)
	}
	if !strings.Contains(stderr.String(), "container system start") {
		t.Errorf("stderr not copied: %q", stderr.String())
	}
}

// A name already taken: the CLI's own failure, exit 1 and its message on
// stderr.
func TestRunNameTaken(t *testing.T) {
	h := newHost(t)
	f := newFake(t, "1.2.2", nil)
	writeFile(t, filepath.Join(f.state, "carapace-s1"), "running\n", 0o644)
	var stderr testutil.Buffer
	exit, err := f.engine(t).Run(context.Background(), h.spec(), runtime.IO{Stderr: &stderr})
	if exit != 1 || err != nil {
		t.Errorf("Run = %d, %v; want 1, nil", exit, err)
	}
	if !strings.Contains(stderr.String(), "already exists") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A writer that fails must neither block the CLI on a full pipe nor kill
// it with SIGPIPE: Run drains the output and reports the error.
func TestRunOutputWriterFails(t *testing.T) {
	h := newHost(t)
	f := newFake(t, "1.2.2", map[string]string{
		"FAKE_CONTAINER_RUN_STDOUT":        strings.Repeat("x", 1023) + "\n",
		"FAKE_CONTAINER_RUN_STDOUT_REPEAT": "1024", // 1 MiB: more than a pipe holds
	})
	done := make(chan struct{})
	var exit int
	var err error
	go func() {
		defer close(done)
		exit, err = f.engine(t).Run(context.Background(), h.spec(), runtime.IO{Stdout: failingWriter{}})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run hangs when its output cannot be written")
	}
	if exit != 0 || err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Run = %d, %v; want 0 and the writer's error", exit, err)
	}
	if left := f.containers(t); len(left) != 0 {
		t.Errorf("containers left: %q", left)
	}
}
