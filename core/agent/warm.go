package agent

// Warm containers: for each group that receives events ([groups.NAME]
// topics), the core keeps [sessions] warm containers (default 1) started
// ahead of the group's next session, so that a channel's message or a
// task's run does not wait for the engine to start one.
//
// A warm container is the container a session of the group would get —
// containerSpec, the same hardened flags, limits and mounts — with a
// session reserved for it (session.Reserved: its socket listens and is
// mounted, but no message on it is handled and it is not listed until it
// is claimed) and its files prepared: the skill tree, the settings, the
// shadows. Two things differ, both read by the image's entrypoint (the
// real one and the test agent): CARAPACE_WARM names a folder mounted
// read-only from the session's agent folder, and the entrypoint waits
// there, before anything of the agent runs, until the core says "go". On
// engines that share the host's kernel (Docker, Podman) it sleeps on a
// FIFO in that folder, "wake", whose other end the core holds open, until
// the core writes "go" into it; on Apple's VM, where a FIFO does not
// cross, it polls for a file "go".
//
// The next session of that group, and only of that group, claims it
// (claimWarm): the reserved session opens with the claimed session's
// origin and provenance recorded before anything can reach it, the core
// renders CLAUDE.md with the memory brief as it is at that moment, writes
// the prompt and the conversation's id, and then "go". CLAUDE.md, the
// prompt and the conversation's id were made empty with the container,
// and the core kept them open (claimFiles): creating a file took
// 0.05-0.9 ms on the test machine's ext4, writing an open one 20 us. The
// session id the agent has (CARAPACE_SESSION) is that session's: it was
// reserved for it.
// A claimed container is never given back: when it ends, its session
// closes as any other; another warm container is started behind it.
//
// A warm container holds one of its group's [sessions] max_per_group
// slots, so its memory and CPU count against the group's limits; one is
// started only in a free slot nobody waits for. It is stopped, and its
// reserved session released, when sessions for events are paused, when
// the core stops, when it has waited [sessions] warm_idle (then no other
// is started for the group until its next session), when what it was
// built with changed (warmPrint: the core's version and config, the
// engine, the image and its id, the plugins that make the skill tree),
// and when its engine ends it (then none is started again for the group
// until its next session, so that a missing image or a dead engine does
// not loop). A core that crashed leaves containers with its instance
// label, which the next one removes before it warms any (removeLeftovers).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/provenance"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/core/skills"
	"github.com/carapace-dev/carapace/internal/clock"
)

// Where a warm container waits for its claim: the folder claimDir of the
// session's agent folder, mounted read-only at warmClaimTarget.
const (
	claimDir        = "claim"
	warmClaimTarget = "/run/carapace/claim"
	// LabelWarm marks a warm container; its value is the group.
	LabelWarm = "carapace.warm"
)

// warmCtr is one warm container.
type warmCtr struct {
	group, engine string
	res           session.Reserved
	fp            string // warmPrint when it was started
	imageID       string // the image's id then; "" if the engine cannot tell
	image         string
	created       time.Time // on the runner's clock
	run           *agentRun
	out           chan api.Output
	files         *claimFiles // what the claim writes

	// guarded by warmPool.mu
	claimed  bool
	dead     bool
	released bool         // its reserved session is gone already
	info     session.Info // the session once claimed
}

// warmPool holds the warm containers, by group.
type warmPool struct {
	mu       sync.Mutex
	groups   map[string][]*warmCtr
	starting map[string]int  // warm containers being started, by group
	held     map[string]bool // groups none is started for until their next session
	stopped  bool
	timer    clock.Timer
}

func (r *Runner) clock() clock.Clock {
	if r.opts.Clock == nil {
		return clock.Real{}
	}
	return r.opts.Clock
}

// warmTarget is how many warm containers each group with topics keeps.
func (r *Runner) warmTarget() int {
	if r.cfg.Runtime.Engine == "none" {
		return 0
	}
	return r.cfg.Sessions.WarmPerGroup()
}

