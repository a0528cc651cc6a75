package control_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
)

// proveBackend is the fake core with a proof: prove runs for each request.
type proveBackend struct {
	*controltest.Backend
	calls atomic.Int32
	prove func(req api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error)
}

func (b *proveBackend) Prove(_ context.Context, req api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error) {
	b.calls.Add(1)
	return b.prove(req, progress)
}

func TestProve(t *testing.T) {
	pass := api.ProveCheck{Name: "no route out: a public IP", Side: api.ProveSideBox, Passed: true, Detail: "refused", Control: "loopback worked"}
	fail := api.ProveCheck{Name: "not root", Side: api.ProveSideBox, Detail: "uid 0", Control: "uid read"}
	report := api.ProveReport{Engine: "docker", Checks: []api.ProveCheck{pass, fail}}
	tests := []struct {
		name      string
		req       api.ProveRequest
		prove     func(req api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error)
		wantCalls int
		want      []api.ProveEvent // what progress saw
		wantErr   error
		wantMsg   string
	}{
		{
			name: "stages and checks as they come, the report last",
			req:  api.ProveRequest{Sides: []string{api.ProveSideBox}},
			prove: func(req api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error) {
				if !reflect.DeepEqual(req.Sides, []string{api.ProveSideBox}) {
					return api.ProveReport{}, fmt.Errorf("sides %v", req.Sides)
				}
				progress(api.ProveEvent{Stage: "starting the box"})
				progress(api.ProveEvent{Check: &pass})
				progress(api.ProveEvent{Check: &fail})
				return report, nil
			},
			wantCalls: 1,
			want:      []api.ProveEvent{{Stage: "starting the box"}, {Check: &pass}, {Check: &fail}},
		},
		{
			name:    "an unknown side is refused before anything runs",
			req:     api.ProveRequest{Sides: []string{"kernel"}},
			wantErr: api.ErrInvalid, wantMsg: "plugin and box",
		},
		{
			name:    "a side named twice is refused",
			req:     api.ProveRequest{Sides: []string{"box", "box"}},
			wantErr: api.ErrInvalid, wantMsg: "twice",
		},
		{
			name: "refused before the first line: an ordinary error answer",
			prove: func(api.ProveRequest, func(api.ProveEvent)) (api.ProveReport, error) {
				return api.ProveReport{}, fmt.Errorf("a proof is already running: %w", api.ErrConflict)
			},
			wantCalls: 1, wantErr: api.ErrConflict, wantMsg: "already running",
		},
		{
			name: "a proof that cannot go on ends with its error",
			prove: func(_ api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error) {
				progress(api.ProveEvent{Stage: "starting the probe plugin"})
				return api.ProveReport{}, errors.New("the core is stopping")
			},
			wantCalls: 1, want: []api.ProveEvent{{Stage: "starting the probe plugin"}}, wantMsg: "the core is stopping",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := controltest.TempHome(t)
			b := &proveBackend{Backend: controltest.NewBackend(h), prove: tc.prove}
			controltest.Start(t, b, h.ControlSocket())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got []api.ProveEvent
			r, err := control.NewClient(h.ControlSocket()).Prove(ctx, tc.req, func(ev api.ProveEvent) { got = append(got, ev) })
			if n := b.calls.Load(); int(n) != tc.wantCalls {
				t.Errorf("Prove ran %d times, want %d", n, tc.wantCalls)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("progress %+v, want %+v", got, tc.want)
			}
			if tc.wantMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantMsg) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
					t.Fatalf("err %v, want %q (%v)", err, tc.wantMsg, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r, report) || r.Failed() != 1 {
				t.Errorf("report %+v (%d failed)", r, r.Failed())
			}
		})
	}
}

// A core that cannot prove answers 404, and the client says so.
func TestProveNotServed(t *testing.T) {
	f := newFixture(t)
	_, err := f.c.Prove(context.Background(), api.ProveRequest{}, nil)
	if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
}
