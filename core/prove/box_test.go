package prove

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/carapace-dev/carapace/core/agent"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/prove/boxprobe"
)

// judged runs judgeBox on observations and returns the checks by name.
func judged(t *testing.T, b *preparedBox, res agent.ProbeResult, obs []boxprobe.Observation) map[string]api.ProveCheck {
	t.Helper()
	out := map[string]api.ProveCheck{}
	r := &run{stage: func(string) {}, check: func(c api.ProveCheck) { out[c.Name] = c }}
	(&Prover{}).judgeBox(r, b, res, obs)
	if len(out) != 8 {
		t.Fatalf("%d checks judged, want 8", len(out))
	}
	return out
}

// goodBox is a box that keeps every promise, as Docker's does: what the
// probe would report, and what the core would have counted.
func goodBox(t *testing.T) (*preparedBox, agent.ProbeResult, []boxprobe.Observation) {
	ws := t.TempDir()
	b := &preparedBox{canary: "sk-ant-carapace-prove-canary-n1", workspace: ws, controls: []string{"172.17.0.1"}, accepted: []string{"172.17.0.1:5000"}}
	b.datagram.Store(1)
	b.plan = boxprobe.Plan{Nonce: "n1", PublicTCP: []string{"1.1.1.1:443"}, PublicUDP: []string{"1.1.1.1:53"},
		HostTCP: []string{"172.17.0.1:9"}, HostUDP: []string{"172.17.0.1:10"}, Names: []string{"example.com"},
		ModelTCP: []string{"api.anthropic.com:443"}, Writable: []string{"/workspace"}, ReadOnly: []string{"/"}}
	if err := os.WriteFile(filepath.Join(ws, ".carapace-probe-n1"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreachable := "connect: network is unreachable"
	obs := []boxprobe.Observation{
		{Probe: boxprobe.ProbeRelay, Target: "127.0.0.1:8377", OK: true, Value: "HTTP/1.1 403 Forbidden"},
		{Probe: boxprobe.ProbeLoopbackTCP, Target: "127.0.0.1:4000", OK: true},
		{Probe: boxprobe.ProbeLoopbackDNS, Target: "127.0.0.1:4001", OK: true},
		{Probe: boxprobe.ProbeTCP, Target: "1.1.1.1:443", Error: unreachable},
		{Probe: boxprobe.ProbeTCP, Target: "172.17.0.1:9", Error: unreachable},
		{Probe: boxprobe.ProbeTCP, Target: "api.anthropic.com:443", Error: "lookup api.anthropic.com: " + unreachable},
		{Probe: boxprobe.ProbeUDP, Target: "1.1.1.1:53", Error: unreachable},
		{Probe: boxprobe.ProbeUDP, Target: "172.17.0.1:10", Error: unreachable},
		{Probe: boxprobe.ProbeResolve, Target: "example.com", Error: "lookup example.com: " + unreachable},
		{Probe: boxprobe.ProbeWrite, Target: "/workspace", OK: true, Value: "/workspace/.carapace-probe-n1"},
		{Probe: boxprobe.ProbeWrite, Target: "/", Error: "open /.carapace-probe-n1: read-only file system"},
		{Probe: boxprobe.ProbeStatus, OK: true, Value: "uid=1000 gid=1000 euid=1000 CapEff=0000000000000000 CapPrm=0000000000000000 CapInh=0000000000000000 CapBnd=0000000000000000 CapAmb=0000000000000000 NoNewPrivs=1 Seccomp=2"},
		{Probe: boxprobe.ProbeChownOther, Error: "chown: operation not permitted", Value: "to uid 1001"},
		{Probe: boxprobe.ProbeChownSelf, OK: true, Value: "to uid 1000"},
		{Probe: boxprobe.ProbeKey, Target: "/workspace/" + canaryFile, OK: true, Value: boxprobe.KeyHash(b.canary)},
		{Probe: boxprobe.ProbeScan, OK: true, Value: "its environment and 3 files"},
	}
	return b, agent.ProbeResult{User: "1000:1000", ModelRequests: 1}, obs
}

func TestJudgeBox(t *testing.T) {
	set := func(probe, target string, o boxprobe.Observation) func([]boxprobe.Observation) []boxprobe.Observation {
		return func(obs []boxprobe.Observation) []boxprobe.Observation {
			for i := range obs {
				if obs[i].Probe == probe && (target == "" || obs[i].Target == target) {
					o.Probe, o.Target = obs[i].Probe, obs[i].Target
					obs[i] = o
				}
			}
			return obs
		}
	}
	tests := []struct {
		name  string
		obs   func([]boxprobe.Observation) []boxprobe.Observation
		box   func(*preparedBox, *agent.ProbeResult)
		fails []string // the checks that must fail
	}{
		{name: "every promise kept"},
		{name: "a refused connection is a route", fails: []string{checkBoxPublic},
			obs: set(boxprobe.ProbeTCP, "1.1.1.1:443", boxprobe.Observation{Error: "connect: connection refused"})},
		{name: "a datagram that left", fails: []string{checkBoxPublic}, obs: set(boxprobe.ProbeUDP, "1.1.1.1:53", boxprobe.Observation{OK: true})},
		{name: "the loopback control failed", fails: []string{checkBoxPublic, checkBoxHost}, obs: set(boxprobe.ProbeLoopbackTCP, "", boxprobe.Observation{Error: "no"})},
		{name: "the host's listener got a connection from the box", fails: []string{checkBoxHost},
			box: func(b *preparedBox, _ *agent.ProbeResult) { b.accepted = append(b.accepted, "172.17.0.2:40000") }},
		{name: "the host's listener got a datagram", fails: []string{checkBoxHost}, box: func(b *preparedBox, _ *agent.ProbeResult) { b.datagram.Add(1) }},
		{name: "a name resolved", fails: []string{checkBoxDNS}, obs: set(boxprobe.ProbeResolve, "", boxprobe.Observation{OK: true, Value: "93.184.215.14"})},
		{name: "the DNS control failed", fails: []string{checkBoxDNS}, obs: set(boxprobe.ProbeLoopbackDNS, "", boxprobe.Observation{Error: "no query arrived"})},
		{name: "a root that is only not ours", fails: []string{checkBoxRootFS}, obs: set(boxprobe.ProbeWrite, "/", boxprobe.Observation{Error: "permission denied"})},
		{name: "a workspace write the host never saw", fails: []string{checkBoxRootFS},
			box: func(b *preparedBox, _ *agent.ProbeResult) { b.workspace = "/nonexistent" }},
		{name: "a capability", fails: []string{checkBoxCaps}, obs: set(boxprobe.ProbeStatus, "", boxprobe.Observation{OK: true,
			Value: "uid=1000 gid=1000 euid=1000 CapEff=0000000000000001 CapPrm=0000000000000001 CapAmb=0000000000000000"})},
		{name: "chown to another uid worked", fails: []string{checkBoxCaps}, obs: set(boxprobe.ProbeChownOther, "", boxprobe.Observation{OK: true})},
		{name: "root", fails: []string{checkBoxNotRoot}, obs: set(boxprobe.ProbeStatus, "", boxprobe.Observation{OK: true,
			Value: "uid=0 gid=0 euid=0 CapEff=0000000000000000 CapPrm=0000000000000000 CapAmb=0000000000000000"}),
			box: func(_ *preparedBox, r *agent.ProbeResult) { r.User = "0:0" }},
		{name: "not the user the core asked for", fails: []string{checkBoxNotRoot}, box: func(_ *preparedBox, r *agent.ProbeResult) { r.User = "1001:1001" }},
		{name: "a key besides the canary", fails: []string{checkBoxNoKey}, obs: func(obs []boxprobe.Observation) []boxprobe.Observation {
			return append(obs, boxprobe.Observation{Probe: boxprobe.ProbeKey, Target: "environment ANTHROPIC_API_KEY", OK: true, Value: "ab"})
		}},
		{name: "the canary not found", fails: []string{checkBoxNoKey}, obs: set(boxprobe.ProbeKey, "", boxprobe.Observation{Value: "other"})},
		{name: "a scan cut short", fails: []string{checkBoxNoKey}, obs: set(boxprobe.ProbeScan, "", boxprobe.Observation{Error: "stopped"})},
		{name: "the model host reached directly", fails: []string{checkBoxModel}, obs: set(boxprobe.ProbeTCP, "api.anthropic.com:443", boxprobe.Observation{OK: true})},
		{name: "the relay did not answer", fails: []string{checkBoxModel}, obs: set(boxprobe.ProbeRelay, "", boxprobe.Observation{Error: "refused"})},
		{name: "an answer the proxy never saw", fails: []string{checkBoxModel}, box: func(_ *preparedBox, r *agent.ProbeResult) { r.ModelRequests = 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, res, obs := goodBox(t)
			if tc.obs != nil {
				obs = tc.obs(obs)
			}
			if tc.box != nil {
				tc.box(b, &res)
			}
			checks := judged(t, b, res, obs)
			for name, c := range checks {
				want := !slices.Contains(tc.fails, name)
				if c.Passed != want {
					t.Errorf("%s: passed=%v, want %v: %s [control: %s]", name, c.Passed, want, c.Detail, c.Control)
				}
			}
		})
	}
}
