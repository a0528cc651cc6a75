package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// testImage is the offline agent image the container tests run, built once
// per test binary (the layers are cached by the engine) and removed at the
// end.
var testImage = struct {
	once sync.Once
	tag  string
	err  error
}{tag: fmt.Sprintf("carapace-agent-test:server-%d", os.Getpid())}

// agentImage builds the test image on first use. Without a Docker engine
// the test fails in the project's CI and is skipped elsewhere
// (testutil.RequireDocker).
func agentImage(t testing.TB) string {
	t.Helper()
	testutil.RequireDocker(t, "the test runs agents in containers")
	testutil.RequireFile(t, agentimagetest.DefaultBusybox, "the test image is built with Debian's static busybox (apt-get install busybox-static)")
	testImage.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		testImage.err = agentimagetest.BuildTest(ctx, agentimage.Options{Engine: "docker", Tag: testImage.tag, IPC: bins.ipc, Relay: bins.relay})
	})
	if testImage.err != nil {
		t.Fatalf("build the agent test image (needs a running Docker engine and busybox-static): %v", testImage.err)
	}
	return testImage.tag
}

func removeTestImage() {
	if testImage.err == nil && testImage.tag != "" {
		_ = agentimagetest.Remove(testImage.tag)
	}
}

// dockerConfig is a config.toml that runs agents in the test image.
func dockerConfig(t testing.TB, extra string) string {
	return fmt.Sprintf("[runtime]\nengine = \"docker\"\nimage = %q\nmemory_mb = 256\n%s", agentImage(t), extra)
}

// runAgent opens a container session as req asks and collects its output
// until the agent exits.
func runAgent(t *testing.T, c *testCore, req api.SessionRequest) (stdout, stderr string, exit int, info api.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := c.Client.Open(ctx, req)
	if err != nil {
		t.Fatalf("open %+v: %v\ncore log:\n%s", req, err, c.Log.String())
	}
	defer h.Close()
	var out, errb strings.Builder
	var done *int
	for o := range h.Output() {
		switch {
		case o.Exit != nil:
			// The image's agent (a prompt, no command) says it is done, with
			// its status, before it exits; the line itself never reaches
			// the stream. A command of one's own gets no token and says
			// nothing (core/agent/done.go).
			if strings.Contains(out.String(), "carapace-agent-done") {
				t.Errorf("the entrypoint's done line reached the agent's stream:\n%s", out.String())
			}
			switch {
			case len(req.Command) > 0 && done != nil:
				t.Errorf("a command's container said it was done (%d): it was given a token", *done)
			case len(req.Command) == 0 && req.Prompt != "" && (done == nil || *done != *o.Exit):
				t.Errorf("the test agent's done line: %v, then exit %d", done, *o.Exit)
			}
			return out.String(), errb.String(), *o.Exit, h.Info()
		case o.Done != nil:
			done = o.Done
		case o.Error != "":
			t.Fatalf("agent error: %s\nstdout:\n%s\nstderr:\n%s", o.Error, out.String(), errb.String())
		case o.Stream == "stderr":
			errb.WriteString(o.Data)
		default:
			out.WriteString(o.Data)
		}
	}
	t.Fatalf("the stream ended without the agent's exit\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	return
}

// agentRun is a container session's agent read in the background, so that
// the test can decide its confirmations while it runs.
type agentRun struct {
	info api.Session
	done chan struct{}

	mu             sync.Mutex
	stdout, stderr strings.Builder
	exit           *int
	err            string
}

// startAgent opens a container session as req asks and reads its output
// until the agent exits; the session is closed at the end of the test.
func startAgent(t *testing.T, c *testCore, req api.SessionRequest) *agentRun {
	t.Helper()
	h, err := c.Client.Open(context.Background(), req)
	if err != nil {
		t.Fatalf("open %+v: %v", req, err)
	}
	t.Cleanup(func() { _ = h.Close() })
	a := &agentRun{info: h.Info(), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for o := range h.Output() {
			a.mu.Lock()
			switch {
			case o.Exit != nil:
				a.exit = o.Exit
			case o.Error != "":
				a.err = o.Error
			case o.Stream == "stderr":
				a.stderr.WriteString(o.Data)
			default:
				a.stdout.WriteString(o.Data)
			}
			a.mu.Unlock()
		}
	}()
	return a
}

// wait waits for the agent's exit and returns its status and output.
func (a *agentRun) wait(t *testing.T) (exit int, stdout, stderr string) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the agent did not exit\n%s", a.output())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exit == nil {
		t.Fatalf("the agent ended without an exit status: %q\nstdout:\n%s\nstderr:\n%s", a.err, a.stdout.String(), a.stderr.String())
	}
	return *a.exit, a.stdout.String(), a.stderr.String()
}

