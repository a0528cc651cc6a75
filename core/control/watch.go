package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/carapace-dev/carapace/core/api"
)

// The watch stream, GET /v1/watch, is how the CLI (`carapace watch`), the
// menu-bar app and tests follow the core without polling (the shape of
// tailscale's WatchIPNBus). The answer is JSON lines of api.WatchEvent: a
// snapshot, then one line per change, in order (core/api's watch.go lists
// the lines).
//
// The watch source is here: a watch first follows the core's changes
// (Backend.Changes: on the core's event bus, the core's own events of the
// watch topics, api.WatchTopics), then takes the snapshot from the
// Backend's listings, so nothing falls between them (a change may show in
// both; apply them as states, not as deltas). Each change is written as
// its line around the payload the core encoded once for the bus: the
// line carries those bytes, never decoded and encoded again. A reader that
// falls behind is cut off — an "end" line if it can still be written,
// else the connection closes — and never slows the core: watch again.
// Unknown types are for newer cores: skip them.

// Change is one change of the core as a watch follows it: the topic it
// came under, which is its line's type; when; and its payload, one JSON
// object as the core encoded it (compact: a line cannot hold a new line),
// which the line carries as it is.
type Change struct {
	Type    string
	Time    time.Time
	Payload json.RawMessage
}

// Changes is a feed of the core's changes for one watch.
type Changes interface {
	// Next returns the next change, in order, waiting for one until ctx
	// ends. It fails with ErrCutOff once the watch fell behind, with
	// ErrStopping once the core stops, and with ctx's error.
	Next(ctx context.Context) (Change, error)
	// Close ends the feed; the server calls it when the stream ends.
	Close()
}

// Why a watch ends, as its "end" line says.
var (
	// ErrCutOff: the watch fell behind and was cut off.
	ErrCutOff = errors.New("the watcher fell behind and was cut off; watch again for a fresh snapshot")
	// ErrStopping: the core is stopping.
	ErrStopping = errors.New("the core is stopping")
)

// watchWriteTimeout bounds writing one line: a reader that takes longer
// is cut off.
const watchWriteTimeout = 10 * time.Second

func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	feed, err := s.b.Changes()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer feed.Close()
	snap, err := json.Marshal(s.snapshot(r.Context()))
	if err != nil {
		s.writeError(w, r, fmt.Errorf("watch: the snapshot: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(line []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		if _, err := w.Write(line); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	end := func(why string) {
		line, _ := json.Marshal(api.WatchEvent{Type: api.WatchEnd, Time: time.Now().UTC(), Error: why})
		write(append(line, '\n'))
	}
	if !write(append(snap, '\n')) {
		return
	}
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	go func() {
		select {
		case <-s.done:
			stop()
		case <-ctx.Done():
		}
	}()
	for {
		c, err := feed.Next(ctx)
		if err != nil {
			s.endWatch(r, err, end)
			return
		}
		line, err := changeLine(c)
		if err != nil {
			s.logger.Warn("control: watch: a change could not be written; skipped", "type", c.Type, "err", err)
			continue
		}
		if !write(line) {
			s.logger.Info("control: watcher cut off: it did not read a line within the write timeout", "timeout", watchWriteTimeout)
			return
		}
	}
}

// endWatch ends a watch whose feed failed with err: with an "end" line
// that says why, unless the client went away.
func (s *Server) endWatch(r *http.Request, err error, end func(why string)) {
	select {
	case <-s.done:
		end(ErrStopping.Error())
		return
	default:
	}
	switch {
	case r.Context().Err() != nil:
	case errors.Is(err, ErrCutOff), errors.Is(err, ErrStopping):
		s.logger.Info("control: watch ended by the core", "why", err)
		end(err.Error())
	default:
		s.logger.Warn("control: watch: the core's changes failed", "err", err)
		end(ErrStopping.Error())
	}
}

// snapshot is a watch's first line: the status, the sessions, the pending
// confirmations, the plugins and, from a TaskBackend, the tasks.
func (s *Server) snapshot(ctx context.Context) api.WatchEvent {
	st := s.b.Status(ctx)
	snap := api.WatchEvent{Type: api.WatchSnapshot, Time: time.Now().UTC(), Status: &st,
		Sessions: s.b.Sessions(ctx), Confirmations: s.b.Confirmations(ctx, false), Plugins: st.Plugins}
	if tb, ok := s.b.(TaskBackend); ok {
		if ts, err := tb.Tasks(ctx); err == nil {
			snap.Tasks = ts
		} else {
			s.logger.Warn("control: watch: the tasks could not be listed for the snapshot", "err", err)
		}
	}
	return snap
}

// watchMembers name the member of api.WatchEvent that carries each
// change's payload; "" for the task changes, whose payload's members
// ({"task": …, "task_run": …}) are the line's own. A type not listed is
// written as its type and time alone.
var watchMembers = map[string]string{
	api.WatchConfirmationRequested: "confirmation", api.WatchConfirmationResolved: "confirmation",
	api.WatchSessionOpened: "session", api.WatchSessionClosed: "session",
	api.WatchPluginHealth: "plugin", api.WatchStatus: "status",
	api.WatchTaskCreated: "", api.WatchTaskChanged: "", api.WatchTaskFired: "", api.WatchTaskFinished: "", api.WatchTaskRemoved: "",
}

// changeLine writes c's line: its type and time as api.WatchEvent writes
// them, then its payload's bytes under their member — the line
// json.Encoder writes for the api.WatchEvent holding the payload decoded,
// without decoding it.
func changeLine(c Change) ([]byte, error) {
	head, err := json.Marshal(api.WatchEvent{Type: c.Type, Time: c.Time})
	if err != nil {
		return nil, err
	}
	member, ok := watchMembers[c.Type]
	if !ok {
		return append(head, '\n'), nil
	}
	p := c.Payload
	if len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' || bytes.ContainsAny(p, "\r\n") {
		return nil, fmt.Errorf("the payload of %s is not one compact JSON object", c.Type)
	}
	line := make([]byte, 0, len(head)+len(member)+len(p)+8)
	line = append(line, head[:len(head)-1]...)
	switch {
	case member != "":
		line = append(line, `,"`+member+`":`...)
		line = append(line, p...)
		line = append(line, '}')
	case len(p) > 2:
		line = append(line, ',')
		line = append(line, p[1:]...)
	default:
		line = append(line, '}')
	}
	return append(line, '\n'), nil
}

// WatchStream is a watch as the client reads it.
type WatchStream struct {
	resp *http.Response
	sc   *bufio.Scanner
}

// Watch starts a watch. Read the snapshot and then the changes with Next;
// Close it when done. ctx governs the whole watch.
func (c *Client) Watch(ctx context.Context) (*WatchStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/v1/watch", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.mapError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxResponse)
	return &WatchStream{resp: resp, sc: sc}, nil
}

// Next returns the next line: the snapshot first. It returns an error
// when the stream ends (io.EOF when it ended cleanly).
func (ws *WatchStream) Next() (api.WatchEvent, error) {
	if !ws.sc.Scan() {
		if err := ws.sc.Err(); err != nil {
			return api.WatchEvent{}, fmt.Errorf("watch: %w", err)
		}
		return api.WatchEvent{}, fmt.Errorf("watch: the core ended the stream: %w", io.EOF)
	}
	var ev api.WatchEvent
	if err := json.Unmarshal(ws.sc.Bytes(), &ev); err != nil {
		return api.WatchEvent{}, fmt.Errorf("watch: decode a line: %w", err)
	}
	return ev, nil
}

// Close ends the watch.
func (ws *WatchStream) Close() error { return ws.resp.Body.Close() }