// startWarming starts the warm containers of every group with topics, and
// the check of their idle time and fingerprint. The core's leftovers must
// be removed first.
func (r *Runner) startWarming() {
	if r.warmTarget() == 0 {
		return
	}
	r.warm.mu.Lock()
	if r.warm.groups == nil {
		r.warm.groups, r.warm.starting, r.warm.held = map[string][]*warmCtr{}, map[string]int{}, map[string]bool{}
	}
	r.warm.mu.Unlock()
	r.scheduleWarmCheck()
	for _, g := range r.warmGroups() {
		go r.fillWarm(g)
	}
}

// warmGroups are the groups that receive events.
func (r *Runner) warmGroups() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(r.cfg.Groups)) {
		if len(r.cfg.Groups[name].Topics) > 0 {
			out = append(out, name)
		}
	}
	return out
}

// warmInterval is how often idle time and fingerprints are checked.
func (r *Runner) warmInterval() time.Duration {
	return min(max(r.cfg.Sessions.WarmIdle.Duration/4, 10*time.Millisecond), 30*time.Second)
}

func (r *Runner) scheduleWarmCheck() {
	r.warm.mu.Lock()
	defer r.warm.mu.Unlock()
	if r.warm.stopped {
		return
	}
	r.warm.timer = r.clock().AfterFunc(r.warmInterval(), func() {
		r.checkWarm(context.Background())
		r.scheduleWarmCheck()
	})
}

// fillWarm starts warm containers for group until it has its number, as
// long as free slots allow.
func (r *Runner) fillWarm(group string) {
	if r.warmTarget() == 0 || r.cfg.Groups[group].Topics == nil {
		return
	}
	for {
		r.warm.mu.Lock()
		if r.warm.groups == nil || r.warm.stopped || r.paused.Load() || r.warm.held[group] ||
			r.warmCountLocked(group)+r.warm.starting[group] >= r.warmTarget() {
			r.warm.mu.Unlock()
			return
		}
		r.warm.starting[group]++
		r.warm.mu.Unlock()
		started, err := r.startWarm(group)
		r.warm.mu.Lock()
		r.warm.starting[group]--
		if err != nil {
			r.warm.held[group] = true
		}
		r.warm.mu.Unlock()
		if err != nil {
			r.log.Warn("could not start a warm container; the group's sessions start cold until its next one", "group", group, "err", err)
			return
		}
		if !started {
			return // no free slot: one that frees calls fillWarm again
		}
	}
}

// warmCountLocked counts group's unclaimed warm containers.
func (r *Runner) warmCountLocked(group string) int {
	n := 0
	for _, w := range r.warm.groups[group] {
		if !w.claimed && !w.dead {
			n++
		}
	}
	return n
}