// output is what the agent printed so far, for a failure's message.
func (a *agentRun) output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return "stdout:\n" + a.stdout.String() + "\nstderr:\n" + a.stderr.String()
}

// containersOf lists the containers of a label, through the docker CLI.
func containersOf(t *testing.T, key, value string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+key+"="+value, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// TestContainerSession runs the scripted agent of the test image in a real
// Docker container through the core: the prompt reaches it through a
// read-only file, its ipc calls go through the session socket, and the
// session's files are mounted read-only where Claude Code reads them.
func TestContainerSession(t *testing.T) {
	c := startCore(t, dockerConfig(t, ""))
	stdout, stderr, exit, info := runAgent(t, c, api.SessionRequest{Group: "main", Runtime: "docker",
		Prompt: "tool.invoke.echo {\"message\":\"hello from the container\"}\ntool.invoke.memory_store {\"type\":\"fact\",\"content\":\"The container agent was here\"}"})
	if exit != 0 || !strings.Contains(stdout, `"message":"hello from the container"`) || !strings.Contains(stdout, `"id":"mem-`) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", exit, stdout, stderr)
	}
	if info.Runtime != "docker" {
		t.Errorf("session runtime %q", info.Runtime)
	}
	var routed int
	for _, e := range c.Audit(t) {
		if e.Session == info.ID && e.Stage == audit.StageRoute {
			routed++
		}
	}
	if routed != 2 {
		t.Errorf("%d routed calls of the container's session in the audit log, want 2", routed)
	}
	// The session is over: its container is gone, and so are its files.
	waitFor(t, "the session to close", func() bool {
		return len(containersOf(t, runtime.LabelSession, info.ID)) == 0 && !exists(info.ClaudeMD)
	})

	// The next session: the brief, the skills and the settings are where
	// Claude Code reads them, and read-only.
	script := `cat ~/.claude/CLAUDE.md; ls ~/.claude/skills; cat ~/.claude/settings.json
for f in ~/.claude/CLAUDE.md ~/.claude/settings.json ~/.claude/skills/echo/SKILL.md; do
  if echo x >> "$f" 2>/dev/null; then echo "WROTE $f"; fi
done
echo scratch > ~/.claude/state && echo state-ok
cat /proc/self/mountinfo
echo work > /workspace/note && echo workspace-ok`
	stdout, stderr, exit, _ = runAgent(t, c, api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"--exec", "sh", "-c", script}})
	for _, want := range []string{"- [fact] `The container agent was here", "carapace-core", "echo", "memory", `"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"`, "state-ok", "workspace-ok", "You run in an isolated container"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("container output lacks %q\nstdout:\n%s\nstderr:\n%s", want, stdout, stderr)
		}
	}
	if exit != 0 || strings.Contains(stdout, "WROTE") {
		t.Errorf("exit %d; a read-only file was written:\n%s", exit, stdout)
	}
	// Nothing of the core's own is mounted: no plugin data, credentials,
	// audit log, other sessions' sockets or the core's control socket.
	for _, l := range strings.Split(stdout, "\n") {
		for _, bad := range []string{"/data/", "/credentials", "/logs", "audit", "control.sock", "pins.json", "config.toml", "/plugins"} {
			if strings.Contains(l, string(c.Home)) && strings.Contains(l, bad) {
				t.Errorf("the container has a mount of the core's %s: %s", bad, l)
			}
		}
	}
	var homeMounts int
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, string(c.Home)) {
			homeMounts++
		}
	}
	if want := 7 + len(claudemd.ShadowedWorkspace) + len(claudemd.ShadowedClaude); homeMounts != want {
		t.Errorf("%d mounts from the core's home, want %d (socket, model API socket, workspace, state, skills, CLAUDE.md, settings.json, and the shadows):\n%s", homeMounts, want, stdout)
	}
	note, err := os.ReadFile(c.Home.Path("groups", "main", "workspace", "note"))
	if err != nil || string(note) != "work\n" {
		t.Errorf("the workspace is not the group's folder: %q, %v", note, err)
	}
	if _, err := os.Stat(c.Home.Path("groups", "main", "claude", "state")); err != nil {
		t.Errorf("Claude Code's state is not kept with the group: %v", err)
	}

	// The real carapace binary: a command runs in the container as it
	// would with the runtime none, and its status is carapace's.
	out, errOut, code := runCLI(t, c.Home, "run", "--group", "main", "--runtime", "docker", "--", "ipc", "tool.invoke.echo", `{"message":"via the cli"}`)
	if code != 0 || !strings.Contains(out, `{"message":"via the cli"}`) {
		t.Errorf("carapace run -- ipc: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, _, code := runCLI(t, c.Home, "run", "--group", "main", "--runtime", "docker", "--", "sh", "-c", "exit 3"); code != 3 {
		t.Errorf("carapace run -- sh -c 'exit 3': exit %d", code)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Closing the session, stopping the core and restarting after a crash each
// leave no container behind.
func TestContainerLifecycle(t *testing.T) {
	c := startCore(t, dockerConfig(t, ""))
	ctx := context.Background()

	// Closed by the client while the agent runs.
	h, err := c.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"--exec", "sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	id := h.Info().ID
	waitFor(t, "the container to run", func() bool { return len(containersOf(t, runtime.LabelSession, id)) == 1 })
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the container to go", func() bool { return len(containersOf(t, runtime.LabelSession, id)) == 0 })

	// Stopped with the core.
	h, err = c.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"--exec", "sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	id = h.Info().ID
	waitFor(t, "the container to run", func() bool { return len(containersOf(t, runtime.LabelSession, id)) == 1 })
	if err := c.Stop(t); err != nil {
		t.Fatal(err)
	}
	if n := containersOf(t, runtime.LabelSession, id); len(n) != 0 {
		t.Errorf("containers left after the core stopped: %v", n)
	}

	// Left by a core that crashed: removed when the next one starts.
	sum := sha256.Sum256([]byte(c.Home))
	instance := hex.EncodeToString(sum[:6])
	out, err := exec.Command("docker", "run", "-d", "--network", "none", "--label", runtime.LabelInstance+"="+instance,
		"--label", runtime.LabelSession+"=s-leftover", agentImage(t), "--exec", "sleep", "300").CombinedOutput()
	if err != nil {
		t.Fatalf("start a leftover container: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", strings.TrimSpace(string(out))).Run() })
	c2, err := runCore(t, c.Home, coreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := containersOf(t, runtime.LabelInstance, instance); len(n) != 0 {
		t.Errorf("a leftover container survived the next start: %v", n)
	}
	if !strings.Contains(c2.Log.String(), "removed a container left by a previous core") {
		t.Error("the removal is not logged")
	}
}

// An unknown image or an engine that is not there is a clear error, and
// no session is left open.
func TestContainerSessionErrors(t *testing.T) {
	testutil.RequireDocker(t, "the first session asks the real engine for an image it does not have")
	c := startCore(t, "[runtime]\nengine = \"docker\"\nimage = \"carapace-no-such-image:1\"\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := c.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "docker", Prompt: "tool.invoke.echo {}"})
	if err != nil {
		t.Fatal(err)
	}
	var last api.Output
	for o := range h.Output() {
		last = o
	}
	h.Close()
	if last.Error == "" || !strings.Contains(last.Error, "carapace-no-such-image") {
		t.Errorf("last output %+v: want an error naming the image", last)
	}

	c2 := startCore(t, "[runtime]\nengine = \"none\"\n")
	if _, err := c2.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "container", Prompt: "x"}); err == nil ||
		!strings.Contains(err.Error(), `runtime.engine = "none"`) {
		t.Errorf("container session with engine none: %v", err)
	}
	if _, err := c2.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "podman", Prompt: "x"}); err == nil {
		t.Error("a podman session without podman opened")
	}
	if n := len(c2.sessionList(t)); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
}

