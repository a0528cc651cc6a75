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
	"sync"

	"github.com/carapace-dev/carapace/core/api"
)

// The proof on this machine over the control API:
//
//	POST /v1/prove ProveRequest    JSON lines of ProveEvent: a line per stage and
//	                               per check as it is done, the report last
//
// A request the core refuses before it starts (a bad side, a proof already
// running, a core shutting down) gets an ordinary error answer; once the
// lines have begun, a proof that cannot go on ends with an Error line.

// ProveBackend is what a Backend implements to prove its promises on this
// machine (core/prove). Prove calls progress, from the goroutine that
// called it, for each stage and check as it goes; errors wrap
// api.ErrInvalid or api.ErrConflict (a proof is already running, the core
// is stopping).
type ProveBackend interface {
	Prove(ctx context.Context, req api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error)
}

func (s *Server) registerProve(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/prove", s.handleProve)
}

func (s *Server) handleProve(w http.ResponseWriter, r *http.Request) {
	var req api.ProveRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.Check(); err != nil {
		s.writeError(w, r, err)
		return
	}
	pb, ok := s.b.(ProveBackend)
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w: this core cannot prove its promises", api.ErrNotFound))
		return
	}
	var (
		mu      sync.Mutex
		started bool
		broken  bool // the client went away: write nothing more
	)
	enc, rc := json.NewEncoder(w), http.NewResponseController(w)
	emit := func(ev api.ProveEvent) {
		mu.Lock()
		defer mu.Unlock()
		if broken {
			return
		}
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if enc.Encode(ev) != nil || rc.Flush() != nil {
			broken = true
		}
	}
	s.logger.Info("control: proof requested", "sides", req.Sides)
	report, err := pb.Prove(r.Context(), req, emit)
	mu.Lock()
	begun := started
	mu.Unlock()
	switch {
	case err != nil && !begun:
		s.writeError(w, r, err)
	case err != nil:
		s.logger.Warn("control: proof ended early", "err", err)
		emit(api.ProveEvent{Error: err.Error()})
	default:
		s.logger.Info("control: proof done", "checks", len(report.Checks), "failed", report.Failed())
		emit(api.ProveEvent{Report: &report})
	}
}

// Prove asks the core to prove its promises on this machine (POST
// /v1/prove). progress, if not nil, is called for each stage and each
// check as the core reports them; the report comes back at the end. The
// proof takes some seconds (it starts a plugin and a container): give ctx
// room.
func (c *Client) Prove(ctx context.Context, req api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return api.ProveReport{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/prove", bytes.NewReader(body))
	if err != nil {
		return api.ProveReport{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return api.ProveReport{}, c.mapError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return api.ProveReport{}, readAPIError(resp)
	}
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(resp.Body, maxResponse)))
	for {
		var ev api.ProveEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the core ended the proof without a report")
			}
			return api.ProveReport{}, fmt.Errorf("prove: %w", c.mapError(err))
		}
		switch {
		case ev.Report != nil:
			return *ev.Report, nil
		case ev.Error != "":
			return api.ProveReport{}, fmt.Errorf("prove: %s", ev.Error)
		case progress != nil:
			progress(ev)
		}
	}
}
