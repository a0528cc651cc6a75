package control

import (
	"bufio"
	"context"
	"encoding/json"
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
// The changes come from the core's event bus, subscribed before the
// snapshot is taken, so nothing falls between them (a change may show in
// both; apply them as states, not as deltas). A reader that falls behind is
// cut off — an "end" line if it can still be written, else the connection
// closes — and never slows the core: watch again. Unknown types are for
// newer cores: skip them.

// Watch is a watch a Backend started.
type Watch struct {
	Snapshot api.WatchEvent        // the first line
	Events   <-chan api.WatchEvent // the changes; closed when the watch ends
	// Ended says, once Events is closed, why the core ended the watch
	// ("" when it did not).
	Ended func() string
	// Close ends the watch; the server calls it when the stream ends.
	Close func()
}

// watchWriteTimeout bounds writing one line: a reader that takes longer
// is cut off.
const watchWriteTimeout = 10 * time.Second

func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	wt, err := s.b.Watch(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer wt.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	write := func(ev api.WatchEvent) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		if err := enc.Encode(ev); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	end := func(why string) { write(api.WatchEvent{Type: api.WatchEnd, Time: time.Now().UTC(), Error: why}) }
	if !write(wt.Snapshot) {
		return
	}
	for {
		select {
		case ev, ok := <-wt.Events:
			if !ok {
				if why := wt.Ended(); why != "" {
					s.logger.Info("control: watch ended by the core", "why", why)
					end(why)
				}
				return
			}
			if !write(ev) {
				s.logger.Info("control: watcher cut off: it did not read a line within the write timeout", "timeout", watchWriteTimeout)
				return
			}
		case <-r.Context().Done():
			return
		case <-s.done:
			end("the core is stopping")
			return
		}
	}
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