// sessionList lists the core's sessions.
func (c *testCore) sessionList(t *testing.T) []api.Session {
	t.Helper()
	ss, err := c.Client.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// [sessions]: a group runs at most max_per_group containers, the next
// waits in the queue, the one after is refused; an idle session's
// container is stopped.
func TestContainerSessionLimits(t *testing.T) {
	// The idle timeout counts from the container's start; 3 s leaves the
	// sessions that do call room on a loaded machine.
	c := startCore(t, dockerConfig(t, "[sessions]\nmax_per_group = 1\nqueue = 1\nidle_timeout = \"3s\"\n"))
	ctx := context.Background()
	sleeper := api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"--exec", "sleep", "300"}}

	first, err := c.Client.Open(ctx, sleeper)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	waiting := make(chan *control.SessionHandle, 1)
	go func() {
		h, err := c.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "docker", Prompt: "tool.invoke.echo {\"message\":\"queued\"}"})
		if err != nil {
			t.Error(err)
		}
		waiting <- h
	}()
	// The queue holds one: wait until the second request is in it, then
	// a third is refused.
	// It is queued before the core opens its session, so nothing shows
	// from outside but time: give it a moment to reach the queue.
	time.Sleep(300 * time.Millisecond)
	if n := len(c.sessionList(t)); n != 1 {
		t.Fatalf("%d sessions open while one may run", n)
	}
	if _, err := c.Client.Open(ctx, sleeper); err == nil || !strings.Contains(err.Error(), "1 agent sessions running and 1 waiting") {
		t.Fatalf("third session: %v, want a refusal naming the limits", err)
	}
	// Another group is not held up.
	other, _, exit, _ := runAgent(t, c, api.SessionRequest{Group: "other", Runtime: "docker", Prompt: "tool.invoke.echo {\"message\":\"other group\"}"})
	if exit != 0 || !strings.Contains(other, "other group") {
		t.Errorf("another group's session: exit %d\n%s", exit, other)
	}

	// The first session makes no request: it is stopped as idle, and the
	// queued one runs.
	var last api.Output
	for o := range first.Output() {
		last = o
	}
	if !strings.Contains(last.Error, "no request for 3s") {
		t.Errorf("idle session ended with %+v", last)
	}
	h := <-waiting
	if h == nil {
		t.Fatal("the queued session did not open")
	}
	defer h.Close()
	var out strings.Builder
	for o := range h.Output() {
		out.WriteString(o.Data)
		if o.Exit != nil && *o.Exit != 0 {
			t.Errorf("queued session exit %d", *o.Exit)
		}
	}
	if !strings.Contains(out.String(), "queued") {
		t.Errorf("queued session output:\n%s", out.String())
	}
}

