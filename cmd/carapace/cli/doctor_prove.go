package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
)

// proveTimeout bounds a whole proof: a plugin's start and probes, a
// container's start (an engine that must boot a VM first, on a Mac, takes
// the longest) and its probes.
const proveTimeout = 6 * time.Minute

// proveIntro is what doctor --prove says before it starts, so that nobody
// wonders what the pause is.
const proveIntro = `Proving on this machine: the running core starts a probe plugin under
the confinement every plugin gets, and a container built as every agent
session's is, and each tries from inside what the core promises it cannot
do, beside a control that must work. This takes some seconds.
`

// prove asks the running core for the proof and prints one line per
// promise, PASS or FAIL, with what was tried and its positive control.
// It returns how many checks failed.
func (a *app) prove(ctx context.Context, out, progress io.Writer, asJSON bool) (int, error) {
	c, _, err := a.client()
	if err != nil {
		return 0, err
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, proveTimeout)
	defer cancel()
	if !asJSON {
		fmt.Fprint(progress, proveIntro)
	}
	rep, err := c.Prove(ctx, api.ProveRequest{}, func(ev api.ProveEvent) {
		if ev.Stage != "" && !asJSON {
			fmt.Fprintf(progress, "  … %s\n", printable(ev.Stage))
		}
		if ev.Check != nil && !asJSON {
			printProveCheck(out, *ev.Check)
		}
	})
	if errors.Is(err, control.ErrNotRunning) {
		return 0, fmt.Errorf("%w: the proof runs in the core, which owns the engine, the model API proxy and the plugins", err)
	}
	if err != nil {
		return 0, err
	}
	if asJSON {
		return rep.Failed(), writeJSON(out, rep)
	}
	if n := rep.Failed(); n > 0 {
		fmt.Fprintf(out, "%d of %d promises did NOT hold on this machine (FAIL above: what was tried, and the control that worked or not)\n", n, len(rep.Checks))
	} else {
		fmt.Fprintf(out, "all %d promises held on this machine, each beside a control that worked\n", len(rep.Checks))
	}
	return rep.Failed(), nil
}

// printProveCheck prints one check: PASS or FAIL and the promise, then
// what the probe tried and its control.
func printProveCheck(w io.Writer, c api.ProveCheck) {
	status := "FAIL"
	if c.Passed {
		status = "PASS"
	}
	fmt.Fprintf(w, "%s  %s\n", status, printable(c.Name))
	fmt.Fprintf(w, "      tried:   %s\n", printable(c.Detail))
	fmt.Fprintf(w, "      control: %s\n", printable(c.Control))
}
