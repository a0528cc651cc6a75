package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/ipc"
)

// A container that floods the core with bad requests gets every one of
// them answered, but cannot rotate the audit log's history away: past a
// per-session budget, rejections are audited as a sample with a count.
func TestFloodOfRejectionsDoesNotFloodTheAuditLog(t *testing.T) {
	c := startCore(t, "[audit]\nrejections_per_minute = 60\n") // bursts of 10
	a, b := c.Session(t, "main"), c.Session(t, "main")
	hd := hostileNewDealer(t, a.Socket)
	const flood = 1500
	for i := 0; i < flood; i++ {
		r := hd.exchange(t, []byte(fmt.Sprintf(`{"topic":"tool.invoke.nope","correlation":"f%d","arguments":{}}`, i)))
		if e := r.Payload.Error; e == nil || e.Code != ipc.CodeUnknownTool {
			t.Fatalf("request %d: %+v, want UNKNOWN_TOOL", i, e)
		}
	}
	// The other session's rejections are audited in full.
	for i := 0; i < 5; i++ {
		wantError(t, runIPC(t, b.Socket, nil, "tool.invoke.nope"), ipc.CodeUnknownTool, 2, "")
	}
	// A second later, the next rejection in the flooded session is logged
	// with the count of those that were not.
	time.Sleep(1100 * time.Millisecond)
	hd.exchange(t, []byte(`{"topic":"tool.invoke.nope","correlation":"last","arguments":{}}`))

	count := func(session string) (n int, last audit.Entry) {
		for _, e := range c.Audit(t) {
			if e.Session == session && e.Stage == audit.StageTopic && e.Outcome == audit.OutcomeRejected {
				n++
				last = e
			}
		}
		return n, last
	}
	n, last := count(a.ID)
	if n < 10 || n > 20 {
		t.Fatalf("%d of %d rejections audited for the flooding session; want the budget (10) plus a few samples", n, flood+1)
	}
	if last.Correlation != "last" || !strings.Contains(last.Reason, "more rejections in this session not logged") {
		t.Fatalf("last entry %+v; want the count of unlogged rejections", last)
	}
	if nb, _ := count(b.ID); nb != 5 {
		t.Fatalf("other session: %d rejections audited, want 5", nb)
	}
}
