package agent

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/provenance"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/google/uuid"
)

// stopTimeout bounds how long closing a container session waits for its
// container to go (engines stop with a grace period, then kill).
const stopTimeout = 20 * time.Second

// containers tracks the agent containers the core runs.
type containers struct {
	mu      sync.Mutex
	engines map[string]runtime.Engine // checked engines, by name
	infos   map[string]runtime.Info   // what their Check said, by name
	live    map[string]*agentRun      // by session id
	slots   groupSlots
}

// agentRun is one running agent container.
type agentRun struct {
	stopping atomic.Bool  // cancelled: the container is on its way out
	started  atomic.Int64 // when the engine's Run began (unix ns); 0 before
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed when Run has returned
	closed   chan struct{} // closed when the session closes: output is no longer read
}

// newEngine returns the engine named name, unchecked.
func (r *Runner) newEngine(name string) (runtime.Engine, error) {
	if r.opts.NewEngine == nil {
		return nil, fmt.Errorf("this core was built without container engines, so it cannot run %q", name)
	}
	return r.opts.NewEngine(name)
}

// engine returns the engine a session request names, checked once: "container"
// means config.toml's [runtime] engine, "auto" the first of Apple
// container (on macOS), Docker and Podman that is ready. "none" is never
// chosen here.
func (r *Runner) engine(ctx context.Context, name string) (runtime.Engine, error) {
	if name == "container" {
		name = r.cfg.Runtime.Engine
	}
	if name == "none" {
		return nil, fmt.Errorf("%w: config.toml sets runtime.engine = \"none\": no container engine is configured (set it to \"auto\", \"docker\", \"podman\" or \"apple\")", api.ErrInvalid)
	}
	candidates := runtime.Candidates(name)
	r.ctrs.mu.Lock()
	defer r.ctrs.mu.Unlock()
	var errs []error
	for _, c := range candidates {
		if e, ok := r.ctrs.engines[c]; ok {
			return e, nil
		}
		e, err := r.newEngine(c)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", api.ErrInvalid, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		info, err := e.Check(cctx)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.log.Info("container engine ready", "engine", info.Engine, "version", info.Version, "bin", info.Bin, "found", info.BinFrom)
		r.ctrs.engines[c] = e
		r.rememberEngine(c, info)
		return e, nil
	}
	return nil, fmt.Errorf("%w: no container engine is ready: %w", api.ErrConflict, errors.Join(errs...))
}

// instanceID tells this core's containers from another core's on the same
// engine: a hash of its home.
func (r *Runner) instanceID() string {
	h := sha256.Sum256([]byte(r.opts.Home))
	return hex.EncodeToString(h[:6])
}

// removeLeftovers stops and removes containers a core on this home left
// behind when it crashed. It runs at start, before any session, when a
// container engine is configured and ready.
func (r *Runner) removeLeftovers(ctx context.Context) {
	if r.cfg.Runtime.Engine == "none" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e, err := r.engine(ctx, "container")
	if err != nil {
		r.log.Info("no container engine ready at start; agent containers will need one", "err", err)
		return
	}
	names, err := e.List(ctx, runtime.LabelInstance, r.instanceID())
	if err != nil {
		r.log.Warn("could not list containers left by a previous core", "err", err)
		return
	}
	for _, n := range names {
		if err := e.Stop(ctx, n); err != nil {
			r.log.Warn("could not remove a container left by a previous core", "container", n, "err", err)
			continue
		}
		r.log.Warn("removed a container left by a previous core", "container", n)
	}
}

// groupDirs creates the group's workspace and Claude Code state folders,
// $CARAPACE_HOME/groups/<group>/{workspace,claude}, owned by the user the
// agent runs as.
func (r *Runner) groupDirs(group string) (workspace, claude string, err error) {
	base := r.opts.Home.Path("groups", group)
	workspace, claude = filepath.Join(base, "workspace"), filepath.Join(base, "claude")
	for _, d := range []string{workspace, claude} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", fmt.Errorf("group folder: %w", err)
		}
		if os.Getuid() == 0 {
			// A core run as root runs the agent as 1000:1000, never as root.
			if err := os.Chown(d, 1000, 1000); err != nil {
				return "", "", fmt.Errorf("group folder: %w", err)
			}
		}
	}
	return workspace, claude, nil
}

// agentUser is the uid:gid the agent runs as: the core's own user, so that
// what the agent writes in the workspace is the user's; 1000:1000 when the
// core runs as root, so that the agent never does.
func agentUser() string {
	if os.Getuid() == 0 {
		return runtime.AgentUser
	}
	return strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
}

