package measure

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/runtime"
)

// ColdStartPrompt is the prompt of every cold start: one cheap call, which
// the test image's scripted agent makes with the real ipc binary.
const ColdStartPrompt = `tool.invoke.echo {"message":"hello"}`

// TeardownCommand is what the agent runs while a teardown is measured: it
// would outlive any measurement, so only the session's close ends it.
var TeardownCommand = []string{"--exec", "sleep", "300"}

// containerConfig is the config.toml of the container benchmarks' core:
// BenchConfig, Docker, the run's test image and the default limits (2
// CPUs, 4096 MB, 256 pids), which are what a user's sessions get.
func containerConfig(image string) string {
	return BenchConfig + fmt.Sprintf("[runtime]\nengine = \"docker\"\nimage = %q\n", image)
}

// Containers is a core that runs agent sessions in Docker with the offline
// test image (Resources/agent/test), built for the run under its own tag.
// Close removes the core, every container it started and the image.
type Containers struct {
	Engine string // the engine, for the report: version, storage driver, cgroup version
	Image  string // the run's image tag

	core     *Core
	logs     *logTimes
	instance string // the core's carapace.instance label
	bare     int    // bare runs so far, to label each
}

// StartContainers builds the test image with the static linux ipc and
// ipc-relay binaries of the engine's architecture, which `make build`
// leaves in bin/linux-<arch> (bin is that folder), then starts a core that
// runs its sessions in that image. Docker must be running.
func StartContainers(bin string) (*Containers, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	arch, err := agentimage.EngineArch(ctx, "docker")
	if err != nil {
		return nil, err
	}
	c := &Containers{Image: fmt.Sprintf("carapace-agent-test:bench-%d-%d", os.Getpid(), time.Now().Unix()), logs: &logTimes{at: map[string]time.Time{}}}
	c.Engine = engineDescription(ctx)
	ipcBin := filepath.Join(bin, "linux-"+arch, "ipc")
	if err := agentimagetest.BuildTest(ctx, agentimage.Options{Engine: "docker", Tag: c.Image, IPC: ipcBin, Version: "bench"}); err != nil {
		c.removeImage()
		return nil, err
	}
	core, _, err := StartCoreWith(containerConfig(c.Image), nil, slog.New(c.logs))
	if err != nil {
		c.removeImage()
		return nil, err
	}
	c.core = core
	sum := sha256.Sum256([]byte(core.Home)) // as the core labels its containers
	c.instance = hex.EncodeToString(sum[:6])
	return c, nil
}

// engineDescription names the engine: "Docker 20.10.24, storage driver
// fuse-overlayfs, cgroup v1".
func engineDescription(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}\t{{.Driver}}\t{{.CgroupVersion}}").Output()
	f := strings.Split(strings.TrimSpace(string(out)), "\t")
	if err != nil || len(f) != 3 {
		return "Docker"
	}
	return fmt.Sprintf("Docker %s, storage driver %s, cgroup v%s", f[0], f[1], f[2])
}

// Close stops the core (which stops its containers), removes any container
// still labelled with its instance, and the image.
func (c *Containers) Close() error {
	err := c.core.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, lerr := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", "label="+runtime.LabelInstance+"="+c.instance).Output(); lerr == nil {
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			err = errors.Join(err, fmt.Errorf("%d containers outlived the core; removing them", len(ids)))
			_ = exec.CommandContext(ctx, "docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
	}
	return errors.Join(err, c.removeImage())
}

func (c *Containers) removeImage() error {
	return agentimagetest.Remove(c.Image)
}

