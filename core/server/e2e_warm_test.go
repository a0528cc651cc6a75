package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/agent"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/runtime/docker"
	"github.com/carapace-dev/carapace/internal/clock"
	"github.com/carapace-dev/carapace/ipc"
)

// fakeClock is a clock.Clock the test moves: AfterFunc's functions run
// when Advance passes their time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	f    func()
	done bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock by d and runs what came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.done {
			return true
		}
		if !t.at.After(c.now) {
			t.done = true
			due = append(due, t.f)
			return true
		}
		return false
	})
	c.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

// pending counts the timers not yet run or stopped.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// startWarmCore starts a core with the test channel plugin and config.
func startWarmCore(t *testing.T, config string, clk clock.Clock) *testCore {
	t.Helper()
	kit := &channelKit{}
	return startCoreWith(t, coreOptions{Config: config, Clock: clk, Builtins: func(bs []loader.Builtin) []loader.Builtin {
		return append(bs, loader.Builtin{Name: "chan", Manifest: []byte(channelKitManifest), New: func(loader.Env) plugin.Handler { return kit }})
	}})
}

// warmOf returns the warm containers of group that `carapace status`
// lists.
func warmOf(t *testing.T, c *testCore, group string) []api.WarmContainer {
	t.Helper()
	st, err := c.Client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []api.WarmContainer
	for _, w := range st.Warm {
		if w.Group == group {
			out = append(out, w)
		}
	}
	return out
}

// waitWarm waits until group has exactly one warm container, listed and
// running, other than those in not; it returns it.
func waitWarm(t *testing.T, c *testCore, group string, not ...string) api.WarmContainer {
	t.Helper()
	var w api.WarmContainer
	waitWithin(t, 90*time.Second, "a warm container of group "+group, func() bool {
		ws := warmOf(t, c, group)
		if len(ws) != 1 || slices.Contains(not, ws[0].Container) {
			return false
		}
		w = ws[0]
		return slices.Contains(warmContainersOf(t, c.Home, group), w.Container)
	})
	return w
}

// warmContainersOf lists the warm containers of group that the core on
// home started (other tests' cores may have theirs).
func warmContainersOf(t *testing.T, h home.Dir, group string) []string {
	t.Helper()
	sum := sha256.Sum256([]byte(h))
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+runtime.LabelInstance+"="+hex.EncodeToString(sum[:6]),
		"--filter", "label="+agent.LabelWarm+"="+group, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// sessionID is the session id a warm container is reserved for.
func sessionID(w api.WarmContainer) string { return strings.TrimPrefix(w.Container, "carapace-") }

// sendEvent publishes a message.inbound for group through the test
// channel, from a session of the group "dev".
func sendEvent(t *testing.T, c *testCore, trigger api.Session, group, text string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"group": group, "text": text})
	mustOK(t, runIPC(t, trigger.Socket, nil, "tool.invoke.chan_inbound", string(b)))
}

// calledBy waits for a call of topic answered ok by a session of group,
// other than those in not, and returns the session.
func calledBy(t *testing.T, c *testCore, topic, group string, not ...string) string {
	t.Helper()
	var id string
	waitWithin(t, 90*time.Second, topic+" from a session of "+group, func() bool {
		for _, e := range c.Audit(t) {
			if e.Topic == topic && e.Group == group && e.Stage == audit.StageResponse && e.Outcome == audit.OutcomeOK && !slices.Contains(not, e.Session) {
				id = e.Session
				return true
			}
		}
		return false
	})
	return id
}

