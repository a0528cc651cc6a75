package confirm

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Who hears of a confirmation. Each change of one — requested, then
// exactly one resolution: approved, denied, expired or withdrawn — is, in
// order, under the gate's lock:
//
//   - audited (Options.Audit, the core's audit log): requested with its
//     expiry, a decision with its surface and decider, an expiry, a
//     withdrawal with why. A new confirmation that cannot be audited is
//     refused; a resolution stands even if it cannot be.
//   - logged (Options.Logger): a new one at warning level, with the
//     command that approves it.
//   - published (Options.Publish, the core's event bus) as its
//     api.Confirmation — the one encoding of it on its way to every
//     surface: confirmation.requested, then confirmation.resolved. The
//     watch stream (`carapace watch`, the menu-bar app and its desktop
//     notifications) and the plugins granted the surface capability
//     (Telegram), each of the groups it may see, hear of it there.
//
// A decision refused (the wrong hash, already decided, hidden arguments)
// is audited too, by Decide; reading the arguments as they run, which the
// display may redact, by Raw.

// Auditor records audit entries: the core's audit log (core/audit's Log).
// Its Write must not wait long: it is called with the gate's lock held.
type Auditor interface {
	Write(e *audit.Entry) error
}

// Publisher puts a confirmation's changes on the core's event bus, under
// the plugin SDK's topics of that name. It must never wait: it is called
// with the gate's lock held.
type Publisher interface {
	// ConfirmationRequested publishes confirmation.requested.
	ConfirmationRequested(c api.Confirmation)
	// ConfirmationResolved publishes confirmation.resolved.
	ConfirmationResolved(c api.Confirmation)
}

// MaxEventArguments bounds the arguments a published confirmation carries
// (an event is at most 64 KiB); a larger one goes without them
// (api.Confirmation.ArgumentsOmitted), and surfaces fetch it.
const MaxEventArguments = 32 << 10

// MaxEventPreview bounds the preview a published confirmation carries; a
// larger one goes without it (api.Confirmation.PreviewOmitted), and
// surfaces fetch it. With the arguments, it keeps an event under 64 KiB.
const MaxEventPreview = 16 << 10

// record tells those who hear of c's change, in order (see above). Called
// with g.mu held. The error is the audit log's, for a new confirmation.
func (g *Gate) record(c Confirmation) error {
	e := &audit.Entry{Source: "core", Session: c.Session, Group: c.Group, Topic: "tool.invoke." + c.Tool, Correlation: c.Correlation,
		Stage: audit.StageConfirm, Confirmation: c.ID, PreviewDigest: c.PreviewDigest}
	log := g.opts.Logger
	switch c.Decision {
	case "":
		e.Outcome, e.Reason = audit.OutcomePending, "waits for the user until "+c.Expires.Format(time.RFC3339)
		for _, w := range c.Why {
			e.Reason += "; " + textutil.Clip(textutil.OneLine(w), 500)
		}
		log.Warn("confirmation required", "id", c.ID, "tool", c.Tool, "group", c.Group, "session", c.Session,
			"expires", c.Expires.Format(time.RFC3339), "approve", "carapace confirm approve "+api.ShortID(c.ID))
	case Approved, Denied:
		e.Outcome, e.Reason = string(c.Decision), "decided on "+c.Surface
		if c.Decider != "" {
			e.Reason += " by " + textutil.OneLine(c.Decider)
		}
		log.Info("confirmation "+string(c.Decision), "id", c.ID, "tool", c.Tool, "surface", c.Surface, "decider", c.Decider)
	case Expired:
		e.Outcome, e.Reason = audit.OutcomeExpired, "nobody answered before "+c.Expires.Format(time.RFC3339)
	default:
		e.Outcome, e.Reason = audit.OutcomeWithdrawn, c.Reason
	}
	if err := g.audit(e); err != nil && c.Pending() {
		return fmt.Errorf("audit the confirmation: %w", err)
	}
	if p := g.opts.Publish; p != nil {
		v := c.View()
		if len(v.Arguments) > MaxEventArguments {
			v.Arguments, v.ArgumentsOmitted = nil, true
		}
		if len(v.Preview) > MaxEventPreview {
			v.Preview, v.PreviewOmitted = "", true
		}
		if c.Pending() {
			p.ConfirmationRequested(v)
		} else {
			p.ConfirmationResolved(v)
		}
	}
	return nil
}

// audit writes e, if the gate has an audit log.
func (g *Gate) audit(e *audit.Entry) error {
	if g.opts.Audit == nil {
		return nil
	}
	return g.opts.Audit.Write(e)
}

