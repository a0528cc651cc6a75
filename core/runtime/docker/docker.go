// Package docker runs agent containers with the Docker CLI, or with Podman's,
// which takes the same flags. It implements runtime.Engine by shelling out
// to the CLI: `docker run` in the foreground, `docker stop`, `docker rm -f`
// and `docker ps`.
//
// Every container is started with the full hardened flag set of
// RUNTIMES.md §0, whatever the Spec says:
//
//	docker run --rm --pull never --name NAME --label K=V… \
//	  --network none --read-only \
//	  --tmpfs /tmp:rw,nosuid,nodev,noexec,size=64m \
//	  --tmpfs /home/agent:rw,nosuid,nodev,size=256m,uid=U,gid=G \
//	  --cap-drop ALL --security-opt no-new-privileges \
//	  --pids-limit N --memory Mm --cpus C --user U:G --init \
//	  -v SRC:DST[:ro]… -e K=V… IMAGE CMD…
//
// The tmpfs at $HOME belongs to the Spec's user, which must therefore be
// numeric (uid or uid:gid). `--pull never` is not in RUNTIMES.md's list: an image
// must already be in the engine's store (built or loaded, see
// core/agentimage), so a missing or mistyped image fails at once
// instead of being fetched from a registry and run as the agent.
//
// What the package never does: it never mounts the engine's socket
// (docker.sock) or anything else the Spec does not name, never passes
// --privileged, never adds a capability, and never touches the seccomp or
// AppArmor profiles, so the engine's default seccomp profile stays on.
// Nothing of the host's environment reaches the container: only the Spec's
// Env, given as -e KEY=value, which the engine shows in its inspect output
// (so never a secret).
//
// Run checks that every mount source exists first (`-v` would create a
// missing one as an empty folder owned by root), copies the container's
// output to its IO and returns the agent's exit status. The CLI reports its own failures (daemon errors, a missing image,
// a bad mount) with status 125, which Run turns into an error; an agent
// that exits 125 itself is reported the same way. Cancelling Run's context
// runs `docker stop -t 5` and then `docker rm -f` until the container is
// gone, and Run waits for the CLI to exit.
//
// Podman: Options.Bin "podman" (or a path to it) selects it, and Name is
// then "podman". The run, stop, rm and ps invocations are the same; only
// Check differs: a local Podman has no server, so its version is read from
// `podman version --format {{.Client.Version}}`. Podman's --init needs
// catatonit installed, and rootless Podman on cgroups v1 ignores the memory,
// CPU and pids limits (it warns).
package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Options configure an Engine.
type Options struct {
	// Bin is the CLI to run: "docker" (the default), "podman", or a path
	// to either. A bare name is looked up in $PATH.
	Bin string
	// Logger receives a debug line per CLI invocation; nil discards.
	Logger *slog.Logger
}

// Engine runs agent containers through the Docker or Podman CLI. It is
// safe for concurrent use.
type Engine struct {
	bin string
	log *slog.Logger
}

var (
	_ runtime.Engine          = (*Engine)(nil)
	_ runtime.ImageIdentifier = (*Engine)(nil)
)

