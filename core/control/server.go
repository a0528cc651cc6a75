package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/textutil"
)

const (
	// maxRequestBody bounds every request body; the largest real one is a
	// few hundred bytes.
	maxRequestBody = 64 << 10
	// closeTimeout bounds closing a session whose stream has ended.
	closeTimeout = 10 * time.Second
	// internalMessage is all a client learns about an unexpected error.
	internalMessage = "internal error (the core's log has the detail)"
)

// Server serves the control API for a Backend. Create it with NewServer.
type Server struct {
	b      Backend
	logger *slog.Logger
	hs     *http.Server

	done     chan struct{} // closed by Shutdown: ends the held session streams
	doneOnce sync.Once

	mu      sync.Mutex
	streams map[string]*stream // held POST /v1/sessions responses, by session id
	fresh   map[net.Conn]bool  // connections that have not sent a request yet
}

// stream is one held POST /v1/sessions response.
type stream struct {
	cancel context.CancelFunc
	closed bool // closed by DELETE /v1/sessions/{id}: do not close again
}

// NewServer returns a Server for b that logs to logger (slog.Default if nil).
func NewServer(b Backend, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		b:       b,
		logger:  logger,
		done:    make(chan struct{}),
		streams: make(map[string]*stream),
		fresh:   make(map[net.Conn]bool),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	mux.HandleFunc("POST /v1/stop", s.handleStop)
	mux.HandleFunc("POST /v1/pause", func(w http.ResponseWriter, r *http.Request) { s.pause(w, r, true) })
	mux.HandleFunc("POST /v1/resume", func(w http.ResponseWriter, r *http.Request) { s.pause(w, r, false) })
	mux.HandleFunc("POST /v1/sessions", s.handleOpenSession)
	mux.HandleFunc("GET /v1/sessions", s.handleSessions)
	mux.HandleFunc("DELETE /v1/sessions/{id}", s.handleCloseSession)
	mux.HandleFunc("GET /v1/confirmations", s.handleConfirmations)
	mux.HandleFunc("GET /v1/confirmations/{ref}", s.handleConfirmation)
	mux.HandleFunc("POST /v1/confirmations/{id}/approve", s.handleApprove)
	mux.HandleFunc("POST /v1/confirmations/{id}/deny", s.handleDeny)
	mux.HandleFunc("GET /v1/watch", s.handleWatch)
	mux.HandleFunc("POST /v1/plugins/{name}/restart", s.handleRestartPlugin)
	mux.HandleFunc("POST /v1/plugins/{name}/verify", s.handleVerifyPlugin)
	s.registerTasks(mux)
	s.registerProve(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, fmt.Errorf("%s %s: no such endpoint: %w", r.Method, r.URL.Path, api.ErrNotFound))
	})
	s.hs = &http.Server{
		Handler: mux,
		// No ReadTimeout or WriteTimeout: a session stream stays open for
		// as long as its session lives, and net/http would cut it.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ConnState:         s.connState,
	}
	s.hs.RegisterOnShutdown(s.closeFresh)
	return s
}

// connState tracks the connections that have not sent a request yet, for
// Shutdown; one accepted while Shutdown runs is closed at once.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != http.StateNew {
		delete(s.fresh, c)
		return
	}
	select {
	case <-s.done:
		_ = c.Close()
	default:
		s.fresh[c] = true
	}
}

