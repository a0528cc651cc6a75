package api

import (
	"fmt"
	"slices"
	"strings"
)

// The proof on this machine (`carapace doctor --prove`, POST /v1/prove):
// the running core starts a probe plugin under the confinement every
// plugin gets and an agent container built as every session's is, and
// each reports, from inside, whether a promise holds. Each check carries
// its positive control: the same kind of probe succeeding where it must,
// so that a probe that cannot work proves nothing.

// The two sides a proof runs.
const (
	ProveSidePlugin = "plugin" // a plugin's handler, confined by the operating system
	ProveSideBox    = "box"    // the agent's container
)

// ProveSides are the sides a ProveRequest may name, in the order they run.
var ProveSides = []string{ProveSidePlugin, ProveSideBox}

// ProveRequest asks the core for a proof.
type ProveRequest struct {
	// Sides are the sides to prove (ProveSides); empty means both.
	Sides []string `json:"sides,omitempty"`
}

// ProveCheck is one promise, as a probe found it from inside.
type ProveCheck struct {
	Name   string `json:"name"`   // the promise, for people: "no route out: a public IP"
	Side   string `json:"side"`   // ProveSidePlugin or ProveSideBox
	Passed bool   `json:"passed"` // the promise held and its control worked
	// Detail says what the probe tried and what happened (the error it
	// got, the value it read).
	Detail string `json:"detail"`
	// Control is the positive control: what worked in the same run, so
	// that the refusal above means something. A check whose control
	// failed has not passed.
	Control string `json:"control"`
}

// ProveReport is a whole proof.
type ProveReport struct {
	Engine string       `json:"engine,omitempty"` // the container engine the box ran on
	Checks []ProveCheck `json:"checks"`
}

// Failed counts the checks that did not pass.
func (r ProveReport) Failed() int {
	n := 0
	for _, c := range r.Checks {
		if !c.Passed {
			n++
		}
	}
	return n
}

// ProveEvent is one line of a proof's stream: a stage that begins, a
// check that is done, and last the report (or, if the proof could not
// go on, an error).
type ProveEvent struct {
	Stage  string       `json:"stage,omitempty"` // for people: "starting the probe plugin, confined"
	Check  *ProveCheck  `json:"check,omitempty"`
	Report *ProveReport `json:"report,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// Check refuses a request that names a side that does not exist, or one
// twice (ErrInvalid).
func (r ProveRequest) Check() error {
	seen := map[string]bool{}
	for _, s := range r.Sides {
		if !slices.Contains(ProveSides, s) {
			return fmt.Errorf("%w: side %.40q: the sides are %s", ErrInvalid, s, strings.Join(ProveSides, " and "))
		}
		if seen[s] {
			return fmt.Errorf("%w: side %s named twice", ErrInvalid, s)
		}
		seen[s] = true
	}
	return nil
}

// Wants reports whether the request asks for side.
func (r ProveRequest) Wants(side string) bool {
	return len(r.Sides) == 0 || slices.Contains(r.Sides, side)
}