// New returns an Engine for opts.
func New(opts Options) *Engine {
	if opts.Bin == "" {
		opts.Bin = "docker"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Engine{bin: opts.Bin, log: opts.Logger}
}

// Timeouts of the CLI calls.
const (
	// StopGrace is how long `docker stop` lets the agent exit after
	// SIGTERM before it is killed.
	StopGrace = 5 * time.Second
	// stopWait bounds how long Run waits, after its context ends, for the
	// container to go before it kills the CLI and gives up (runtime.Engine
	// asks for about 15 s at most).
	stopWait = 15 * time.Second
	// callTimeout bounds the short calls (version, ps, rm) whose context
	// has no deadline.
	callTimeout = 30 * time.Second
	// exitDaemonError is the CLI's own failure status.
	exitDaemonError = 125
)

// Name returns the CLI's base name: "docker" or "podman".
func (e *Engine) Name() string { return filepath.Base(e.bin) }

// podman reports whether the CLI is Podman's.
func (e *Engine) podman() bool { return e.Name() == "podman" }

// Check runs `docker version` to see that the CLI is installed and the
// engine answers; it wraps runtime.ErrUnavailable with what to do when it
// does not.
func (e *Engine) Check(ctx context.Context) (runtime.Info, error) {
	format := "{{.Server.Version}}"
	if e.podman() {
		format = "{{.Client.Version}}" // local Podman has no server part
	}
	out, err := e.output(ctx, "version", "--format", format)
	if err != nil {
		return runtime.Info{}, e.unavailable(err)
	}
	v := strings.TrimSpace(out)
	if v == "" || strings.Contains(v, "<no value>") {
		return runtime.Info{}, fmt.Errorf("%s version printed no server version: %w (is the engine running?)", e.Name(), runtime.ErrUnavailable)
	}
	if !e.podman() {
		if err := checkDockerVersion(v); err != nil {
			return runtime.Info{}, err
		}
	}
	return runtime.Info{Engine: e.Name(), Version: v, Bin: e.bin}, nil
}

// MinDockerVersion is the oldest Docker Engine Check accepts: run's
// --pull never, which keeps a missing image from being fetched and run as
// the agent, came in 20.10.
const MinDockerVersion = "20.10"

// dockerVersionRE takes the major and minor of a Docker Engine's version
// ("28.1.1", "20.10.24+dfsg1", "27.0.0-rc.2").
var dockerVersionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

// checkDockerVersion refuses an engine older than MinDockerVersion. A
// version it cannot read is let through: the engine's own errors say more
// than a guess.
func checkDockerVersion(v string) error {
	m := dockerVersionRE.FindStringSubmatch(v)
	if m == nil {
		return nil
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major > 20 || major == 20 && minor >= 10 {
		return nil
	}
	return fmt.Errorf("the Docker Engine %s is too old: Carapace needs %s or later (https://docs.docker.com/engine/install/): %w", v, MinDockerVersion, runtime.ErrUnavailable)
}

// unavailable turns a failed version call into ErrUnavailable with advice.
func (e *Engine) unavailable(err error) error {
	msg := err.Error()
	var advice string
	switch {
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		advice = fmt.Sprintf("%s is not installed: install it (Debian: apt-get install docker.io; see https://docs.docker.com/engine/install/) or choose another runtime in config.toml", e.bin)
		if e.podman() {
			advice = fmt.Sprintf("%s is not installed: install it (Debian: apt-get install podman) or choose another runtime in config.toml", e.bin)
		}
	case strings.Contains(msg, "permission denied"):
		advice = "the engine's socket refused this user: add the user to the docker group (then log in again), or use rootless Docker or Podman"
	case strings.Contains(msg, "Cannot connect") || strings.Contains(msg, "Is the docker daemon running") ||
		strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such file or directory"):
		advice = "the engine is not running: start it (sudo systemctl start docker, or dockerd; Docker Desktop or `podman machine start` on a Mac)"
	default:
		advice = "the engine did not answer"
	}
	return fmt.Errorf("%s: %w: %v", advice, runtime.ErrUnavailable, err)
}

// userRE matches a numeric user, uid or uid:gid, as the tmpfs at $HOME
// needs.
var userRE = regexp.MustCompile(`^([0-9]{1,10})(?::([0-9]{1,10}))?$`)

// runArgs returns the arguments of `docker run` for s, which has passed
// s.Check. It is pure: the golden test pins the flag set.
func runArgs(s runtime.Spec) ([]string, error) {
	user := s.User
	if user == "" {
		user = runtime.AgentUser
	}
	m := userRE.FindStringSubmatch(user)
	if m == nil {
		return nil, fmt.Errorf("user %q must be numeric, uid or uid:gid: %w", user, runtime.ErrInvalidSpec)
	}
	// $HOME belongs to the user; without a gid, the engine takes the
	// process's group from the image's /etc/passwd, and the tmpfs keeps
	// group 0.
	home := runtime.HomePath + ":rw,nosuid,nodev,size=256m,uid=" + m[1]
	if m[2] != "" {
		home += ",gid=" + m[2]
	}
	if s.Limits.CPUs < 0 || s.Limits.MemoryMB < 0 || s.Limits.Pids < 0 {
		return nil, fmt.Errorf("negative limits %+v: %w", s.Limits, runtime.ErrInvalidSpec)
	}
	args := []string{"run", "--rm", "--pull", "never", "--name", s.Name}
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "--label", k+"="+s.Labels[k])
	}
	args = append(args,
		"--network", "none",
		"--read-only",
		"--tmpfs", "/tmp:rw,nosuid,nodev,noexec,size=64m",
		"--tmpfs", home,
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
	)
	if s.Limits.Pids > 0 {
		args = append(args, "--pids-limit", strconv.Itoa(s.Limits.Pids))
	}
	if s.Limits.MemoryMB > 0 {
		args = append(args, "--memory", strconv.Itoa(s.Limits.MemoryMB)+"m")
	}
	if s.Limits.CPUs > 0 {
		args = append(args, "--cpus", strconv.FormatFloat(s.Limits.CPUs, 'f', -1, 64))
	}
	args = append(args, "--user", user, "--init")
	for _, m := range s.Mounts {
		v := m.Source + ":" + m.Target
		if m.ReadOnly {
			v += ":ro"
		}
		args = append(args, "-v", v)
	}
	for _, kv := range s.Env {
		args = append(args, "-e", kv)
	}
	args = append(args, s.Image)
	return append(args, s.Cmd...), nil
}