// A warm container serves its own group only: the other group's event is
// served by that group's own warm container while the first one keeps
// waiting, and the first group's event then claims it (the positive
// control). The claimed session's CLAUDE.md carries a memory stored after
// the container was warmed; the claimed container is replaced by another;
// status lists warm containers apart from sessions; a warm container
// mounts nothing of another group.
func TestWarmClaimedByItsGroupOnly(t *testing.T) {
	c := startWarmCore(t, dockerConfig(t, "[groups.main]\n[groups.other]\n[sessions]\nwarm = 1\n"), nil)
	w := watch(t, c)
	trigger := c.Session(t, "dev")
	wMain := waitWarm(t, c, "main")
	wOther := waitWarm(t, c, "other")
	w.find(t, "core.status listing main's warm container", func(ev api.WatchEvent) bool {
		return (ev.Type == api.WatchStatus || ev.Type == api.WatchSnapshot) && ev.Status != nil &&
			slices.ContainsFunc(ev.Status.Warm, func(x api.WarmContainer) bool { return x.Container == wMain.Container && x.Group == "main" })
	})
	for _, s := range c.sessionList(t) {
		if s.ID == sessionID(wMain) || s.ID == sessionID(wOther) {
			t.Errorf("a warm container is listed as a session: %+v", s)
		}
	}
	out, err := exec.Command("docker", "inspect", "--format", "{{range .Mounts}}{{.Source}}\n{{end}}", wMain.Container).Output()
	if err != nil {
		t.Fatalf("docker inspect: %v", err)
	}
	if mounts := string(out); !strings.Contains(mounts, c.Home.Path("groups", "main")) || strings.Contains(mounts, c.Home.Path("groups", "other")) {
		t.Errorf("the warm container of main mounts:\n%s", mounts)
	}

	// Another group's event: served by its own warm container.
	sendEvent(t, c, trigger, "other", `tool.invoke.echo {"message":"for other"}`)
	if got := calledBy(t, c, "tool.invoke.echo", "other"); got != sessionID(wOther) {
		t.Errorf("the event of other ran in session %s, want its warm container's %s", got, sessionID(wOther))
	}
	if ws := warmOf(t, c, "main"); len(ws) != 1 || ws[0].Container != wMain.Container {
		t.Fatalf("main's warm container after other's event: %+v, want %s still waiting", ws, wMain.Container)
	}
	opened := func(id string) func(api.WatchEvent) bool {
		return func(ev api.WatchEvent) bool {
			return ev.Type == api.WatchSessionOpened && ev.Session != nil && ev.Session.ID == id
		}
	}
	if n := w.count(opened(sessionID(wMain))); n != 0 {
		t.Errorf("the watch stream showed main's warm container as a session before its claim")
	}
	w.find(t, "other's claimed session opened on the watch stream", opened(sessionID(wOther)))

	// A memory stored after main's container was warmed is in the brief
	// its session reads.
	dev := c.Session(t, "main")
	memStore(t, dev.Socket, map[string]any{"type": "fact", "content": "The warm cat is called Miso"})
	prompt := "sh grep -q 'The warm cat is called Miso' /home/agent/.claude/CLAUDE.md && ipc tool.invoke.echo '{\"message\":\"brief\"}'\n" +
		"sh grep -q 'never stored' /home/agent/.claude/CLAUDE.md && ipc tool.invoke.tk_count '{}'\n"
	sendEvent(t, c, trigger, "main", prompt)
	claimed := calledBy(t, c, "tool.invoke.echo", "main")
	if claimed != sessionID(wMain) {
		t.Errorf("main's event ran in session %s, want its warm container's %s", claimed, sessionID(wMain))
	}
	w.find(t, "main's claimed session opened on the watch stream", opened(claimed))
	waitFor(t, "the claimed session to end", func() bool { return len(containersOf(t, runtime.LabelSession, claimed)) == 0 })
	for _, e := range c.Audit(t) {
		if e.Topic == "tool.invoke.tk_count" && e.Session == claimed {
			t.Errorf("the brief matched a memory never stored: %+v", e)
		}
	}
	// Replaced: a new warm container for main, none for other's twice.
	next := waitWarm(t, c, "main", wMain.Container)
	if next.Container == wMain.Container {
		t.Errorf("the claimed container came back: %s", next.Container)
	}
	waitWarm(t, c, "other", wOther.Container)
	out2, _, code := runCLI(t, c.Home, "status")
	if code != 0 || !strings.Contains(out2, "warm containers") || !strings.Contains(out2, next.Container) {
		t.Errorf("carapace status: exit %d\n%s", code, out2)
	}
}