// startWarm starts one warm container for group in a free slot; false
// when there is none.
func (r *Runner) startWarm(group string) (bool, error) {
	ctx := context.Background()
	eng, err := r.engine(ctx, "container")
	if err != nil {
		return false, err
	}
	release, ok := r.ctrs.slots.tryAcquire(group)
	if !ok {
		return false, nil
	}
	res, err := r.sessions.Reserve(group, eng.Name())
	if err != nil {
		release()
		return false, err
	}
	info := session.Info{ID: res.ID(), Group: group, Socket: res.Socket(), Runtime: eng.Name(), Started: time.Now()}
	var files *claimFiles
	fail := func(err error) (bool, error) {
		files.close()
		r.sessions.Release(res)
		r.removeAgent(info.ID)
		release()
		return false, err
	}
	if files, err = r.prepareWarm(info.ID, eng.Name()); err != nil {
		return fail(err)
	}
	spec, err := r.containerSpec(info, api.SessionRequest{Group: group, Prompt: "-"}, nil, nil)
	if err != nil {
		return fail(err)
	}
	spec.Mounts = append(spec.Mounts, runtime.Mount{Source: filepath.Join(r.agentDir(info.ID), claimDir), Target: warmClaimTarget, ReadOnly: true})
	// The entrypoint gives up waiting a minute after the core would have
	// stopped it: a core that died leaves nothing waiting for long.
	spec.Env = append(spec.Env, "CARAPACE_WARM="+warmClaimTarget,
		"CARAPACE_WARM_TIMEOUT="+strconv.Itoa(int((r.cfg.Sessions.WarmIdle.Duration+time.Minute)/time.Second)))
	if files.wake != nil { // the entrypoint leaves if it finds none: its folder is not the core's
		spec.Env = append(spec.Env, "CARAPACE_WARM_WAKE=1")
	}
	spec.Labels[LabelWarm] = group
	if err := spec.Check(); err != nil {
		return fail(err)
	}
	w := &warmCtr{group: group, engine: eng.Name(), res: res, fp: r.warmPrint(eng.Name(), group), image: spec.Image,
		imageID: r.imageID(ctx, eng, spec.Image), created: r.clock().Now(), files: files, out: make(chan api.Output, 64)}
	runCtx, cancel := context.WithCancelCause(context.Background())
	llmCtx, stopLLM := context.WithCancel(context.Background())
	if err := r.startLLMProxy(llmCtx, info, nil); err != nil {
		stopLLM()
		cancel(err)
		return fail(err)
	}
	w.run = &agentRun{cancel: cancel, done: make(chan struct{}), closed: make(chan struct{})}
	r.warm.mu.Lock()
	if r.warm.stopped || r.paused.Load() {
		r.warm.mu.Unlock()
		stopLLM()
		cancel(errors.New("warm containers stopped"))
		return fail(nil)
	}
	r.warm.groups[group] = append(r.warm.groups[group], w)
	r.warm.mu.Unlock()
	r.warmChanged()
	r.log.Info("warm container starting", "group", group, "container", spec.Name, "engine", eng.Name(), "image", spec.Image)
	go r.runWarm(runCtx, w, eng, spec, release, stopLLM)
	return true, nil
}

// claimFiles are the files of a warm container's agent folder that its
// claim writes, made empty and kept open from its start: CLAUDE.md, the
// prompt, and in the claim folder the conversation's id and the FIFO.
// Each is written once. (The mark of a new conversation is created when
// there is one: an entrypoint older than this core takes its presence,
// empty or not, for the mark.)
type claimFiles struct {
	claude, prompt, conv *os.File
	wake                 *os.File // the FIFO's end the core holds; nil on Apple's engine
}

// close closes the files that are open; c may be nil.
func (c *claimFiles) close() {
	if c == nil {
		return
	}
	for _, f := range []*os.File{c.claude, c.prompt, c.conv, c.wake} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// createOpen creates the read-only file path, empty, and returns it open
// for writing: the container sees the file; only the core writes it.
func createOpen(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
}

// prepareWarm writes the agent folder of a warm container's session: what
// prepareAgent writes, with CLAUDE.md and the prompt left empty until the
// claim, and the claim folder (with its FIFO, except on Apple's engine).
// The caller closes the files it returns.
func (r *Runner) prepareWarm(id, engine string) (files *claimFiles, err error) {
	settings := func() (map[string][]byte, error) {
		return map[string][]byte{settingsFile: claudemd.Settings(r.cfg.Confirm.Timeout.Duration)}, nil
	}
	files = &claimFiles{}
	err = r.makeAgentDir(id, true, settings, func(dir string) (err error) {
		claim := filepath.Join(dir, claimDir)
		if err := os.Mkdir(claim, 0o755); err != nil {
			return err
		}
		for _, f := range []struct {
			dst  **os.File
			path string
		}{
			{&files.claude, filepath.Join(dir, claudeFile)},
			{&files.prompt, filepath.Join(dir, promptFile)},
			{&files.conv, filepath.Join(claim, "conversation")},
		} {
			if *f.dst, err = createOpen(f.path); err != nil {
				return err
			}
		}
		if engine == "apple" {
			return nil
		}
		p := filepath.Join(claim, "wake")
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			return err
		}
		// Read-write: the open does not wait for the container, and the
		// pipe lives (with what is written) until the core closes it.
		files.wake, err = os.OpenFile(p, os.O_RDWR|syscall.O_NONBLOCK, 0)
		return err
	})
	if err != nil {
		files.close()
		return nil, err
	}
	return files, nil
}