// Serve serves the control API on ln until Shutdown; it then returns nil.
// ln should come from Listen, which checks each peer's uid; Serve makes the
// listener log through the server's logger.
func (s *Server) Serve(ln net.Listener) error {
	if ul, ok := ln.(*uidListener); ok {
		ul.setLogger(s.logger)
	}
	err := s.hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, ends every session stream (the
// sessions are closed through the Backend as their streams end), and waits
// for requests in flight until ctx is done.
//
// Connections that have not sent a request are closed at once. net/http
// would wait up to 5 s for each to send one: an HTTP client keeps the spare
// connections it dialled while another became free, and a silent local
// process could hold one open.
func (s *Server) Shutdown(ctx context.Context) error {
	s.doneOnce.Do(func() { close(s.done) })
	return s.hs.Shutdown(ctx)
}

// closeFresh closes the connections that have not sent a request. net/http
// calls it once Shutdown has closed the listener.
func (s *Server) closeFresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.fresh {
		_ = c.Close()
	}
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st := s.b.Status(r.Context())
	if st.Plugins == nil {
		st.Plugins = []api.PluginStatus{}
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleStop(w http.ResponseWriter, r *http.Request) {
	s.logger.Info("control: stop requested")
	s.b.Stop()
	w.WriteHeader(http.StatusAccepted)
}

// pause pauses or resumes the starting of sessions for events.
func (s *Server) pause(w http.ResponseWriter, r *http.Request, paused bool) {
	st := s.b.Pause(r.Context(), paused)
	s.logger.Info("control: pause set", "paused", paused)
	writeJSON(w, http.StatusOK, st)
}

// handleOpenSession opens a session and holds the response open for as
// long as the session lives: the session is closed when the client goes
// away, when the session is closed through DELETE, or when the server
// shuts down.
func (s *Server) handleOpenSession(w http.ResponseWriter, r *http.Request) {
	var req api.SessionRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := home.CheckGroup(req.Group); err != nil {
		s.writeError(w, r, fmt.Errorf("%w: %w", api.ErrInvalid, err))
		return
	}
	if err := req.Check(); err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, agent, err := s.b.OpenSession(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// From here on the session exists: every path out closes it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st := &stream{cancel: cancel}
	s.mu.Lock()
	s.streams[sess.ID] = st
	s.mu.Unlock()
	defer s.endStream(r, sess.ID, st)

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc, rc := json.NewEncoder(w), http.NewResponseController(w)
	if err := enc.Encode(sess); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	s.logger.Info("control: session stream open", "session", sess.ID, "group", sess.Group, "runtime", sess.Runtime)
	// net/http cancels r.Context when the client's connection closes: it
	// watches the connection once the request body has been read to EOF,
	// which decodeBody guarantees.
	var output <-chan api.Output
	if agent != nil {
		output = agent.Output
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case o, ok := <-output:
			if !ok {
				return // the agent has ended: so does the session
			}
			if enc.Encode(o) != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// endStream unregisters a session stream and closes its session unless
// DELETE already did.
func (s *Server) endStream(r *http.Request, id string, st *stream) {
	s.mu.Lock()
	delete(s.streams, id)
	closed := st.closed
	s.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), closeTimeout)
	defer cancel()
	err := s.b.CloseSession(ctx, id)
	switch {
	case err == nil:
		s.logger.Info("control: session stream ended; session closed", "session", id)
	case errors.Is(err, api.ErrNotFound):
		// Already gone: the core ended it.
	default:
		s.logger.Error("control: close session after its stream ended", "session", id, "err", err)
	}
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	list := s.b.Sessions(r.Context())
	if list == nil {
		list = []api.Session{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) handleCloseSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.b.CloseSession(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.mu.Lock()
	if st, ok := s.streams[id]; ok {
		st.closed = true
		st.cancel()
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// decodeBody decodes a JSON object of at most maxRequestBody bytes from
// r.Body into v and reads the body to EOF.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: the request body is empty", api.ErrInvalid)
		}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return fmt.Errorf("%w: the request body is larger than %d bytes", api.ErrInvalid, maxRequestBody)
		}
		return fmt.Errorf("%w: request body: %v", api.ErrInvalid, err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: request body: data after the JSON object", api.ErrInvalid)
	}
	return nil
}

// errorBody is every error response.
type errorBody struct {
	Error string `json:"error"`
}

// writeError answers with the status for err's sentinel. Only sentinel
// errors reach the client with their text; anything else is logged and
// answered with a generic 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := http.StatusInternalServerError, internalMessage
	switch {
	case errors.Is(err, api.ErrNotFound):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, api.ErrInvalid):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, api.ErrConflict):
		status, msg = http.StatusConflict, err.Error()
	default:
		s.logger.Error("control: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) handleRestartPlugin(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !pluginNameRE.MatchString(name) {
		s.writeError(w, r, fmt.Errorf("plugin name %q: names are kebab-case (a-z, 0-9, single dashes): %w", clipName(name), api.ErrInvalid))
		return
	}
	st, err := s.b.RestartPlugin(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

var pluginNameRE = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// clipName cuts a name a client sent to the length an error message
// quotes.
func clipName(s string) string { return textutil.Clip(s, 64) }