// A warm container is stopped when sessions for events are paused (and
// started again on resume), when its image changes, when it waits
// [sessions] warm_idle (then none is started until the group's next
// session, which runs cold), and when the core stops.
func TestWarmStoppedOnPauseImageIdleAndStop(t *testing.T) {
	base := agentImage(t)
	tag := fmt.Sprintf("carapace-warmtest-%d:1", os.Getpid())
	if out, err := exec.Command("docker", "tag", base, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = agentimagetest.Remove(tag) })
	clk := newFakeClock()
	c := startWarmCore(t, fmt.Sprintf("[runtime]\nengine = \"docker\"\nimage = %q\nmemory_mb = 256\n[groups.main]\n[sessions]\nwarm_idle = \"1h\"\n", tag), clk)
	trigger := c.Session(t, "dev")
	w1 := waitWarm(t, c, "main")

	// Pause: stopped; resume: another.
	if _, err := c.Client.Pause(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	waitWithin(t, 60*time.Second, "no warm container while paused", func() bool {
		return len(warmContainersOf(t, c.Home, "main")) == 0 && len(warmOf(t, c, "main")) == 0
	})
	if _, err := c.Client.Pause(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	w2 := waitWarm(t, c, "main", w1.Container)

	// A new image under the same reference: the next check replaces it.
	cid, err := exec.Command("docker", "create", tag).Output()
	if err != nil {
		t.Fatalf("docker create: %v", err)
	}
	if out, err := exec.Command("docker", "commit", "--change", "LABEL carapace.test=changed", strings.TrimSpace(string(cid)), tag).CombinedOutput(); err != nil {
		t.Fatalf("docker commit: %v\n%s", err, out)
	}
	_ = exec.Command("docker", "rm", strings.TrimSpace(string(cid))).Run()
	newID, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", tag).Output()
	if err != nil {
		t.Fatal(err)
	}
	if clk.pending() == 0 {
		t.Fatal("no check of the warm containers is scheduled")
	}
	clk.Advance(30 * time.Second)
	w3 := waitWarm(t, c, "main", w1.Container, w2.Container)
	if len(containersOf(t, runtime.LabelSession, sessionID(w2))) != 0 {
		t.Errorf("the container of the old image is still there: %s", w2.Container)
	}
	img, err := exec.Command("docker", "inspect", "--format", "{{.Image}}", w3.Container).Output()
	if err != nil || strings.TrimSpace(string(img)) != strings.TrimSpace(string(newID)) {
		t.Errorf("the new warm container runs image %s (%v), want %s", img, err, newID)
	}

	// Idle: stopped, and none started again until the next session.
	waitFor(t, "the next check to be scheduled", func() bool { return clk.pending() > 0 })
	clk.Advance(time.Hour)
	waitWithin(t, 60*time.Second, "the idle warm container to stop", func() bool {
		return len(warmContainersOf(t, c.Home, "main")) == 0 && len(warmOf(t, c, "main")) == 0
	})
	time.Sleep(2 * time.Second) // a negative: nothing may start in the meantime
	if ws := warmOf(t, c, "main"); len(ws) != 0 {
		t.Errorf("a warm container started after the idle one: %+v", ws)
	}
	sendEvent(t, c, trigger, "main", `tool.invoke.echo {"message":"cold"}`)
	cold := calledBy(t, c, "tool.invoke.echo", "main")
	for _, w := range []api.WarmContainer{w1, w2, w3} {
		if cold == sessionID(w) {
			t.Errorf("the session after the idle stop ran in warm container %s", w.Container)
		}
	}
	w4 := waitWarm(t, c, "main", w1.Container, w2.Container, w3.Container)

	// Stop: none left.
	if err := c.Stop(t); err != nil {
		t.Fatal(err)
	}
	if n := warmContainersOf(t, c.Home, "main"); len(n) != 0 {
		t.Errorf("warm containers left after the core stopped (%s was the last): %v", w4.Container, n)
	}
}

// carapace serve killed with SIGKILL leaves its warm container; none of
// it survives the next start, which warms a new one built with the new
// config.
func TestWarmNoneLeftAfterSIGKILL(t *testing.T) {
	h := newHome(t)
	write := func(memory int) {
		cfg := fmt.Sprintf("[runtime]\nengine = \"docker\"\nimage = %q\nmemory_mb = %d\n[groups.main]\n", agentImage(t), memory)
		if err := os.WriteFile(h.Config(), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte(h))
	instance := hex.EncodeToString(sum[:6])
	t.Cleanup(func() {
		for _, n := range containersOf(t, runtime.LabelInstance, instance) {
			_ = exec.Command("docker", "rm", "-f", n).Run()
		}
	})
	warm := func() []string { return warmContainersOf(t, h, "main") }
	serve := func() *hostileProc {
		p := hostileStart(t, exec.Command(bins.carapace, "--home", string(h), "serve"))
		waitFor(t, "the core to serve", func() bool { _, _, code := runCLI(t, h, "status"); return code == 0 })
		return p
	}
	write(256)
	first := serve()
	var old []string
	waitWithin(t, 90*time.Second, "a warm container", func() bool { old = warm(); return len(old) == 1 })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 10*time.Second)

	write(300)
	second := serve()
	var now []string
	waitWithin(t, 90*time.Second, "the old warm container gone and a new one", func() bool {
		now = warm()
		return len(now) == 1 && now[0] != old[0] && !slices.Contains(containersOf(t, runtime.LabelInstance, instance), old[0])
	})
	mem, err := exec.Command("docker", "inspect", "--format", "{{.HostConfig.Memory}}", now[0]).Output()
	if err != nil || strings.TrimSpace(string(mem)) != fmt.Sprint(300<<20) {
		t.Errorf("the new warm container's memory: %s (%v), want the new config's %d", mem, err, 300<<20)
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second.wait(t, 60*time.Second)
	if n := containersOf(t, runtime.LabelInstance, instance); len(n) != 0 {
		t.Errorf("containers left after the core stopped: %v", n)
	}
}

// armedEngine is firstCallEngine whose containers make their call once
// the test has set it (armed closed).
type armedEngine struct {
	firstCallEngine
	armed chan struct{}
}

func (e *armedEngine) Run(ctx context.Context, s runtime.Spec, io runtime.IO) (int, error) {
	select {
	case <-e.armed:
	case <-ctx.Done():
		return 143, fmt.Errorf("container %s stopped: %w", s.Name, context.Cause(ctx))
	}
	return e.firstCallEngine.Run(ctx, s, io)
}

// A warm container's socket is mounted before any session claims it; a
// call its agent makes then (which the real entrypoints never do, as they
// wait for the claim) is held until the claim and judged as the
// claimer's: the first call of a warm container claimed by a scheduled
// task is refused as a scheduled session's, and nothing is put to the
// user.
func TestWarmFirstCallIsTheClaimers(t *testing.T) {
	e := &armedEngine{firstCallEngine: firstCallEngine{fakeEngine: fakeEngine{info: homebrewApple}}, armed: make(chan struct{})}
	c := startFakeCore(t, e, "[groups.main]\n")
	own, errs, code := runCLI(t, c.Home, "tasks", "add", "--group", "main", "--every", "1h", "--prompt", "a task to cancel")
	if code != 0 {
		t.Fatalf("tasks add: exit %d\n%s%s", code, own, errs)
	}
	victim := strings.TrimSuffix(strings.Fields(own)[1], ":")
	out, errs, code := runCLI(t, c.Home, "tasks", "add", "--group", "main", "--every", "1h", "--prompt", "anything")
	if code != 0 {
		t.Fatalf("tasks add: exit %d\n%s%s", code, out, errs)
	}
	id := strings.TrimSuffix(strings.Fields(out)[1], ":")
	var warm []api.WarmContainer
	waitWithin(t, 60*time.Second, "a warm container", func() bool {
		st, err := c.Client.Status(context.Background())
		warm = st.Warm
		return err == nil && len(warm) == 1
	})
	e.args = []string{"tool.invoke.cancel_task", `{"id":"` + victim + `"}`}
	close(e.armed)
	time.Sleep(time.Second) // the call leaves before the claim, most likely; it is judged the same either way
	if out, errs, code := runCLI(t, c.Home, "tasks", "run", id); code != 0 {
		t.Fatalf("tasks run: exit %d\n%s%s", code, out, errs)
	}
	var runs []api.TaskRun
	waitWithin(t, 60*time.Second, "the run to end", func() bool {
		runs = taskRuns(t, c.Home, id)
		return len(runs) == 1 && runs[0].State != "claimed" && runs[0].State != "running"
	})
	if runs[0].Session != strings.TrimPrefix(warm[0].Container, "carapace-") {
		t.Fatalf("the run's session is %s, not the warm container %s's", runs[0].Session, warm[0].Container)
	}
	if asked, _ := c.Client.Confirmations(context.Background(), false); len(asked) > 0 {
		t.Fatalf("the warm container's first call was put to the user: %+v", asked)
	}
	calls := e.calls()
	if len(calls) == 0 {
		t.Fatal("the warm container made no call")
	}
	r := calls[0]
	parseIPCRun(t, &r)
	if r.Err == nil || r.Err.Code != ipc.CodeUnauthorized || r.Err.Stage != 4 || !strings.Contains(r.Err.Message, "started by a scheduled task") {
		t.Errorf("the warm container's first call answered %+v (stdout %q)", r.Err, r.Stdout)
	}
	if tk := findTask(taskListOf(t, c.Home), victim); tk == nil {
		t.Error("a warm container's first call cancelled a task")
	}
}

// A warm container never keeps a session waiting: with one slot per group,
// which the warm container holds, a `carapace run` session (which never
// claims one) gets the slot, the warm container being stopped for it; the
// group's next event session then runs, and warms another behind it.
func TestWarmYieldsItsSlot(t *testing.T) {
	c := startWarmCore(t, dockerConfig(t, "[groups.main]\n[sessions]\nmax_per_group = 1\n"), nil)
	trigger := c.Session(t, "dev")
	w1 := waitWarm(t, c, "main")
	out, _, exit, info := runAgent(t, c, api.SessionRequest{Group: "main", Runtime: "docker", Prompt: `tool.invoke.echo {"message":"not warm"}`})
	if exit != 0 || !strings.Contains(out, "not warm") || info.ID == sessionID(w1) {
		t.Fatalf("carapace run's session %s (the warm one was %s): exit %d\n%s", info.ID, sessionID(w1), exit, out)
	}
	if n := warmContainersOf(t, c.Home, "main"); slices.Contains(n, w1.Container) {
		t.Errorf("the warm container that gave up its slot is still there: %v", n)
	}
	sendEvent(t, c, trigger, "main", `tool.invoke.echo {"message":"event"}`)
	calledBy(t, c, "tool.invoke.echo", "main", info.ID)
	waitWarm(t, c, "main", w1.Container)
}

// recordingEngine is a real engine that keeps the Spec of every container
// it runs.
type recordingEngine struct {
	runtime.Engine
	mu    sync.Mutex
	specs []runtime.Spec
}

func (e *recordingEngine) Run(ctx context.Context, s runtime.Spec, io runtime.IO) (int, error) {
	e.mu.Lock()
	e.specs = append(e.specs, s)
	e.mu.Unlock()
	return e.Engine.Run(ctx, s, io)
}

func (e *recordingEngine) recorded() []runtime.Spec {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.specs)
}

// generalSpec is s with its session's id replaced by $SESSION, and its
// environment and mounts sorted.
func generalSpec(s runtime.Spec, id string) runtime.Spec {
	r := strings.NewReplacer(id, "$SESSION")
	out := runtime.Spec{Name: r.Replace(s.Name), Image: s.Image, Labels: map[string]string{}, User: s.User, Limits: s.Limits, Cmd: s.Cmd}
	for k, v := range s.Labels {
		out.Labels[k] = r.Replace(v)
	}
	for _, m := range s.Mounts {
		out.Mounts = append(out.Mounts, runtime.Mount{Source: r.Replace(m.Source), Target: m.Target, ReadOnly: m.ReadOnly})
	}
	for _, e := range s.Env {
		if strings.HasPrefix(e, "CARAPACE_DONE=") { // each container's own token (core/agent/done.go)
			e = "CARAPACE_DONE=$TOKEN"
		}
		out.Env = append(out.Env, r.Replace(e))
	}
	slices.SortFunc(out.Mounts, func(a, b runtime.Mount) int { return strings.Compare(a.Target, b.Target) })
	slices.Sort(out.Env)
	return out
}

// A warm container on Docker is the container a session of its group gets
// — the same image, user, limits, labels, mounts and environment, on the
// same engine, whose flags follow from them — plus only its warm label,
// the read-only claim folder and CARAPACE_WARM(_TIMEOUT, _WAKE).
func TestWarmContainerIsASessionsContainer(t *testing.T) {
	rec := &recordingEngine{Engine: docker.New(docker.Options{})}
	kit := &channelKit{}
	c := startCoreWith(t, coreOptions{Config: dockerConfig(t, "[groups.main]\n"),
		NewEngine: func(name string) (runtime.Engine, error) {
			if name != "docker" {
				return nil, fmt.Errorf("no engine %s in this test", name)
			}
			return rec, nil
		},
		Builtins: func(bs []loader.Builtin) []loader.Builtin {
			return append(bs, loader.Builtin{Name: "chan", Manifest: []byte(channelKitManifest), New: func(loader.Env) plugin.Handler { return kit }})
		}})
	w := waitWarm(t, c, "main")
	_, _, exit, cold := runAgent(t, c, api.SessionRequest{Group: "main", Runtime: "docker", Prompt: `tool.invoke.echo {"message":"cold"}`})
	if exit != 0 {
		t.Fatalf("cold session: exit %d", exit)
	}
	var warmSpec, coldSpec *runtime.Spec
	for _, s := range rec.recorded() {
		switch s.Labels[runtime.LabelSession] {
		case sessionID(w):
			warmSpec = &s
		case cold.ID:
			coldSpec = &s
		}
	}
	if warmSpec == nil || coldSpec == nil {
		t.Fatalf("specs recorded: %+v", rec.recorded())
	}
	got := generalSpec(*warmSpec, sessionID(w))
	if got.Labels[agent.LabelWarm] != "main" {
		t.Errorf("warm label %q", got.Labels[agent.LabelWarm])
	}
	delete(got.Labels, agent.LabelWarm)
	var claim runtime.Mount
	got.Mounts = slices.DeleteFunc(got.Mounts, func(m runtime.Mount) bool {
		if m.Target == "/run/carapace/claim" {
			claim = m
			return true
		}
		return false
	})
	if !claim.ReadOnly || claim.Source != c.Home.Path("run", "agent", "$SESSION", "claim") {
		t.Errorf("claim mount %+v", claim)
	}
	got.Env = slices.DeleteFunc(got.Env, func(e string) bool {
		return e == "CARAPACE_WARM=/run/carapace/claim" || e == "CARAPACE_WARM_WAKE=1" || strings.HasPrefix(e, "CARAPACE_WARM_TIMEOUT=")
	})
	want := generalSpec(*coldSpec, cold.ID)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the warm container, less its additions:\n%+v\na cold session's:\n%+v", got, want)
	}
}