// runWarm runs warm container w until it exits: unclaimed, its session is
// released; claimed, it ends as a session's container does.
func (r *Runner) runWarm(ctx context.Context, w *warmCtr, eng runtime.Engine, spec runtime.Spec, release func(), stopLLM func()) {
	defer close(w.run.done)
	defer close(w.out)
	defer release() // the group's next session, or warm container, may start
	defer stopLLM()
	stdout := stdoutWriter(spec, &outputWriter{stream: "stdout", ch: w.out, closed: w.run.closed})
	exit, err := eng.Run(ctx, spec, runtime.IO{
		Stdout: stdout,
		Stderr: &outputWriter{stream: "stderr", ch: w.out, closed: w.run.closed},
	})
	stdout.Flush()
	w.files.close()
	r.warm.mu.Lock()
	w.dead = true
	claimed, info, released := w.claimed, w.info, w.released
	if !claimed {
		r.warm.groups[w.group] = slices.DeleteFunc(r.warm.groups[w.group], func(c *warmCtr) bool { return c == w })
		if !w.run.stopping.Load() {
			r.warm.held[w.group] = true
		}
	}
	r.warm.mu.Unlock()
	if !claimed {
		if !released {
			r.sessions.Release(w.res)
		}
		r.removeAgent(w.res.ID())
		r.warmChanged()
		if !w.run.stopping.Load() {
			r.log.Warn("a warm container ended before a session claimed it; the group's sessions start cold until its next one",
				"group", w.group, "container", spec.Name, "exit", exit, "err", err)
		}
		return
	}
	last := r.agentExit(info, eng, spec, time.Unix(0, w.run.started.Load()), exit, err)
	select {
	case w.out <- last:
	case <-w.run.closed:
	}
}

// stopWarm stops warm container w, which the caller took out of the pool,
// and waits (bounded) for it to go.
func (r *Runner) stopWarm(w *warmCtr, why string) {
	if w.run.stopping.Swap(true) {
		return
	}
	r.log.Info("warm container stopped", "group", w.group, "session", w.res.ID(), "why", why)
	w.run.cancel(errors.New(why))
	select {
	case <-w.run.done:
	case <-time.After(stopTimeout):
		r.log.Error("warm container did not stop in time", "group", w.group, "session", w.res.ID())
	}
}

// takeWarm takes out of the pool the unclaimed warm containers for which
// drop is true.
func (r *Runner) takeWarm(drop func(w *warmCtr) bool) []*warmCtr {
	r.warm.mu.Lock()
	defer r.warm.mu.Unlock()
	var out []*warmCtr
	for g, ws := range r.warm.groups {
		r.warm.groups[g] = slices.DeleteFunc(ws, func(w *warmCtr) bool {
			if !w.claimed && !w.dead && drop(w) {
				out = append(out, w)
				return true
			}
			return false
		})
	}
	return out
}

// stopAllWarm stops the given warm containers, in parallel.
func (r *Runner) stopAllWarm(ws []*warmCtr, why string) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { r.stopWarm(w, why) })
	}
	wg.Wait()
}

// pauseWarm stops (paused) or starts again the warm containers.
func (r *Runner) pauseWarm(paused bool) {
	if r.warmTarget() == 0 {
		return
	}
	if paused {
		r.stopAllWarm(r.takeWarm(func(*warmCtr) bool { return true }), "sessions for events are paused")
		return
	}
	for _, g := range r.warmGroups() {
		go r.fillWarm(g)
	}
}

// stopWarming stops every warm container and starts none again: the core
// is stopping.
func (r *Runner) stopWarming() {
	r.warm.mu.Lock()
	r.warm.stopped = true
	if r.warm.timer != nil {
		r.warm.timer.Stop()
	}
	r.warm.mu.Unlock()
	r.stopAllWarm(r.takeWarm(func(*warmCtr) bool { return true }), "the core is stopping")
}

