// Package session owns the agent sessions: each one's trusted state
// (Session: id, group, runtime, rate limiters, recent audit entries), which
// the pipeline reads and handlers' services find in the request context,
// and each one's socket. Each session gets its own ZeroMQ ROUTER on its own
// Unix socket file, and the core knows the session only by the socket a
// message arrived on: nothing in the message, the ZeroMQ routing id or the
// environment can claim another identity, and a connection to no known
// socket never creates a session.
//
// Sockets listen on the hardened transport of ipc/zmtp, so a hostile peer
// cannot make the core allocate beyond the protocol limits, stall the
// socket's handshakes, or share a routing id with another connection. Each
// session has its own receive loop and a bounded number of requests in
// flight, so one session's flood cannot starve another.
package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// maxSocketPath is the shortest sun_path limit of the supported systems
// (macOS: 104 bytes including the terminating NUL).
const maxSocketPath = 103

// Handler is the pipeline, as the session layer uses it.
type Handler interface {
	Handle(ctx context.Context, s *Session, req *ipc.Request, send func(frame []byte, final bool))
	Reject(s *Session, correlation string, werr *ipc.Error, send func(frame []byte, final bool))
}

// Auditor records session lifecycle events.
type Auditor interface {
	Write(e *audit.Entry) error
}

// Options configure a Manager.
type Options struct {
	Home        home.Dir
	Pipeline    Handler
	Audit       Auditor
	Logger      *slog.Logger
	MaxInFlight int           // requests handled at once per session; default 32
	CacheTTL    time.Duration // how long an answer is kept for a retried correlation; default 2m
	MaxSessions int           // default 64
	// Observe, if set, is told when a session opens (opened true) and
	// when it closes, after its socket is gone; it must not call the
	// Manager.
	Observe func(info Info, opened bool)
}

// Manager is safe for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[string]*live
	closed   bool
	closing  sync.WaitGroup // Closes under way, which CloseAll waits for
}

// live is an open session: its trusted state, socket and in-flight work.
type live struct {
	*Session
	m       *Manager
	rejects *rate.Limiter // bounds how often dropped connections are logged
	socket  string
	router  zmq4.Socket
	ctx     context.Context
	cancel  context.CancelFunc
	// Requests are handled by up to MaxInFlight long-lived workers, started
	// on demand. Reusing goroutines matters: a fresh one grows its stack
	// during JSON decoding and schema validation on every request.
	jobs    chan job
	workers int // touched only by the receive loop
	wg      sync.WaitGroup
	cache   *cache
	done    chan struct{}
	// active is when the session last received a message (unix ns): the
	// core stops a container session idle for too long.
	active atomic.Int64
	// reached is when the agent first reached the core (unix ns): a
	// connection accepted on the socket, a message, or MarkReached. The
	// core stops a container session whose agent never does.
	reached atomic.Int64
}

// NewManager returns a manager. It removes sockets a crashed core left behind.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 32
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 2 * time.Minute
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 64
	}
	m := &Manager{opts: opts, log: opts.Logger, sessions: map[string]*live{}}
	stale, _ := filepath.Glob(filepath.Join(opts.Home.SessionsDir(), "*.sock"))
	for _, p := range stale {
		_ = os.Remove(p)
	}
	return m
}

// Info describes an open session.
type Info struct {
	ID      string
	Group   string
	Socket  string
	Runtime string
	Started time.Time
	Active  time.Time // when the session last received a message; Started before the first
	// Reached is when the agent first reached the core: a connection
	// accepted on the session's socket, a message on it, or MarkReached
	// (the core's other socket of the session, the model API's). Zero
	// until then.
	Reached time.Time
}

// Open creates a session of group with its own socket, mode 0666 so a
// container's non-root user can connect to the one file mounted into it.
func (m *Manager) Open(group, runtime string) (Info, error) {
	r, err := m.Reserve(group, runtime)
	if err != nil {
		return Info{}, err
	}
	return m.Activate(r, nil)
}