// ColdStart is one session's start: from the client's call of
// control.Client.Open to the first request of its agent at the core.
type ColdStart struct {
	// Total runs from Open's call to the time of the audit log's "route"
	// entry of the session's first request: the core's own record that the
	// request arrived and passed stages 1–5 (which take microseconds).
	Total time.Duration
	// Returned runs from Open's call to its return: the client has the
	// session, the container is not started yet.
	Returned time.Duration

	// The parts of Total, one after the other, so that they add up to it:
	// the core's log lines and the engine's own events mark their ends.
	// Parts is false when an event was missing or out of order (an engine
	// whose clock is not this machine's).
	Parts bool
	// Session: to the core's "session opened" log line: the control
	// request, the engine (checked once per core), a slot of the group and
	// the session's socket.
	Session time.Duration
	// Files: to "agent container starting", just before `docker run` is
	// executed: the skills, the memory brief, CLAUDE.md, settings and the
	// group's folders.
	Files time.Duration
	// Create: to the engine's "create" event: the docker CLI's start and
	// the container's creation.
	Create time.Duration
	// Start: to the engine's "start" event: attaching and starting it.
	Start time.Duration
	// Agent: to the first request routed: the container's init, the
	// scripted agent's shell, ipc's start and its connection and request.
	Agent time.Duration

	// ExitGone is the engine's "die" event (the agent exited by itself
	// after its call) to its "destroy" event (--rm removed the container);
	// ExitParts says whether both were there.
	ExitGone  time.Duration
	ExitParts bool
}

// ColdStart opens a session of group "main" whose agent makes one echo
// call, reads its output to the agent's exit, and waits until the
// container is gone.
func (c *Containers) ColdStart() (ColdStart, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	h, err := c.core.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "docker", Prompt: ColdStartPrompt})
	returned := time.Now()
	if err != nil {
		return ColdStart{}, fmt.Errorf("open: %w", err)
	}
	defer h.Close()
	id := h.Info().ID
	stdout, stderr, exit, err := drain(h)
	if err != nil || exit != 0 || !strings.Contains(stdout, `"message":"hello"`) {
		return ColdStart{}, fmt.Errorf("the agent of session %s did not echo (exit %d, %v)\nstdout:\n%s\nstderr:\n%s", id, exit, err, stdout, stderr)
	}
	if err := h.Close(); err != nil {
		return ColdStart{}, err
	}
	if _, err := c.waitGone(ctx, id, 10*time.Millisecond); err != nil {
		return ColdStart{}, err
	}
	entries, err := audit.Read(c.core.Home.AuditLog(), audit.Filter{Session: id})
	if err != nil {
		return ColdStart{}, err
	}
	var routed time.Time
	for _, e := range entries {
		if e.Stage == audit.StageRoute && e.Outcome == audit.OutcomeRouted {
			routed = e.Time
			break
		}
	}
	if routed.IsZero() {
		return ColdStart{}, fmt.Errorf("no routed request of session %s in the audit log", id)
	}
	cs := ColdStart{Total: routed.Sub(began), Returned: returned.Sub(began)}

	ev, err := c.events(ctx, id, began, "create", "start", "die", "destroy")
	if err != nil {
		return ColdStart{}, err
	}
	opened, okO := c.logs.get("session opened", id)
	starting, okS := c.logs.get("agent container starting", id)
	marks := []time.Time{began, opened, starting, ev["create"], ev["start"], routed}
	cs.Parts = okO && okS && ordered(marks)
	if cs.Parts {
		cs.Session, cs.Files, cs.Create, cs.Start, cs.Agent = marks[1].Sub(marks[0]), marks[2].Sub(marks[1]),
			marks[3].Sub(marks[2]), marks[4].Sub(marks[3]), marks[5].Sub(marks[4])
	}
	if die, destroy := ev["die"], ev["destroy"]; ordered([]time.Time{die, destroy}) {
		cs.ExitGone, cs.ExitParts = destroy.Sub(die), true
	}
	return cs, nil
}

// Teardown is one session's close while its agent runs: from the client's
// SessionHandle.Close to the container's disappearance from `docker ps -a`.
type Teardown struct {
	// Total runs from Close's call to the end of the first `docker ps -a`
	// that no longer lists the container: an upper bound, late by at most
	// one poll (PollGap).
	Total time.Duration
	// Closed runs from Close's call to its return: the core answers the
	// close once the `docker run` it started has exited.
	Closed time.Duration

	// Parts of the engine's side, from its events; Parts is false when one
	// was missing or out of order.
	Parts bool
	// Kill: Close's call to the engine's "kill" event: the close request,
	// the core cancelling the run and `docker stop` sending SIGTERM.
	Kill time.Duration
	// Die: "kill" to "die": the agent's init passes SIGTERM on and the
	// agent exits.
	Die time.Duration
	// Destroy: "die" to "destroy": --rm removes the container.
	Destroy time.Duration

	// Polls is the number of `docker ps -a` calls made; PollGap the mean
	// time between their answers: the figure's resolution.
	Polls   int
	PollGap time.Duration
}