// checkWarm stops the warm containers that waited [sessions] warm_idle
// (holding their group until its next session) and those whose
// fingerprint or image changed (started again), then fills the groups.
func (r *Runner) checkWarm(ctx context.Context) {
	now := r.clock().Now()
	idle := r.cfg.Sessions.WarmIdle.Duration
	ids := map[string]string{} // engine+image → id now
	idled := r.takeWarm(func(w *warmCtr) bool { return now.Sub(w.created) >= idle })
	r.warm.mu.Lock()
	for _, w := range idled {
		r.warm.held[w.group] = true
	}
	var live []*warmCtr
	for _, ws := range r.warm.groups {
		live = append(live, ws...)
	}
	r.warm.mu.Unlock()
	for _, w := range live {
		k := w.engine + "\x00" + w.image
		if _, ok := ids[k]; !ok {
			if eng, err := r.engine(ctx, w.engine); err == nil {
				ids[k] = r.imageID(ctx, eng, w.image)
			}
		}
	}
	stale := r.takeWarm(func(w *warmCtr) bool {
		id, ok := ids[w.engine+"\x00"+w.image]
		return w.fp != r.warmPrint(w.engine, w.group) || ok && id != w.imageID
	})
	r.stopAllWarm(idled, fmt.Sprintf("no session claimed it for %s ([sessions] warm_idle)", idle))
	r.stopAllWarm(stale, "what it was built with changed (config, plugins, image)")
	for _, g := range r.warmGroups() {
		r.fillWarm(g)
	}
}

// imageID is the id of image in eng's store, "" when the engine cannot
// tell.
func (r *Runner) imageID(ctx context.Context, eng runtime.Engine, image string) string {
	ii, ok := eng.(runtime.ImageIdentifier)
	if !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id, err := ii.ImageID(ctx, image)
	if err != nil {
		return "error: " + err.Error()
	}
	return id
}