// View is the control API's view of c, as surfaces show it.
func (c Confirmation) View() api.Confirmation {
	v := api.Confirmation{
		ID: c.ID, Tool: c.Tool, Group: c.Group, Session: c.Session, Correlation: c.Correlation, ArgsHash: c.ArgsHash,
		Arguments: json.RawMessage(c.Display), Summary: c.Summary, Why: c.Why, CreatedAt: c.Created, ExpiresAt: c.Expires,
		Preview: c.Preview, PreviewDigest: c.PreviewDigest,
		Decision: string(c.Decision), Surface: c.Surface, Decider: c.Decider, Reason: c.Reason,
	}
	if len(c.Display) == 0 {
		v.Arguments = nil
	}
	for _, h := range c.Hidden {
		v.Hidden = append(v.Hidden, api.Hidden{Path: h.Path, Kind: h.Kind, Chars: h.Chars})
	}
	if !c.Decided.IsZero() {
		t := c.Decided
		v.DecidedAt = &t
	}
	return v
}

// List returns the pending confirmations as the control API shows them,
// oldest first; with recent, also the resolved ones the gate remembers.
func (g *Gate) List(recent bool) []api.Confirmation {
	list := g.Pending()
	if recent {
		list = g.Recent()
	}
	out := make([]api.Confirmation, 0, len(list))
	for _, c := range list {
		out = append(out, c.View())
	}
	return out
}

// Decide applies one decision from a surface — the control API's or a
// plugin's: every decision goes through here — and returns the
// confirmation as it now stands. A decision refused (any but an unknown
// id) is audited. The errors wrap the control API's (api.ErrNotFound,
// api.ErrConflict, api.ErrInvalid) and this package's: ErrNotFound;
// ErrDecided when the confirmation is no longer pending (expired
// included); and, deciding nothing, ErrMismatch for a hash that is not
// the confirmation's, ErrHidden for an approval of a confirmation with
// Hidden values from a surface that did not show them (Raw), ErrInvalid
// for a decision without a hash.
func (g *Gate) Decide(d api.Decision) (api.Confirmation, error) {
	c, err := g.decide(d)
	if err == nil {
		return c.View(), nil
	}
	if !errors.Is(err, ErrNotFound) {
		g.refused(c, d, err)
	}
	var decided *ErrDecided
	switch {
	case errors.Is(err, ErrNotFound):
		return api.Confirmation{}, fmt.Errorf("%w: %w", api.ErrNotFound, err)
	case errors.Is(err, ErrHidden):
		return c.View(), fmt.Errorf("%w: %w: review them as they run with carapace confirm show --raw %s, and approve there with carapace confirm approve --raw %s",
			api.ErrConflict, err, api.ShortID(c.ID), api.ShortID(c.ID))
	case errors.As(err, &decided), errors.Is(err, ErrMismatch):
		return c.View(), fmt.Errorf("%w: %w", api.ErrConflict, err)
	case errors.Is(err, ErrInvalid):
		return api.Confirmation{}, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	return api.Confirmation{}, err
}

// refused audits and logs a decision on c that was refused with err.
func (g *Gate) refused(c Confirmation, d api.Decision, err error) {
	verb := "denial"
	if d.Approve {
		verb = "approval"
	}
	by := ""
	if d.Decider != "" {
		by = " by " + textutil.OneLine(d.Decider)
	}
	reason := fmt.Sprintf("%s on %s%s refused: %s", verb, d.Surface, by, textutil.OneLine(err.Error()))
	_ = g.audit(&audit.Entry{Source: "core", Session: c.Session, Group: c.Group, Topic: "tool.invoke." + c.Tool,
		Stage: audit.StageConfirm, Outcome: audit.OutcomeRejected, Confirmation: d.ID, Reason: textutil.Clip(reason, 1000)})
	g.opts.Logger.Info("confirmation decision refused", "id", d.ID, "surface", d.Surface, "err", err)
}

// Raw returns a pending confirmation as it runs: its view with the
// arguments and the preview exactly as they run, which its display may
// redact, and Raw set. Reading them is audited when the display hides
// something: they may hold a secret. The errors wrap api.ErrNotFound for
// an unknown id and api.ErrConflict once it is decided (they are kept
// only while it waits).
func (g *Gate) Raw(id string) (api.Confirmation, error) {
	c, ok := g.Get(id)
	switch {
	case !ok:
		return api.Confirmation{}, fmt.Errorf("%w: no confirmation %s", api.ErrNotFound, id)
	case !c.Pending():
		return api.Confirmation{}, fmt.Errorf("%w: confirmation %s is already decided (%s): its arguments are kept only while it waits", api.ErrConflict, id, c.Decision)
	}
	if len(c.Hidden) > 0 {
		_ = g.audit(&audit.Entry{Source: "core", Session: c.Session, Group: c.Group, Topic: "tool.invoke." + c.Tool,
			Stage: audit.StageConfirm, Outcome: audit.OutcomePending, Confirmation: c.ID,
			Reason: "the arguments as they run, which the display redacts, were shown on the control API"})
	}
	v := c.View()
	v.Arguments, v.ArgumentsOmitted, v.Raw = json.RawMessage(c.Arguments), false, true
	v.Preview, v.PreviewOmitted = c.PreviewRaw, false
	return v, nil
}