// Teardown opens a session whose agent runs TeardownCommand, waits until
// its container runs and then settle more, closes the session and polls
// `docker ps -a` every poll (or as fast as it answers) until the container
// is gone.
func (c *Containers) Teardown(poll, settle time.Duration) (Teardown, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := c.core.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "docker", Command: TeardownCommand})
	if err != nil {
		return Teardown{}, fmt.Errorf("open: %w", err)
	}
	defer h.Close()
	id := h.Info().ID
	go func() {
		for range h.Output() { // the stream waits for its reader
		}
	}()
	for {
		running, err := c.list(ctx, id, "--filter", "status=running")
		if err != nil {
			return Teardown{}, err
		}
		if running {
			break
		}
		select {
		case <-h.Done():
			return Teardown{}, fmt.Errorf("the agent of session %s ended before it ran", id)
		case <-ctx.Done():
			return Teardown{}, fmt.Errorf("the container of session %s did not start: %w", id, ctx.Err())
		case <-time.After(poll):
		}
	}
	time.Sleep(settle)

	began := time.Now()
	closed := make(chan error, 1)
	var closedAt time.Time
	go func() {
		err := h.Close()
		closedAt = time.Now()
		closed <- err
	}()
	g, err := c.waitGone(ctx, id, poll)
	if cerr := <-closed; err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return Teardown{}, err
	}
	td := Teardown{Total: g.at.Sub(began), Closed: closedAt.Sub(began), Polls: g.polls, PollGap: g.gap}
	ev, err := c.events(ctx, id, began, "kill", "die", "destroy")
	if err != nil {
		return Teardown{}, err
	}
	marks := []time.Time{began, ev["kill"], ev["die"], ev["destroy"]}
	if td.Parts = ordered(marks); td.Parts {
		td.Kill, td.Die, td.Destroy = marks[1].Sub(marks[0]), marks[2].Sub(marks[1]), marks[3].Sub(marks[2])
	}
	return td, nil
}

// BareRun is the engine's own floor: a container of the same image started
// with a plain `docker run --rm` (no hardening flags, mounts or limits)
// running `true`.
type BareRun struct {
	// Start runs from the CLI's exec to the engine's "start" event:
	// comparable with ColdStart's Create + Start.
	Start time.Duration
	// Total runs from the exec to the CLI's exit, after --rm removed the
	// container.
	Total time.Duration
	Parts bool // the start event was there and in order
}

// Bare times one BareRun. Its container carries the core's instance label,
// so that Close removes it if it is left behind.
func (c *Containers) Bare() (BareRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.bare++
	id := fmt.Sprintf("bare-%d-%d", os.Getpid(), c.bare)
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--pull", "never", "--label", runtime.LabelInstance+"="+c.instance,
		"--label", runtime.LabelSession+"="+id, c.Image, "--exec", "true")
	began := time.Now()
	out, err := cmd.CombinedOutput()
	b := BareRun{Total: time.Since(began)}
	if err != nil {
		return BareRun{}, fmt.Errorf("docker run: %w: %s", err, bytes.TrimSpace(out))
	}
	ev, err := c.events(ctx, id, began, "start")
	if err != nil {
		return BareRun{}, err
	}
	if b.Parts = ordered([]time.Time{began, ev["start"]}); b.Parts {
		b.Start = ev["start"].Sub(began)
	}
	return b, nil
}

// drain reads a container agent's output until its exit.
func drain(h *control.SessionHandle) (stdout, stderr string, exit int, err error) {
	var out, errb strings.Builder
	for o := range h.Output() {
		switch {
		case o.Exit != nil:
			return out.String(), errb.String(), *o.Exit, nil
		case o.Error != "":
			return out.String(), errb.String(), -1, errors.New(o.Error)
		case o.Done != nil: // Exit follows
		case o.Stream == "stderr":
			errb.WriteString(o.Data)
		default:
			out.WriteString(o.Data)
		}
	}
	return out.String(), errb.String(), -1, errors.New("the stream ended without the agent's exit")
}

