package loader

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// A plugin's group grant — config.toml's [plugins.NAME] allowed_groups,
// else its manifest's allowed_groups; none means every group — bounds all
// it does with groups, as it bounds its tools (the pipeline's stage 4):
//
//   - the events it publishes name one of its groups (PublishEvent
//     refuses any other, audited, with plugin.ErrGroupNotGranted); a
//     plugin granted some groups cannot publish an event of no group,
//     which would reach every subscriber;
//   - the events it receives are those of its groups and those of no
//     group: its bus subscription is scoped (events.Bus.SubscribeIn), and
//     so is its mailbox (mailbox.go), confirmations included;
//   - the confirmations a surface decides are its groups' (Decide);
//   - the tasks CoreStatus lists are its groups'.
//
// The conversations its events name are its own: core/agent derives a
// conversation's id from the publishing plugin, the group and the name,
// so that no plugin can resume another's.

// granted reports whether st may publish an event of group.
func (st *pluginState) granted(group string) bool {
	return len(st.groups) == 0 || slices.Contains(st.groups, group)
}

// refuseGroup audits that st published an event of a group it is not
// granted, and returns the error that says so.
func (l *Loader) refuseGroup(st *pluginState, ev *plugin.Event) error {
	group, topic := textutil.Clip(ev.Group, 64), textutil.Clip(ev.Topic, 128)
	_ = l.audit.Write(&audit.Entry{Source: st.name, Group: group, Topic: topic, Correlation: textutil.Clip(ev.Correlation, 128),
		Stage: audit.StageEvent, Outcome: audit.OutcomeRejected, Reason: "the plugin is not granted the event's group"})
	l.log.Warn("event refused: the plugin is not granted its group ([plugins."+st.name+"] allowed_groups)", "plugin", st.name, "topic", topic, "group", group)
	what := fmt.Sprintf("group %q", group)
	if group == "" {
		what = "an event of no group"
	}
	return fmt.Errorf("%w: %s is not granted %s; it is granted %s", plugin.ErrGroupNotGranted, st.name, what, strings.Join(st.groups, ", "))
}

// decidable refuses, audited, a decision of st on confirmation id when
// the confirmation is of a group st is not granted. An id the core does
// not know is the core's to refuse.
func (l *Loader) decidable(ctx context.Context, st *pluginState, core Core, id string) error {
	for _, c := range core.Confirmations(ctx, true) {
		if c.ID != id || st.granted(c.Group) {
			continue
		}
		_ = l.audit.Write(&audit.Entry{Source: st.name, Session: c.Session, Group: c.Group, Topic: "tool.invoke." + c.Tool, Confirmation: c.ID,
			Stage: audit.StageConfirm, Outcome: audit.OutcomeRejected, Reason: "decision refused: the surface is not granted the confirmation's group"})
		return fmt.Errorf("%w: %s is not granted group %q of confirmation %s; it is granted %s", plugin.ErrGroupNotGranted, st.name, c.Group, api.ShortID(c.ID), strings.Join(st.groups, ", "))
	}
	return nil
}