// promptFile is the prompt's file in the session's agent folder, and its
// path in the container: never the environment, which engines show in
// their inspect output.
const (
	promptFile      = "prompt"
	promptContainer = "/run/carapace/prompt"
)

// containerSpec is the container of session info (openContainerSession),
// continuing or starting conversation conv if it is not nil, with a
// probe's additions when x is not nil.
func (r *Runner) containerSpec(info session.Info, req api.SessionRequest, conv *convRef, x *probeExtras) (runtime.Spec, error) {
	workspace, claude, err := r.groupDirs(info.Group)
	if err != nil {
		return runtime.Spec{}, err
	}
	if x != nil && x.prepare != nil {
		if err := x.prepare(workspace); err != nil {
			return runtime.Spec{}, err
		}
	}
	if !r.opts.NoShadows {
		if err := shadowTargets(workspace, claudemd.ShadowedWorkspace); err != nil {
			return runtime.Spec{}, err
		}
		if err := shadowTargets(claude, claudemd.ShadowedClaude); err != nil {
			return runtime.Spec{}, err
		}
	}
	dir := r.agentDir(info.ID)
	image := cmp.Or(r.cfg.Runtime.Image, runtime.Image(r.opts.Version))
	spec := runtime.Spec{
		Name:  "carapace-" + info.ID,
		Image: image,
		Labels: map[string]string{
			runtime.LabelSession: info.ID, runtime.LabelInstance: r.instanceID(), runtime.LabelVersion: r.opts.Version,
		},
		Mounts: []runtime.Mount{
			{Source: info.Socket, Target: runtime.SocketPath},
			{Source: workspace, Target: runtime.WorkspacePath},
			{Source: claude, Target: runtime.ClaudeDir},
			{Source: filepath.Join(dir, "skills"), Target: runtime.SkillsPath, ReadOnly: true},
			{Source: filepath.Join(dir, claudeFile), Target: runtime.ClaudeMDPath, ReadOnly: true},
			{Source: filepath.Join(dir, settingsFile), Target: runtime.SettingsPath, ReadOnly: true},
			{Source: r.llmSocket(info.ID), Target: llmSocketContainer},
		},
		Env: []string{
			"HOME=" + runtime.HomePath,
			"CARAPACE_IPC_ENDPOINT=ipc://" + runtime.SocketPath,
			"CARAPACE_SESSION=" + info.ID,
			"CARAPACE_GROUP=" + info.Group,
		},
		Cmd:    req.Command,
		User:   agentUser(),
		Limits: runtime.Limits{CPUs: r.cfg.Runtime.CPUs, MemoryMB: r.cfg.Runtime.MemoryMB, Pids: r.cfg.Runtime.Pids},
	}
	if !r.opts.NoShadows {
		spec.Mounts = append(spec.Mounts, shadowMounts(dir)...)
	}
	spec.Env = append(spec.Env, r.llmEnv(info.ID, info.Group)...)
	if len(req.Command) == 0 { // the image's agent: its entrypoint says when it is done (done.go)
		spec.Env = append(spec.Env, envDone+"="+newDoneToken())
	}
	if req.Prompt != "" {
		spec.Mounts = append(spec.Mounts, runtime.Mount{Source: filepath.Join(dir, promptFile), Target: promptContainer, ReadOnly: true})
		spec.Env = append(spec.Env, "CARAPACE_PROMPT_FILE="+promptContainer)
	}
	if x != nil {
		x.apply(&spec)
	}
	if conv != nil {
		spec.Env = append(spec.Env, "CARAPACE_CONVERSATION="+conv.id)
		if !conv.resume {
			spec.Env = append(spec.Env, "CARAPACE_CONVERSATION_NEW=1")
		}
	}
	return spec, spec.Check()
}

// conversationNS names Carapace's conversation ids (UUIDv5).
var conversationNS = uuid.MustParse("7d3b2a1e-6c54-4f0e-9a43-2b8f1c0d5e61")