// list reports whether `docker ps -a` lists a container of session id,
// with extra filters.
func (c *Containers) list(ctx context.Context, id string, extra ...string) (bool, error) {
	args := append([]string{"ps", "-a", "-q", "--filter", "label=" + runtime.LabelSession + "=" + id}, extra...)
	out, err := exec.CommandContext(ctx, "docker", args...).Output()
	if err != nil {
		return false, fmt.Errorf("docker ps: %w", err)
	}
	return len(bytes.TrimSpace(out)) > 0, nil
}

// gone is what waitGone saw.
type gone struct {
	at    time.Time     // the end of the first poll that did not list the container
	polls int           // polls made
	gap   time.Duration // mean time between the polls' answers
}

// waitGone polls `docker ps -a` every poll, or back to back when a poll
// takes longer, until session id's container is no longer listed.
func (c *Containers) waitGone(ctx context.Context, id string, poll time.Duration) (gone, error) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var first time.Time
	for n := 1; ; n++ {
		present, err := c.list(ctx, id)
		now := time.Now()
		if err != nil {
			return gone{}, err
		}
		if n == 1 {
			first = now
		}
		if !present {
			g := gone{at: now, polls: n}
			if n > 1 {
				g.gap = now.Sub(first) / time.Duration(n-1)
			}
			return g, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return gone{}, fmt.Errorf("the container of session %s is still there: %w", id, ctx.Err())
		}
	}
}

// events returns the first time of each of the engine's events (create,
// start, kill, die, destroy…) for session id's container since since,
// trying again briefly until every one of want is there (an event can be
// published just after the container leaves `docker ps`).
func (c *Containers) events(ctx context.Context, id string, since time.Time, want ...string) (map[string]time.Time, error) {
	for try := 0; ; try++ {
		out, err := exec.CommandContext(ctx, "docker", "events", "--since", unixNano(since.Add(-time.Second)), "--until", unixNano(time.Now()),
			"--filter", "type=container", "--filter", "label="+runtime.LabelSession+"="+id, "--format", "{{.Action}} {{.TimeNano}}").Output()
		if err != nil {
			return nil, fmt.Errorf("docker events: %w", err)
		}
		ev := map[string]time.Time{}
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			action := strings.TrimSuffix(f[0], ":")
			ns, err := strconv.ParseInt(f[1], 10, 64)
			if _, seen := ev[action]; err != nil || seen {
				continue
			}
			ev[action] = time.Unix(0, ns)
		}
		missing := false
		for _, w := range want {
			if _, ok := ev[w]; !ok {
				missing = true
			}
		}
		if !missing || try == 10 {
			return ev, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func unixNano(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

// ordered reports whether every time is set and none is before the one
// before it.
func ordered(ts []time.Time) bool {
	for i, t := range ts {
		if t.IsZero() || i > 0 && t.Before(ts[i-1]) {
			return false
		}
	}
	return true
}

// logTimes is a slog.Handler that keeps when the core logged each of a few
// messages, by session: the marks inside the core between a session's open
// and its container's start.
type logTimes struct {
	mu sync.Mutex
	at map[string]time.Time // message + "\x00" + session
}

// loggedMessages are the messages logTimes keeps.
var loggedMessages = map[string]bool{"session opened": true, "agent container starting": true}

var _ slog.Handler = (*logTimes)(nil)

// Enabled keeps Info and above: the marks are logged at Info.
func (l *logTimes) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelInfo }

// Handle keeps the time of a loggedMessages record, by its session.
func (l *logTimes) Handle(_ context.Context, r slog.Record) error {
	if !loggedMessages[r.Message] {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "session" {
			return true
		}
		l.mu.Lock()
		l.at[r.Message+"\x00"+a.Value.String()] = r.Time
		l.mu.Unlock()
		return false
	})
	return nil
}

// WithAttrs returns l: the session is an attribute of the record itself.
func (l *logTimes) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l, as WithAttrs does.
func (l *logTimes) WithGroup(string) slog.Handler { return l }

// get returns when the core logged msg for session, and whether it did.
func (l *logTimes) get(msg, session string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.at[msg+"\x00"+session]
	return t, ok
}