// warmPrint is what a warm container of group is built with, hashed: the
// core's version and config, the engine, and the plugins (manifests and
// skill files) and intrinsics its skill tree is assembled from. The image's id is checked apart (it
// takes a call to the engine).
func (r *Runner) warmPrint(engine, group string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", r.opts.Version, r.cfg.Digest, engine, group)
	healthy := r.opts.Plugins.Healthy()
	sums := r.manifestSums(healthy)
	for i, p := range healthy {
		fmt.Fprintf(h, "%s\x00%x\x00", p.Name, sums[i])
		if p.Skills == nil {
			continue
		}
		// The plugin's skill files: a plugin reloaded with new ones and
		// the same manifest changes the tree too.
		_ = fs.WalkDir(p.Skills, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, _ := fs.ReadFile(p.Skills, path)
			fmt.Fprintf(h, "%s\x00%d\x00%s\x00", path, len(b), b)
			return nil
		})
	}
	for _, t := range r.opts.Catalog.List() {
		fmt.Fprintf(h, "%s\x00%s\x00", t.Plugin, t.Name)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// manifestPrints caches the digests of the loaded plugins' manifests,
// by manifest: encoding one takes tens of microseconds (its tools'
// schemas), and a claim needs them all. A loaded plugin's manifest does
// not change (a reload parses a new one), so the pointer names the
// digest; the cache holds the plugins of the last call only.
type manifestPrints struct {
	mu   sync.Mutex
	sums map[*manifest.Manifest][sha256.Size]byte
}

// manifestSums returns the digest of each of ps's manifests, in order.
func (r *Runner) manifestSums(ps []skills.Plugin) [][sha256.Size]byte {
	r.prints.mu.Lock()
	defer r.prints.mu.Unlock()
	out := make([][sha256.Size]byte, len(ps))
	next := make(map[*manifest.Manifest][sha256.Size]byte, len(ps))
	for i, p := range ps {
		sum, ok := r.prints.sums[p.Manifest]
		if !ok {
			m, _ := json.Marshal(p.Manifest)
			sum = sha256.Sum256(m)
		}
		out[i], next[p.Manifest] = sum, sum
	}
	r.prints.sums = next
	return out
}

// claimWarm gives the session req asks for a warm container of its group,
// if there is one built as a session's would be now; ok is false when
// there is none, or when the session is not one warm containers serve (a
// command, a probe, a session not started by an event).
func (r *Runner) claimWarm(ctx context.Context, eng runtime.Engine, req api.SessionRequest, origin string, taint *provenance.Taint, x *probeExtras) (api.Session, *api.Agent, bool, error) {
	if r.warmTarget() == 0 {
		return api.Session{}, nil, false, nil
	}
	// Warm containers built otherwise than a session would be now go.
	fp := r.warmPrint(eng.Name(), req.Group)
	stale := r.takeWarm(func(c *warmCtr) bool { return c.group == req.Group && (c.engine != eng.Name() || c.fp != fp) })
	go r.stopAllWarm(stale, "what it was built with changed (config, plugins, engine)")
	if x != nil || len(req.Command) > 0 || origin == "" {
		r.yieldWarm(req.Group)
		return api.Session{}, nil, false, nil
	}
	r.warm.mu.Lock()
	if r.warm.groups == nil {
		r.warm.mu.Unlock()
		return api.Session{}, nil, false, nil
	}
	delete(r.warm.held, req.Group) // a session of the group: warm containers again
	var w *warmCtr
	for _, c := range r.warm.groups[req.Group] {
		if !c.claimed && !c.dead && c.group == req.Group && c.engine == eng.Name() && c.fp == fp {
			w = c
			break
		}
	}
	if w != nil {
		w.claimed = true
		r.warm.groups[req.Group] = slices.DeleteFunc(r.warm.groups[req.Group], func(c *warmCtr) bool { return c == w })
	}
	r.warm.mu.Unlock()
	if w == nil {
		r.yieldWarm(req.Group)
		return api.Session{}, nil, false, nil
	}
	r.warmChanged()
	// What started the session is recorded before any message on its
	// socket is handled, even one sent before the claim; its taint and
	// the conversation the container is told go by one answer.
	conv := r.sessionConversation(req, origin)
	info, err := r.sessions.Activate(w.res, func(info session.Info) {
		r.warm.mu.Lock()
		w.info = info // what runWarm reports the container's end with
		r.warm.mu.Unlock()
		r.setOrigin(info.ID, origin)
		r.startProvenance(info, req.Prompt, taint, conv)
	})
	if err != nil { // Activate released the session
		r.warm.mu.Lock()
		w.claimed, w.released = false, true
		r.warm.mu.Unlock()
		w.run.stopping.Store(true)
		w.run.cancel(err)
		return api.Session{}, nil, true, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	w.run.started.Store(time.Now().UnixNano())
	r.ctrs.mu.Lock()
	r.ctrs.live[info.ID] = w.run
	r.ctrs.mu.Unlock()
	if err := r.handOver(ctx, w, info, req, conv); err != nil {
		r.setOrigin(info.ID, "")
		_ = r.Close(ctx, info.ID)
		return api.Session{}, nil, true, err
	}
	r.log.Info("agent session claimed a warm container", "session", info.ID, "group", info.Group, "engine", eng.Name())
	r.opts.Bus.PublishCore(plugin.TopicAgentStarted.Event(info.Group, plugin.AgentStarted{Session: info.ID, Engine: eng.Name()}))
	go r.replaceClaimed(w)
	if w.files.wake != nil {
		// The container is awake already: this is for an older entrypoint.
		if err := writeGo(filepath.Join(r.agentDir(info.ID), claimDir)); err != nil {
			r.log.Warn("warm container: an older entrypoint may not see its claim", "session", info.ID, "err", err)
		}
	}
	return r.View(info), &api.Agent{Output: w.out}, true, nil
}

// replaceAfter bounds how long a claimed warm container's replacement
// waits for the claimed container to go.
const replaceAfter = time.Second

// replaceClaimed starts a warm container behind claimed w once w's
// container has gone, or replaceAfter has passed on the runner's clock,
// whichever comes first. Starting a container is the engine's heaviest
// work (a `docker run` takes most of a core for a third of a second
// here): started at the claim, it slowed the very answer the claim was
// for (make bench: warm round trip 26 → 20 ms, p90 41 → 26 ms without it);
// started when the agent says it is done, the answer's way out to the
// channel (out: 2.2 → 3.4–4.6 ms). A session of the group that comes
// while the claimed agent runs starts cold, as it would have while the
// replacement was starting.
func (r *Runner) replaceClaimed(w *warmCtr) {
	due := make(chan struct{})
	t := r.clock().AfterFunc(replaceAfter, func() { close(due) })
	defer t.Stop()
	select {
	case <-w.run.done:
	case <-due:
	}
	r.fillWarm(w.group)
}

// yieldWarm stops one of group's warm containers when it holds a slot a
// session that cannot claim it (a command, `carapace run`) would
// otherwise wait for: a warm container never keeps a session waiting.
func (r *Runner) yieldWarm(group string) {
	if !r.ctrs.slots.full(group) {
		return
	}
	var taken bool
	ws := r.takeWarm(func(c *warmCtr) bool {
		if taken || c.group != group {
			return false
		}
		taken = true
		return true
	})
	if taken {
		// Until the group's next event session: a warm container started
		// in the slot as it frees would take it from the waiting session.
		r.warm.mu.Lock()
		if r.warm.held != nil {
			r.warm.held[group] = true
		}
		r.warm.mu.Unlock()
	}
	go r.stopAllWarm(ws, "a session of the group that cannot use it needs its slot")
}

// warmBehind starts a warm container behind a session of group that
// started cold, if warm containers serve it.
func (r *Runner) warmBehind(req api.SessionRequest, origin string, x *probeExtras) {
	if x == nil && len(req.Command) == 0 && origin != "" {
		go r.fillWarm(req.Group)
	}
}

// handOver gives claimed warm container w its session: CLAUDE.md with the
// memory brief as it is now, the prompt, the conversation, then "go" —
// into the FIFO, or (Apple's engine) as a new file.
func (r *Runner) handOver(ctx context.Context, w *warmCtr, info session.Info, req api.SessionRequest, conv *convRef) error {
	p := claudemd.Params{Group: info.Group}
	p.Memory, p.Brief = r.memoryBrief(ctx, info.ID, info.Group)
	f := w.files
	for _, wr := range []struct {
		f    *os.File
		data []byte
	}{{f.claude, claudemd.Render(p)}, {f.prompt, []byte(req.Prompt)}} {
		if _, err := wr.f.WriteAt(wr.data, 0); err != nil {
			return fmt.Errorf("session %s: %w", info.ID, err)
		}
	}
	claim := filepath.Join(r.agentDir(info.ID), claimDir)
	if conv != nil {
		if _, err := f.conv.WriteAt([]byte(conv.id), 0); err != nil {
			return fmt.Errorf("session %s: %w", info.ID, err)
		}
		if !conv.resume {
			if err := os.WriteFile(filepath.Join(claim, "conversation-new"), []byte("1"), 0o444); err != nil {
				return fmt.Errorf("session %s: %w", info.ID, err)
			}
		}
	}
	if f.wake == nil {
		return writeGo(claim)
	}
	// A full pipe means the container woke already; the FIFO never
	// blocks the core.
	_, _ = f.wake.Write([]byte("go\n"))
	return nil
}

// writeGo creates the file "go" in the claim folder claim: the signal an
// entrypoint polls for where there is no FIFO (Apple's engine), and, after
// the FIFO's line, for an entrypoint older than this core, which waits for
// the file after the line (a custom image, a stale dev image).
func writeGo(claim string) error {
	if err := os.WriteFile(filepath.Join(claim, "go"), nil, 0o444); err != nil {
		return fmt.Errorf("the claim's go: %w", err)
	}
	return nil
}

// warmChanged tells Options.WarmChanged, if set.
func (r *Runner) warmChanged() {
	if r.opts.WarmChanged != nil {
		r.opts.WarmChanged()
	}
}

// WarmContainers lists the warm containers, unclaimed, by group.
func (r *Runner) WarmContainers() []api.WarmContainer {
	r.warm.mu.Lock()
	defer r.warm.mu.Unlock()
	var out []api.WarmContainer
	for _, g := range slices.Sorted(maps.Keys(r.warm.groups)) {
		for _, w := range r.warm.groups[g] {
			if !w.claimed && !w.dead {
				out = append(out, api.WarmContainer{Group: g, Container: "carapace-" + w.res.ID(), Engine: w.engine, Image: w.image,
					Started: w.created.UTC()})
			}
		}
	}
	return out
}