// Run starts the container of s in the foreground and waits for it,
// copying its output to out; it returns the agent's exit status.
// Cancelling ctx stops and removes the container; Run then returns the
// status the CLI reported with an error wrapping context.Cause(ctx).
func (e *Engine) Run(ctx context.Context, s runtime.Spec, out runtime.IO) (int, error) {
	if err := s.Check(); err != nil {
		return -1, err
	}
	args, err := runArgs(s)
	if err != nil {
		return -1, err
	}
	// `-v` would create a missing source as an empty root-owned
	// directory: a session socket that is gone must fail instead.
	for _, m := range s.Mounts {
		if _, err := os.Stat(m.Source); err != nil {
			return -1, fmt.Errorf("container %s: mount source: %w", s.Name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return -1, fmt.Errorf("container %s not started: %w", s.Name, err)
	}
	stderr := &tailWriter{w: out.Stderr}
	cmd := exec.Command(e.bin, args...)
	cmd.Stdout, cmd.Stderr = orDiscard(out.Stdout), stderr
	e.log.Debug("container run", "engine", e.Name(), "name", s.Name, "image", s.Image, "args", redactEnv(args))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("container %s: start %s: %w", s.Name, e.bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	select {
	case err := <-done:
		code, err := e.exit(s.Name, err, stderr)
		e.log.Debug("container exited", "name", s.Name, "exit", code, "elapsed", time.Since(start))
		return code, err
	case <-ctx.Done():
	}
	e.log.Debug("container stopping: context ended", "name", s.Name, "cause", context.Cause(ctx))
	code, err := e.stopRunning(ctx, s.Name, cmd, done, stderr)
	if err != nil {
		return code, err
	}
	return code, fmt.Errorf("container %s stopped: %w", s.Name, context.Cause(ctx))
}

// stopRunning stops the container of a Run whose context ended and waits
// for the CLI. The container may not exist yet (the CLI was still creating
// it), so `docker rm -f` is repeated every second until the CLI exits.
func (e *Engine) stopRunning(ctx context.Context, name string, cmd *exec.Cmd, done <-chan error, stderr *tailWriter) (int, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
	defer cancel()
	if _, err := e.output(sctx, "stop", "-t", strconv.Itoa(int(StopGrace/time.Second)), name); err != nil {
		e.log.Debug("container stop", "name", name, "err", err)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			code, err := e.exit(name, err, stderr)
			if code == exitDaemonError {
				err = nil // the CLI complains that its container went away
			}
			return code, err
		case <-tick.C:
			// --rm removes a container that ran; this one may not
			// have started, or may not stop.
			if err := e.remove(sctx, name); err != nil {
				e.log.Debug("container remove", "name", name, "err", err)
			}
		case <-sctx.Done():
			_ = cmd.Process.Kill()
			<-done
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			defer cancel()
			rmErr := e.remove(rctx, name)
			return -1, errors.Join(
				fmt.Errorf("container %s did not stop within %s; killed the %s client: %w", name, stopWait, e.Name(), context.Cause(ctx)), rmErr)
		}
	}
}

// noImageRE matches run's complaint about an image it does not have and
// may not pull: Docker's "No such image", Podman's "image not known".
var noImageRE = regexp.MustCompile(`No such image|image not known|Unable to find image`)

// exit turns the CLI's Wait result into the agent's exit status.
func (e *Engine) exit(name string, err error, stderr *tailWriter) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return -1, fmt.Errorf("container %s: wait for %s: %w", name, e.Name(), err)
	}
	code := ee.ExitCode()
	switch {
	case code < 0:
		return -1, fmt.Errorf("container %s: %s client %v", name, e.Name(), ee)
	case code == exitDaemonError && noImageRE.MatchString(stderr.last()):
		return code, fmt.Errorf("container %s: %w: %s", name, runtime.ErrNoImage, stderr.last())
	case code == exitDaemonError:
		return code, fmt.Errorf("container %s: %s run failed (exit 125): %s", name, e.Name(), stderr.last())
	}
	return code, nil
}

