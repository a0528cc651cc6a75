package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/core/api"
)

// maxResponse bounds a response body the client decodes.
const maxResponse = 16 << 20

// baseURL is the URL every request uses; the host is never resolved, the
// transport always dials the control socket.
const baseURL = "http://carapace"

// Client is a typed client of a core's control API. It is safe for
// concurrent use. Requests are bounded only by their contexts.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client of the control socket at socketPath; it does
// not connect until the first request.
func NewClient(socketPath string) *Client {
	c := &Client{socket: socketPath}
	c.hc = &http.Client{Transport: &http.Transport{
		DialContext:        c.dial,
		MaxIdleConns:       2,
		IdleConnTimeout:    30 * time.Second,
		DisableCompression: true,
	}}
	return c
}

// dial connects to the control socket, turning "no socket" and "nobody
// listening" into a NotRunningError.
func (c *Client) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &NotRunningError{Home: homeOf(c.socket)}
		}
		return nil, err
	}
	return conn, nil
}

// homeOf names the home a control socket belongs to, for messages: the
// socket is $CARAPACE_HOME/run/control.sock.
func homeOf(socket string) string {
	if dir := filepath.Dir(socket); filepath.Base(dir) == "run" {
		return filepath.Dir(dir)
	}
	return socket
}

// NotRunningError is returned when no core answers on the control socket.
// It wraps ErrNotRunning.
type NotRunningError struct {
	Home string // the home whose socket was tried
}

// Error says that no core is running and how to start one.
func (e *NotRunningError) Error() string {
	return fmt.Sprintf("no core is running at %s (start one with `carapace serve`)", e.Home)
}

// Unwrap returns ErrNotRunning.
func (e *NotRunningError) Unwrap() error { return ErrNotRunning }

// APIError is an error answer from the control API. It wraps
// api.ErrNotFound, api.ErrInvalid or api.ErrConflict according to its
// status code.
type APIError struct {
	StatusCode int    // the HTTP status
	Message    string // the server's message
}

// Error returns the server's message.
func (e *APIError) Error() string { return e.Message }

// Unwrap returns the sentinel error for the status code, or nil.
func (e *APIError) Unwrap() error {
	switch e.StatusCode {
	case http.StatusNotFound:
		return api.ErrNotFound
	case http.StatusBadRequest:
		return api.ErrInvalid
	case http.StatusConflict:
		return api.ErrConflict
	}
	return nil
}

// CloseIdleConnections closes the connections the client keeps open
// between requests; a program that is done with the client calls it so
// that nothing of it outlives its use.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Status returns the core's status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// Stop asks the core to shut down gracefully. It returns once the core has
// accepted; the core may still be draining.
func (c *Client) Stop(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/stop", nil, nil)
}

// Pause stops (paused) or resumes starting sessions for events, and
// returns the core's status.
func (c *Client) Pause(ctx context.Context, paused bool) (api.Status, error) {
	path := "/v1/resume"
	if paused {
		path = "/v1/pause"
	}
	var st api.Status
	err := c.do(ctx, http.MethodPost, path, nil, &st)
	return st, err
}

// Sessions lists the live sessions.
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var list []api.Session
	err := c.do(ctx, http.MethodGet, "/v1/sessions", nil, &list)
	return list, err
}

// CloseSession closes session id, whoever opened it (DELETE
// /v1/sessions/{id}): the menu-bar app's Stop. The session's own stream
// then ends. An error wrapping api.ErrNotFound says the core has no such
// session (it closed already).
func (c *Client) CloseSession(ctx context.Context, id string) error {
	if err := c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, nil); err != nil {
		return fmt.Errorf("close session %s: %w", id, err)
	}
	return nil
}

// RestartPlugin reloads plugin name from disk in the running core.
func (c *Client) RestartPlugin(ctx context.Context, name string) (api.PluginStatus, error) {
	var st api.PluginStatus
	err := c.do(ctx, http.MethodPost, "/v1/plugins/"+url.PathEscape(name)+"/restart", nil, &st)
	return st, err
}