// conversation returns the Claude Code session id of a group's named
// conversation — derived from its origin (the plugin whose event names it,
// OriginTask, or "" for the control API), the group and the name, so that
// nothing has to be stored and no plugin can name another's conversation
// into resuming it — and whether it exists already: Claude Code keeps its
// transcript in the group's state as projects/-workspace/<id>.jsonl. The
// image's entrypoint starts it with --session-id or continues it with
// --resume (CARAPACE_CONVERSATION, CARAPACE_CONVERSATION_NEW). Neither
// plugin names nor group names hold a NUL, so the three cannot run into
// one another.
func conversation(claudeDir, origin, group, name string) (id string, exists bool) {
	id = uuid.NewSHA1(conversationNS, []byte(origin+"\x00"+group+"\x00"+name)).String()
	_, err := os.Stat(filepath.Join(claudeDir, "projects", "-workspace", id+".jsonl"))
	return id, err == nil
}

// convRef is the named conversation a session continues (resume) or
// starts, as conversation found it once: the session's taint
// (startProvenance) and its container (containerSpec) go by the same
// answer.
type convRef struct {
	id     string
	resume bool
}

// sessionConversation is the conversation req names, for origin, or nil
// when it names none.
func (r *Runner) sessionConversation(req api.SessionRequest, origin string) *convRef {
	if req.Conversation == "" {
		return nil
	}
	id, resume := conversation(r.opts.Home.Path("groups", req.Group, "claude"), origin, req.Group, req.Conversation)
	return &convRef{id: id, resume: resume}
}