// Reserved is a session whose socket listens but which is not open yet: no
// message on it is handled, it is not listed, audited or observed, and it
// does not count against MaxSessions until Activate opens it. The core
// reserves the session of a warm container (a container started ahead of
// its first prompt) so that the socket can be mounted into it; its id is
// the session's id once activated. Release it if it is never activated.
type Reserved struct{ l *live }

// ID is the reserved session's id.
func (r Reserved) ID() string { return r.l.ID }

// Socket is the reserved session's socket path.
func (r Reserved) Socket() string { return r.l.socket }

// Reserve creates the socket of a session of group without opening the
// session (Reserved).
func (m *Manager) Reserve(group, runtime string) (Reserved, error) {
	if err := home.CheckGroup(group); err != nil {
		return Reserved{}, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Reserved{}, errors.New("the core is shutting down")
	}
	if len(m.sessions) >= m.opts.MaxSessions {
		m.mu.Unlock()
		return Reserved{}, fmt.Errorf("too many sessions open (%d)", m.opts.MaxSessions)
	}
	m.mu.Unlock()

	id := newID()
	path := m.opts.Home.SessionSocket(id)
	if len(path) > maxSocketPath {
		return Reserved{}, fmt.Errorf("session socket path %s is %d bytes, longer than Unix sockets allow (%d): use a shorter home", path, len(path), maxSocketPath)
	}
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancel := func() { cancelCause(errClosed) } // what a waiting call learns: context.Cause
	router := zmq4.NewRouter(ctx, zmq4.WithTimeout(10*time.Second), zmq4.WithLogger(log.New(slogWriter{m.log}, "", 0)))
	if err := router.Listen(scheme() + "://" + path); err != nil {
		cancel()
		return Reserved{}, fmt.Errorf("listen on session socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		router.Close()
		cancel()
		return Reserved{}, fmt.Errorf("chmod session socket: %w", err)
	}
	return Reserved{&live{
		Session: New(id, group, runtime), m: m, rejects: rate.NewLimiter(1, 10), socket: path, router: router,
		ctx: ctx, cancel: cancel, jobs: make(chan job),
		cache: newCache(m.opts.CacheTTL), done: make(chan struct{}),
	}}, nil
}

// Activate opens reserved session r: it is listed, audited and observed as
// any other, and from now on its messages are handled, those that arrived
// while it was reserved included. first, if not nil, runs before the first
// message is handled, with the session's state available (State): the
// core records there what started the session, so that even a call made
// before the claim is judged as the claimer's. Its start time is now. On
// error r is released.
func (m *Manager) Activate(r Reserved, first func(Info)) (Info, error) {
	l := r.l
	l.Started = time.Now().UTC()
	m.mu.Lock()
	if m.closed || len(m.sessions) >= m.opts.MaxSessions {
		full := !m.closed
		m.mu.Unlock()
		go m.loop(l) // close waits for the loop
		l.close()
		if full {
			return Info{}, fmt.Errorf("too many sessions open (%d)", m.opts.MaxSessions)
		}
		return Info{}, errors.New("the core is shutting down")
	}
	m.sessions[l.ID] = l
	m.mu.Unlock()
	m.audit(l, audit.OutcomeOpened)
	if first != nil {
		first(l.info())
	}
	bySocket.Store(l.socket, l)
	go m.loop(l)
	m.log.Info("session opened", "session", l.ID, "group", l.Group, "runtime", l.Runtime)
	info := l.info()
	if m.opts.Observe != nil {
		m.opts.Observe(info, true)
	}
	return info, nil
}

// Release closes the socket of reserved session r, which was never
// activated.
func (m *Manager) Release(r Reserved) {
	go m.loop(r.l) // close waits for the loop
	r.l.close()
}

func (l *live) info() Info {
	i := Info{ID: l.ID, Group: l.Group, Socket: l.socket, Runtime: l.Runtime, Started: l.Started, Active: l.Started}
	if ns := l.active.Load(); ns != 0 {
		i.Active = time.Unix(0, ns)
	}
	if ns := l.reached.Load(); ns != 0 {
		i.Reached = time.Unix(0, ns)
	}
	return i
}

// markReached records the agent's first contact; later ones change
// nothing.
func (l *live) markReached() {
	l.reached.CompareAndSwap(0, time.Now().UnixNano())
}

// MarkReached records that session id's agent reached the core by another
// way than the session's socket (the model API's socket, which the core
// serves beside it). An unknown id is ignored.
func (m *Manager) MarkReached(id string) {
	m.mu.Lock()
	l, ok := m.sessions[id]
	m.mu.Unlock()
	if ok {
		l.markReached()
	}
}

// State returns the trusted state of open session id.
func (m *Manager) State(id string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.sessions[id]
	if !ok {
		return nil, false
	}
	return l.Session, true
}

// Close ends a session: its socket stops accepting, in-flight work is
// cancelled, and the socket file is removed.
func (m *Manager) Close(id string) error {
	m.mu.Lock()
	l, ok := m.sessions[id]
	delete(m.sessions, id)
	if ok {
		m.closing.Add(1)
		defer m.closing.Done()
	}
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	l.close()
	m.audit(l, audit.OutcomeClosed)
	m.log.Info("session closed", "session", id, "group", l.Group)
	if m.opts.Observe != nil {
		m.opts.Observe(l.info(), false)
	}
	return nil
}

// errClosed is the cause of a closed session's context.
var errClosed = errors.New("the session closed")

// ErrNotFound is returned for an unknown session id.
var ErrNotFound = errors.New("no such session")

// CloseAll closes every session and refuses new ones.
func (m *Manager) CloseAll() {
	m.mu.Lock()
	m.closed = true
	ids := make([]string, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		_ = m.Close(id)
	}
	// A session another goroutine was closing as this began (a client
	// that left) is closed and audited before CloseAll returns, so that
	// nothing of it comes after what the caller records next.
	m.closing.Wait()
}

// List returns the open sessions, oldest first.
func (m *Manager) List() []Info {
	m.mu.Lock()
	out := make([]Info, 0, len(m.sessions))
	for _, l := range m.sessions {
		out = append(out, l.info())
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// Len returns the number of open sessions.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

func (l *live) close() {
	bySocket.Delete(l.socket)
	l.cancel()
	_ = l.router.Close()
	<-l.done
	zmtp.Drain(l.router)
	l.wg.Wait()
	_ = os.Remove(l.socket)
}

func (m *Manager) audit(l *live, outcome string) {
	if m.opts.Audit == nil {
		return
	}
	e := &audit.Entry{Time: time.Now().UTC(), Session: l.ID, Group: l.Group, Source: "core", Stage: audit.StageSession, Outcome: outcome, Reason: "runtime " + l.Runtime}
	if err := m.opts.Audit.Write(e); err != nil {
		m.log.Error("audit log unwritable", "err", err)
	}
}

// loop receives the session's messages. Only this socket's peers reach it,
// so every message here belongs to this session.
func (m *Manager) loop(l *live) {
	defer close(l.done)
	for {
		msg, err := l.router.Recv()
		if err != nil {
			if l.ctx.Err() == nil {
				m.log.Warn("session socket receive failed", "session", l.ID, "err", err)
			}
			return
		}
		if msg.Type == zmq4.CmdMsg || len(msg.Frames) < 2 {
			continue
		}
		l.active.Store(time.Now().UnixNano())
		l.markReached()
		j := job{rid: append([]byte(nil), msg.Frames[0]...), frames: msg.Frames[1:]}
		select {
		case l.jobs <- j: // an idle worker took it
			continue
		default:
		}
		if l.workers < m.opts.MaxInFlight {
			l.workers++
			l.wg.Add(1)
			go m.worker(l, j)
			continue
		}
		select { // every worker is busy: wait for one, which holds back the socket
		case l.jobs <- j:
		case <-l.ctx.Done():
			return
		}
	}
}

// job is one received message: the routing id of the connection it came
// on and its frames.
type job struct {
	rid    []byte
	frames [][]byte
}

// worker handles first, then whatever the loop hands it, until the session
// closes.
func (m *Manager) worker(l *live, first job) {
	defer l.wg.Done()
	m.handle(l, first.rid, first.frames)
	for {
		select {
		case j := <-l.jobs:
			m.handle(l, j.rid, j.frames)
		case <-l.ctx.Done():
			return
		}
	}
}

func (m *Manager) handle(l *live, rid []byte, frames [][]byte) {
	send := func(frame []byte, _ bool) { m.send(l, rid, frame) }
	if len(frames) != 1 {
		m.opts.Pipeline.Reject(l.Session, "", ipc.Errorf(ipc.CodeValidationFailed, 1, "a request is exactly one frame holding the wire message; got %d", len(frames)), send)
		return
	}
	raw := frames[0]
	req, werr := ipc.DecodeRequest(raw)
	if werr != nil {
		m.opts.Pipeline.Reject(l.Session, peekCorrelation(raw), werr, send)
		return
	}
	switch st, cached := l.cache.join(req.Correlation, sha256.Sum256(raw), rid); st {
	case joinConflict:
		e := ipc.Errorf(ipc.CodeValidationFailed, 1, "correlation %q was already used for a different request in this session", req.Correlation)
		e.Field = "correlation"
		m.opts.Pipeline.Reject(l.Session, req.Correlation, e, send)
		return
	case joinWaiting:
		for _, f := range cached { // the pending frame, if the original is waiting for the user
			m.send(l, rid, f)
		}
		return
	case joinDone:
		m.send(l, rid, cached[0])
		return
	}
	m.opts.Pipeline.Handle(l.ctx, l.Session, req, func(frame []byte, final bool) {
		for _, w := range l.cache.deliver(req.Correlation, frame, final) {
			m.send(l, w, frame)
		}
	})
}

func (m *Manager) send(l *live, rid, frame []byte) {
	if err := l.router.Send(zmq4.NewMsgFrom(rid, frame)); err != nil && l.ctx.Err() == nil {
		m.log.Warn("send to session failed", "session", l.ID, "err", err)
	}
}

// peekCorrelation extracts a well-formed correlation from a message that
// failed strict decoding, so that its error can still be matched.
func peekCorrelation(raw []byte) string {
	var v struct {
		Correlation string `json:"correlation"`
	}
	// Only the first JSON value: trailing bytes must not hide the id.
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&v) != nil || ipc.CheckCorrelation(v.Correlation) != nil {
		return ""
	}
	return v.Correlation
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "s-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// slogWriter routes zmq4's log.Logger output to slog at debug level: its
// messages describe peers' misbehaviour, which the transport already reports.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("zmq4", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}

// scheme is the session sockets' transport, registered on first use:
// ipc/zmtp's defaults plus hooks that report every connection the
// transport accepts or drops, attributed to its session by the socket
// path.
var scheme = zmtp.Lazy("zipc-session", zmtp.New(zmtp.Options{OnReject: onReject, OnAccept: onAccept}))

var bySocket sync.Map // socket path → *live

// onAccept records that a peer reached a session's socket: on Apple's
// runtime, that the relay into the VM works. It runs on the transport's
// accept loop and only stores a time.
func onAccept(socket string) {
	if v, ok := bySocket.Load(socket); ok {
		v.(*live).markReached()
	}
}

// onReject runs on transport goroutines: it must not block.
func onReject(socket, reason string) {
	v, ok := bySocket.Load(socket)
	if !ok {
		return
	}
	l := v.(*live)
	if !l.rejects.Allow() {
		return // a flood of bad connections must not flood the log
	}
	// The hook runs on the transport's goroutines (the accept loop among
	// them): log and audit off that path. The limiter bounds the goroutines.
	go func() {
		l.m.log.Warn("session socket dropped a connection", "session", l.ID, "group", l.Group, "reason", reason)
		if l.m.opts.Audit != nil {
			_ = l.m.opts.Audit.Write(&audit.Entry{Time: time.Now().UTC(), Session: l.ID, Group: l.Group, Source: "core",
				Stage: audit.StageSession, Outcome: audit.OutcomeRejected, Reason: "transport: " + reason})
		}
	}()
}