// OpenSession opens a session for group and keeps its stream open: the
// session lives until Close, until ctx is done, or until this process
// exits, whichever comes first (the core closes a session whose stream
// ends). ctx therefore governs the session's whole life, not just the call:
// do not pass a context with a short timeout.
func (c *Client) OpenSession(ctx context.Context, group string) (*SessionHandle, error) {
	return c.Open(ctx, api.SessionRequest{Group: group})
}

// Open opens a session as req asks; OpenSession's notes apply. For a
// container runtime the core runs the agent: read its output from
// SessionHandle.Output.
func (c *Client) Open(ctx context.Context, req api.SessionRequest) (*SessionHandle, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	hreq, err := http.NewRequestWithContext(sctx, http.MethodPost, baseURL+"/v1/sessions", bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(hreq)
	if err != nil {
		cancel()
		return nil, c.mapError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	dec := json.NewDecoder(resp.Body)
	var info api.Session
	if err := dec.Decode(&info); err != nil {
		cancel()
		resp.Body.Close()
		return nil, fmt.Errorf("open session: read the core's answer: %w", err)
	}
	h := &SessionHandle{c: c, info: info, cancel: cancel, body: resp.Body, done: make(chan struct{}), stop: make(chan struct{})}
	if info.Runtime == "none" || info.Runtime == "" {
		go func() {
			// The core writes nothing more; the read ends when the stream does.
			_, _ = io.Copy(io.Discard, resp.Body)
			close(h.done)
		}()
		return h, nil
	}
	out := make(chan api.Output, 64)
	h.output = out
	go func() {
		defer close(h.done)
		defer close(out)
		for {
			var o api.Output
			if err := dec.Decode(&o); err != nil {
				return
			}
			select {
			case out <- o:
			case <-h.stop: // Close does not wait for a reader
				return
			}
		}
	}()
	return h, nil
}

// SessionHandle is an open session whose stream the client holds.
type SessionHandle struct {
	c      *Client
	info   api.Session
	cancel context.CancelFunc
	body   io.ReadCloser
	done   chan struct{}
	output chan api.Output // container runtimes only
	stop   chan struct{}   // closed by Close

	closeOnce sync.Once
	closeErr  error
}

// Info returns the session as the core opened it.
func (h *SessionHandle) Info() api.Session { return h.info }

// Output carries a container agent's output, ending with an api.Output whose
// Exit or Error is set; it is closed when the stream ends. Nil for the
// runtime "none". Read it until it is closed: the stream waits for it.
func (h *SessionHandle) Output() <-chan api.Output {
	if h.output == nil {
		return nil
	}
	return h.output
}

// Done is closed when the session's stream ends: because the core ended it
// (it is stopping, or the session was closed elsewhere), or after Close or
// the cancellation of OpenSession's context.
func (h *SessionHandle) Done() <-chan struct{} { return h.done }

// Close closes the session (DELETE /v1/sessions/{id}) and then the stream.
// A session the core no longer has, or a core that is no longer running,
// is not an error: either way the session is gone. Close is idempotent.
func (h *SessionHandle) Close() error {
	h.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		err := h.c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(h.info.ID), nil, nil)
		if errors.Is(err, api.ErrNotFound) || errors.Is(err, ErrNotRunning) {
			err = nil
		}
		close(h.stop)
		h.cancel()
		h.body.Close()
		<-h.done
		if err != nil {
			h.closeErr = fmt.Errorf("close session %s: %w", h.info.ID, err)
		}
	})
	return h.closeErr
}

// do sends one request with in (if not nil) as its JSON body and decodes a
// successful answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.mapError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readAPIError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the core's answer: %w", method, path, err)
	}
	return nil
}

// mapError turns transport errors into messages about the core.
func (c *Client) mapError(err error) error {
	if nr, ok := errors.AsType[*NotRunningError](err); ok {
		return nr
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("the core at %s closed the connection without answering (it is stopping, or it does not serve this user): %w",
			homeOf(c.socket), err)
	}
	return err
}

// readAPIError reads an error answer.
func readAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb errorBody
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error == "" {
		eb.Error = fmt.Sprintf("the core answered %s", resp.Status)
	}
	return &APIError{StatusCode: resp.StatusCode, Message: eb.Error}
}