// channelKit is a channel plugin for the tests: its tool publishes a
// message.inbound event, as a chat channel does when a message arrives.
type channelKit struct{ svc plugin.Services }

const channelKitManifest = `{
  "description": "test channel", "version": "1.0.0", "app_compat": ">=0.1.0", "author": {"name": "tests"},
  "provides": {"channels": ["test"], "tools": [
    {"name": "chan_inbound", "description": "publish message.inbound", "risk_level": "low",
     "arguments_schema": {"type": "object", "additionalProperties": false, "required": ["group", "text"], "properties": {
       "group": {"type": "string", "maxLength": 64}, "text": {"type": "string", "maxLength": 4000}}}}
  ]},
  "subscribes": []
}`

func (k *channelKit) Init(_ context.Context, _ map[string]any, svc plugin.Services) error {
	k.svc = svc
	return nil
}
func (k *channelKit) Shutdown(context.Context) error { return nil }
func (k *channelKit) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	group, _ := req.Arguments["group"].(string)
	text, _ := req.Arguments["text"].(string)
	ev := &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Group: group, Payload: plugintest.Payload(map[string]any{"text": text})}
	if err := k.svc.PublishEvent(ctx, ev); err != nil {
		return nil, err
	}
	return map[string]any{"published": true}, nil
}