// Stop stops and removes the container name (`docker rm -f`); a missing
// container is not an error.
func (e *Engine) Stop(ctx context.Context, name string) error {
	if !validName(name) {
		return fmt.Errorf("container name %q: %w", name, runtime.ErrInvalidSpec)
	}
	if err := e.remove(ctx, name); err != nil {
		return fmt.Errorf("stop container %s: %w", name, err)
	}
	return nil
}

// remove runs `docker rm -f name`, ignoring a missing container.
func (e *Engine) remove(ctx context.Context, name string) error {
	_, err := e.output(ctx, "rm", "-f", name)
	if err != nil && isNoSuchContainer(err) {
		return nil
	}
	return err
}

// isNoSuchContainer recognises Docker's and Podman's message for a missing
// container, and the race with --rm's own removal.
func isNoSuchContainer(err error) bool {
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "no such container") || strings.Contains(m, "no container with name or id") ||
		strings.Contains(m, "removal of container") && strings.Contains(m, "already in progress")
}

// List returns the names of the containers, running or not, whose label
// key has value, sorted.
func (e *Engine) List(ctx context.Context, key, value string) ([]string, error) {
	if key == "" || strings.ContainsAny(key, "=\n,") || strings.ContainsAny(value, "\n,") {
		return nil, fmt.Errorf("label %q=%q: %w", key, value, runtime.ErrInvalidSpec)
	}
	out, err := e.output(ctx, "ps", "-a", "--filter", "label="+key+"="+value, "--format", "{{.Names}}")
	if err != nil {
		return nil, fmt.Errorf("list containers with label %s=%s: %w", key, value, err)
	}
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	slices.Sort(names)
	return names, nil
}

// ImageID returns the id of image ref (`docker image inspect`), for
// runtime.ImageIdentifier.
func (e *Engine) ImageID(ctx context.Context, ref string) (string, error) {
	if ref == "" || strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \t\n") {
		return "", fmt.Errorf("image %q: %w", ref, runtime.ErrInvalidSpec)
	}
	out, err := e.output(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	return strings.TrimSpace(out), nil
}

// output runs a short CLI call and returns its stdout; a failure carries
// its stderr (on one line, shortened).
func (e *Engine) output(ctx context.Context, args ...string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, e.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	e.log.Debug("container engine call", "engine", e.Name(), "args", args, "err", err)
	if err != nil {
		msg := textutil.Clip(textutil.OneLine(stderr.String()), 512)
		if msg != "" {
			return stdout.String(), fmt.Errorf("%s %s: %w: %s", e.Name(), args[0], err, msg)
		}
		return stdout.String(), fmt.Errorf("%s %s: %w", e.Name(), args[0], err)
	}
	return stdout.String(), nil
}

// validName is runtime.Spec's rule for container names.
func validName(name string) bool {
	s := runtime.Spec{Name: name, Image: "x"}
	return s.Check() == nil
}

// redactEnv hides the values of -e arguments in logs.
func redactEnv(args []string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		if out[i-1] == "-e" {
			if k, _, ok := strings.Cut(out[i], "="); ok {
				out[i] = k + "=…"
			}
		}
	}
	return out
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// tailWriter passes writes through and keeps the last few KiB, for the
// message of a failed run.
type tailWriter struct {
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = t.buf[len(t.buf)-tailSize:]
	}
	t.mu.Unlock()
	if t.w == nil {
		return len(p), nil
	}
	return t.w.Write(p)
}

// last returns the CLI's error message: the last line written that
// mentions an error (Docker follows it with a usage hint), else the last
// non-empty line.
func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last string
	for _, l := range slices.Backward(strings.Split(string(t.buf), "\n")) {
		l = strings.TrimSpace(l)
		if strings.Contains(strings.ToLower(l), "error") {
			return l
		}
		if last == "" {
			last = l
		}
	}
	if last == "" {
		return "no message"
	}
	return last
}
