package prove

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/agent"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/home"
)

func TestRunRefuses(t *testing.T) {
	p := New(Options{Home: home.Dir(t.TempDir())})
	if _, err := p.Run(context.Background(), api.ProveRequest{Sides: []string{"kernel"}}, nil); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("an unknown side: %v", err)
	}
	p.running.Lock()
	_, err := p.Run(context.Background(), api.ProveRequest{}, nil)
	p.running.Unlock()
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "already running") {
		t.Errorf("a second proof at once: %v", err)
	}
}

// noBox fails the test if the box side runs a container.
type noBox struct{ t *testing.T }

func (b noBox) RunProbe(context.Context, agent.Probe) (agent.ProbeResult, error) {
	b.t.Error("a container was started")
	return agent.ProbeResult{}, errors.New("no")
}

// A box side that cannot run is one failed check that says why and what
// to do, not an error and not a pass.
func TestBoxSideCannotRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no engine configured", Options{Engine: "none", Box: noBox{t}}, `runtime.engine = "none"`},
		{"no engine in this core", Options{Engine: "docker"}, "no container engine"},
		{"no probe beside the executable", Options{Engine: "docker", Box: noBox{t}}, "make build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Home = home.Dir(t.TempDir())
			rep, err := New(tc.o).Run(context.Background(), api.ProveRequest{Sides: []string{api.ProveSideBox}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Checks) != 1 || rep.Checks[0].Passed || rep.Checks[0].Name != checkBoxStarts || !strings.Contains(rep.Checks[0].Detail, tc.want) {
				t.Errorf("report %+v, want one failed %q naming %q", rep, checkBoxStarts, tc.want)
			}
		})
	}
}
