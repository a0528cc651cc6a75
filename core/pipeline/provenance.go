package pipeline

import (
	"fmt"
	"strconv"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/provenance"
	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// reasons are why the call must wait for the user although its tool may
// be low-risk (docs/SECURITY.md, "Provenance and taint"): each of the
// tool's URL arguments the session was not given, and, for an egress tool,
// the session's taint. A reason names an argument, never quotes it: the
// arguments are shown beside it, whole or with what the sanitiser hides
// said so (core/confirm's Display), and a reason must not show what the
// display hides.
func reasons(c *call, args map[string]any) []string {
	pv := c.s.Provenance
	if pv == nil { // a session always has one; fail closed all the same
		pv = provenance.New()
		pv.Taint(provenance.Taint{Source: "a session without provenance", Time: time.Now()})
	}
	var why []string
	for _, name := range c.tool.URLArgs {
		u, ok := args[name].(string)
		if !ok {
			continue // absent (optional), or not a string: the schema says string
		}
		if !pv.Given(u) {
			why = append(why, fmt.Sprintf("the URL in %s was not given: it is not in what you wrote, nor in an earlier result of this session; "+
				"it may carry data the agent put in it (read it whole below)", strconv.Quote(name)))
		}
	}
	if c.tool.Egress {
		if t, ok := pv.Tainted(); ok {
			why = append(why, t.Reason())
		}
	}
	return why
}

// received runs once the handler of a call has answered, before the
// answer is sent: a tool whose output is untrusted taints the session
// (audited the first time, with the tool and what it read), and the URLs
// in its result become given. Both happen before the agent can see the
// result, so that no call it builds from it slips through untainted. A
// handler's error taints too: it may quote what it read.
func (p *Pipeline) received(c *call, args map[string]any, res map[string]any) {
	if !c.tool.Untrusted {
		return
	}
	pv := c.s.Provenance
	if pv == nil {
		return // reasons treats such a session as tainted
	}
	source := "the result of " + c.tool.Name
	for _, name := range c.tool.URLArgs {
		if u, ok := args[name].(string); ok {
			if n, ok := provenance.Normalize(u); ok {
				source = n
			} else {
				source = u
			}
			break
		}
	}
	source, _ = sanitize.String(source)
	source = textutil.Clip(textutil.OneLine(source), 300)
	if pv.Taint(provenance.Taint{Tool: c.tool.Name, Source: source, Time: time.Now().UTC()}) {
		if err := p.write(c, &audit.Entry{Stage: audit.StageTaint, Outcome: audit.OutcomeTainted, Source: c.tool.Plugin,
			Reason: "session tainted: " + c.tool.Name + " returned untrusted content from " + source + "; its egress calls now wait for the user"}); err != nil {
			p.log.Error("audit log unwritable: a session's taint is not recorded", "err", err, "session", c.s.ID)
		}
		p.log.Info("session tainted by untrusted content", "session", c.s.ID, "tool", c.tool.Name, "source", source)
	}
	if res != nil {
		if dropped := pv.GiveValue(map[string]any(res)); dropped > 0 {
			p.log.Warn("provenance store full: URLs of a result are not given (their calls will wait for the user)", "session", c.s.ID, "tool", c.tool.Name, "dropped", dropped)
		}
	}
}