// An inbound message for a configured group starts an agent session in a
// container; the bus carries agent.started and agent.completed to an
// outside subscriber; a message for another group is logged and dropped.
func TestEventStartsAgentSession(t *testing.T) {
	kit := &channelKit{}
	c := startCoreWith(t, coreOptions{Config: dockerConfig(t, "[groups.main]\n"), Builtins: func(bs []loader.Builtin) []loader.Builtin {
		return append(bs, loader.Builtin{Name: "chan", Manifest: []byte(channelKitManifest), New: func(loader.Env) plugin.Handler { return kit }})
	}})
	remote, err := events.Dial(events.SocketPath(c.Home), plugin.TopicAgentStarted.Name(), plugin.TopicAgentCompleted.Name(), plugin.TopicAgentError.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	time.Sleep(300 * time.Millisecond) // ZeroMQ's slow joiner: let the subscription reach the publisher

	trigger := c.Session(t, "dev")
	r := runIPC(t, trigger.Socket, nil, "tool.invoke.chan_inbound", `{"group":"main","text":"tool.invoke.echo {\"message\":\"started by an event\"}"}`)
	if r.Code != 0 {
		t.Fatalf("chan_inbound: %s", r.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var started, ended *plugin.Event
	for ended == nil {
		ev, err := remote.Recv(ctx)
		if err != nil {
			t.Fatalf("waiting for the agent's events: %v\ncore log:\n%s", err, c.Log.String())
		}
		switch ev.Topic {
		case plugin.TopicAgentStarted.Name():
			started = ev
		default:
			ended = ev
		}
	}
	if started == nil || started.Group != "main" || ended.Topic != plugin.TopicAgentCompleted.Name() || plugintest.Member(ended, "session") != plugintest.Member(started, "session") {
		t.Fatalf("events: started %+v, ended %+v", started, ended)
	}
	session, _ := plugintest.Member(started, "session").(string)
	var echoed bool
	for _, e := range c.Audit(t) {
		echoed = echoed || (e.Session == session && e.Topic == "tool.invoke.echo" && e.Stage == audit.StageResponse && e.Outcome == audit.OutcomeOK)
	}
	if !echoed {
		t.Errorf("the event's agent made no echo call in session %s", session)
	}
	waitFor(t, "the event's session to close", func() bool { return len(containersOf(t, runtime.LabelSession, session)) == 0 })

	// A group without [groups.NAME] starts nothing.
	r = runIPC(t, trigger.Socket, nil, "tool.invoke.chan_inbound", `{"group":"elsewhere","text":"tool.invoke.echo {}"}`)
	if r.Code != 0 {
		t.Fatalf("chan_inbound: %s", r.Stderr)
	}
	waitFor(t, "the drop to be logged", func() bool {
		return strings.Contains(c.Log.String(), "event dropped: its group is not configured")
	})
	for _, s := range c.sessionList(t) {
		if s.Group == "elsewhere" {
			t.Errorf("a session started for an unconfigured group: %+v", s)
		}
	}
}

// An agent image the engine does not have: carapace run says which, that
// it is never pulled, and the commands that fix it; the image the config
// names exists and runs (the positive control).
func TestMissingImageNamesTheFix(t *testing.T) {
	testutil.RequireDocker(t, "the engine must answer for the image to be found missing")
	missing := "carapace-agent-absent:" + strings.ToLower(t.Name()[:8]) + fmt.Sprint(os.Getpid())
	c := startCore(t, fmt.Sprintf("[runtime]\nengine = \"docker\"\nimage = %q\nmemory_mb = 256\n", missing))
	_, errOut, code := runCLI(t, c.Home, "run", "--group", "main", "--runtime", "docker", "--", "true")
	for _, want := range []string{"the agent image " + missing + " is not in docker's images", "carapace setup --build-image", "carapace setup --image IMAGE"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("carapace run with the image missing: exit %d, stderr lacks %q:\n%s", code, want, errOut)
		}
	}
	ok := startCore(t, dockerConfig(t, ""))
	if _, errOut, code := runCLI(t, ok.Home, "run", "--group", "main", "--runtime", "docker", "--", "true"); code != 0 {
		t.Fatalf("with the image there: exit %d\n%s", code, errOut)
	}
}
