package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control/controltest"
)

// provingCore is the fake core with a proof that reports checks.
type provingCore struct {
	*controltest.Backend
	checks []api.ProveCheck
}

func (b *provingCore) Prove(_ context.Context, _ api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error) {
	progress(api.ProveEvent{Stage: "plugin: starting the probe plugin, confined"})
	for _, c := range b.checks {
		progress(api.ProveEvent{Check: &c})
	}
	return api.ProveReport{Engine: "docker", Checks: b.checks}, nil
}

func TestDoctorProve(t *testing.T) {
	pass := api.ProveCheck{Name: "box: no route out: a public IP", Side: "box", Passed: true,
		Detail: "TCP 1.1.1.1:443: network is unreachable", Control: "its own loopback listener answered"}
	fail := api.ProveCheck{Name: "box: not root", Side: "box", Detail: "uid 0", Control: "the core asked for 0:0"}
	tests := []struct {
		name           string
		checks         []api.ProveCheck
		args           []string
		code           int
		stdout, stderr []string
	}{
		{"every promise held", []api.ProveCheck{pass}, nil, 0,
			[]string{"PASS  box: no route out: a public IP\n      tried:   TCP 1.1.1.1:443: network is unreachable\n      control: its own loopback listener answered\n", "all 1 promises held"},
			[]string{"This takes some seconds", "… plugin: starting the probe plugin, confined"}},
		{"a broken promise fails doctor", []api.ProveCheck{pass, fail}, nil, 1,
			[]string{"PASS  box: no route out", "FAIL  box: not root\n      tried:   uid 0\n", "1 of 2 promises did NOT hold"}, nil},
		{"as JSON, the report", []api.ProveCheck{pass, fail}, []string{"--json"}, 1, []string{`"engine": "docker"`}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := controltest.TempHome(t)
			controltest.Start(t, &provingCore{Backend: controltest.NewBackend(h), checks: tc.checks}, h.ControlSocket())
			r := carapace(t, h, append([]string{"doctor", "--prove"}, tc.args...)...)
			r.want(t, tc.code, tc.stdout, tc.stderr)
			if len(tc.args) > 0 {
				var rep api.ProveReport
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Checks) != len(tc.checks) {
					t.Errorf("--json: %v %+v\n%s", err, rep, r.stdout)
				}
				if strings.Contains(r.stderr, "seconds") {
					t.Errorf("--json printed the introduction: %s", r.stderr)
				}
			}
		})
	}
}

func TestDoctorProveNeedsTheCore(t *testing.T) {
	h := controltest.TempHome(t)
	r := carapace(t, h, "doctor", "--prove")
	r.want(t, 1, nil, []string{"no core is running", "the proof runs in the core"})
	r = carapace(t, h, "doctor", "--prove", "--online")
	if r.code == 0 || !strings.Contains(r.stderr, "none of the others can be") {
		t.Errorf("--prove with --online: %+v", r)
	}
}