// openContainerSession opens a session whose agent the core runs in a
// container of the engine req names, and starts it. origin, if not "",
// names what started the session (SessionOrigin): it is recorded as soon
// as the session exists, before its socket is mounted anywhere, so that
// the agent's very first call is judged as that origin's; and the
// conversation req names is that origin's own (conversation).
//
// taint, if not nil, says the event that started the session was
// untrusted: the session starts tainted, and its prompt gives no URLs
// (startProvenance). A session that resumes a tainted conversation starts
// tainted too, and a session of a named conversation hands its taint on
// to it (conversationTaint).
//
// x, if not nil, is a probe's additions to the session's container
// (RunProbe); every session of an agent has none.
func (r *Runner) openContainerSession(ctx context.Context, req api.SessionRequest, origin string, taint *provenance.Taint, x *probeExtras) (api.Session, *api.Agent, error) {
	eng, err := r.engine(ctx, req.Runtime)
	if err != nil {
		return api.Session{}, nil, err
	}
	if sess, agent, ok, err := r.claimWarm(ctx, eng, req, origin, taint, x); ok { // warm.go
		return sess, agent, err
	}
	defer r.warmBehind(req, origin, x)
	release, err := r.ctrs.slots.acquire(ctx, req.Group)
	if err != nil {
		if errors.Is(err, errQueueFull) {
			r.log.Warn("agent session refused: the group's queue is full", "group", req.Group, "err", err)
		}
		return api.Session{}, nil, err
	}
	info, err := r.sessions.Open(req.Group, eng.Name())
	if err != nil {
		release()
		return api.Session{}, nil, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	r.setOrigin(info.ID, origin)
	conv := r.sessionConversation(req, origin)
	r.startProvenance(info, req.Prompt, taint, conv)
	fail := func(err error) (api.Session, *api.Agent, error) {
		release()
		_ = r.sessions.Close(info.ID)
		r.removeAgent(info.ID)
		r.setOrigin(info.ID, "")
		return api.Session{}, nil, err
	}
	if err := r.prepareAgent(ctx, info.ID, req.Group, info.Runtime, req.Prompt); err != nil {
		return fail(err)
	}
	spec, err := r.containerSpec(info, req, conv, x)
	if err != nil {
		return fail(err)
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	// The model API's socket lives until the container is gone, not until
	// it is told to stop: on Apple's runtime one connect to a socket that
	// is no longer there ends the relay for good (reach.go).
	llmCtx, stopLLM := context.WithCancel(context.WithoutCancel(ctx))
	if err := r.startLLMProxy(llmCtx, info, x.counter()); err != nil {
		stopLLM()
		cancel(err)
		return fail(err)
	}
	out := make(chan api.Output, 64)
	run := &agentRun{cancel: cancel, done: make(chan struct{}), closed: make(chan struct{})}
	r.ctrs.mu.Lock()
	r.ctrs.live[info.ID] = run
	r.ctrs.mu.Unlock()
	go func() {
		defer close(run.done)
		defer close(out)
		defer release() // the container is gone: the group's next session may start
		defer stopLLM()
		began := time.Now()
		run.started.Store(began.UnixNano())
		r.log.Info("agent container starting", "session", info.ID, "group", info.Group, "engine", eng.Name(), "image", spec.Image)
		r.opts.Bus.PublishCore(plugin.TopicAgentStarted.Event(info.Group, plugin.AgentStarted{Session: info.ID, Engine: eng.Name()}))
		stdout := stdoutWriter(spec, &outputWriter{stream: "stdout", ch: out, closed: run.closed})
		exit, err := eng.Run(runCtx, spec, runtime.IO{
			Stdout: stdout,
			Stderr: &outputWriter{stream: "stderr", ch: out, closed: run.closed},
		})
		stdout.Flush()
		last := r.agentExit(info, eng, spec, began, exit, err)
		select {
		case out <- last:
		case <-run.closed:
		}
	}()
	return r.View(info), &api.Agent{Output: out}, nil
}

// agentExit reports how the container of session info ended (logged,
// agent.completed or agent.error published) and returns the last output
// of its stream.
func (r *Runner) agentExit(info session.Info, eng runtime.Engine, spec runtime.Spec, began time.Time, exit int, err error) api.Output {
	last := api.Output{Exit: &exit}
	switch {
	case errors.Is(err, runtime.ErrNoImage):
		last = api.Output{Error: fmt.Sprintf("the agent image %s is not in %s's images (it is never pulled): build it with `carapace setup --build-image`, "+
			"or use one you have with `carapace setup --image IMAGE`; `carapace doctor` checks it", spec.Image, eng.Name())}
		r.log.Warn("the agent image is missing", "session", info.ID, "image", spec.Image, "engine", eng.Name(), "err", err)
		r.agentEnded(plugin.TopicAgentError, info, plugin.AgentEnded{Error: last.Error})
	case err != nil:
		last = api.Output{Error: textutil.OneLine(err.Error())}
		r.log.Warn("agent container ended with an error", "session", info.ID, "err", err, "took", time.Since(began).Round(time.Millisecond))
		r.agentEnded(plugin.TopicAgentError, info, plugin.AgentEnded{Error: last.Error})
	case exit != 0:
		r.log.Info("agent container exited", "session", info.ID, "exit", exit, "took", time.Since(began).Round(time.Millisecond))
		r.agentEnded(plugin.TopicAgentError, info, plugin.AgentEnded{Exit: &exit})
	default:
		r.log.Info("agent container exited", "session", info.ID, "exit", exit, "took", time.Since(began).Round(time.Millisecond))
		r.agentEnded(plugin.TopicAgentCompleted, info, plugin.AgentEnded{Exit: &exit})
	}
	return last
}

// stopContainer stops the agent container of session id, if it has one,
// and waits (bounded) for it to go.
func (r *Runner) stopContainer(id string) {
	r.ctrs.mu.Lock()
	run, ok := r.ctrs.live[id]
	delete(r.ctrs.live, id)
	r.ctrs.mu.Unlock()
	if !ok {
		return
	}
	close(run.closed)
	run.cancel(errors.New("the session was closed"))
	select {
	case <-run.done:
	case <-time.After(stopTimeout):
		r.log.Error("agent container did not stop in time", "session", id)
	}
}

// cancelContainer stops the agent container of session id with cause,
// without closing the session: the agent's stream ends with the cause,
// and the session closes with it. It reports whether there was one.
func (r *Runner) cancelContainer(id string, cause error) bool {
	r.ctrs.mu.Lock()
	run, ok := r.ctrs.live[id]
	r.ctrs.mu.Unlock()
	if !ok || run.stopping.Swap(true) {
		return false
	}
	run.cancel(cause)
	return true
}

// stopAllContainers stops every agent container, in parallel: at shutdown.
func (r *Runner) stopAllContainers() {
	r.ctrs.mu.Lock()
	ids := make([]string, 0, len(r.ctrs.live))
	for id := range r.ctrs.live {
		ids = append(ids, id)
	}
	r.ctrs.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { r.stopContainer(id) })
	}
	wg.Wait()
}

// outputWriter sends an agent's output to its session's stream, in pieces
// of at most maxOutputChunk bytes; once the session is closed it drops it.
type outputWriter struct {
	stream string
	ch     chan<- api.Output
	closed <-chan struct{}
}

const maxOutputChunk = 16 << 10

func (w *outputWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		n := min(len(rest), maxOutputChunk)
		select {
		case w.ch <- api.Output{Stream: w.stream, Data: string(rest[:n])}:
		case <-w.closed:
			return len(p), nil
		}
		rest = rest[n:]
	}
	return len(p), nil
}
