package tasks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// The agent's tools: schedule_task (high risk: the user approves the
// schedule, in words, with its next three fires), list_tasks and
// cancel_task, each on the calling session's group only. A session the
// scheduler started cannot create or cancel tasks: a task must not breed
// tasks behind the user's back. cancel_task is low risk for the tasks the
// agent made (under the user's approval), but a task the user made is
// cancelled only through a confirmation that says so: the agent cannot
// destroy the user's things quietly. Either way the task is removed, not
// deleted: it stays, with its runs, for carapace tasks history.

// OriginTask is the origin of the sessions the scheduler's events start
// (agent.Runner's SessionOrigin): not a plugin name, which has no slash.
const OriginTask = "core/tasks"

// Tools serves the agent's task tools.
type Tools struct {
	Scheduler *Scheduler
	// Origin names what started session id (OriginTask for a scheduled
	// session).
	Origin func(session string) string
}

var _ catalog.Invoker = (*Tools)(nil)

var toolSchemas = []struct{ name, risk, desc, schema string }{
	{"schedule_task", manifest.RiskHigh,
		"Schedule a prompt for this group's agent, after the user approves: kind cron (5 fields or @daily…), every (a duration of at least 1s, e.g. 90m) or at (one time: 2026-12-24 18:00 read in zone, or RFC 3339), in an IANA zone (default UTC). Each fire starts a session with the prompt.",
		`{"type":"object","additionalProperties":false,"required":["kind","expr","prompt"],"properties":{
			"kind":{"type":"string","enum":["cron","every","at"]},
			"expr":{"type":"string","minLength":1,"maxLength":200},
			"zone":{"type":"string","maxLength":64},
			"misfire":{"type":"string","enum":["catch-up-once","skip"]},
			"prompt":{"type":"string","minLength":1,"maxLength":32768}}}`},
	{"list_tasks", manifest.RiskLow,
		"List this group's scheduled tasks: id, schedule in words, next fire, and how the last run went.",
		`{"type":"object","additionalProperties":false,"properties":{}}`},
	{"cancel_task", manifest.RiskLow,
		"Cancel one of this group's scheduled tasks by its id (list_tasks): it fires no more, and is kept with its history. A task the user made (creator user) is cancelled only if the user approves.",
		`{"type":"object","additionalProperties":false,"required":["id"],"properties":{
			"id":{"type":"string","pattern":"^t-[a-z0-9]{1,32}$"}}}`},
}

// CatalogTools returns the catalogue entries of the task tools.
func (t *Tools) CatalogTools() ([]*catalog.Tool, error) {
	var out []*catalog.Tool
	for _, d := range toolSchemas {
		s, err := catalog.CompileSchema("core/"+d.name, json.RawMessage(d.schema))
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", d.name, err)
		}
		tool := &catalog.Tool{Name: d.name, Plugin: "core", Description: d.desc, RiskLevel: d.risk, Schema: s, RawSchema: json.RawMessage(d.schema), Handler: t}
		switch d.name {
		case "schedule_task":
			tool.Check = t.checkSchedule
		case "cancel_task":
			tool.Check = t.checkCancel
		}
		out = append(out, tool)
	}
	return out, nil
}

// errScheduled refuses a scheduled session's changes to tasks.
var errScheduled = fmt.Errorf("%w: a session started by a scheduled task cannot create, change or cancel tasks; ask the user to do it (carapace tasks)", catalog.ErrNotAllowed)

func (t *Tools) fromTask(ctx context.Context) (*session.Session, error) {
	s, ok := session.FromContext(ctx)
	if !ok {
		return nil, errors.New("task tools need a session")
	}
	if t.Origin != nil && t.Origin(s.ID) == OriginTask {
		return nil, errScheduled
	}
	return s, nil
}

// checkCancel refuses a scheduled session, and puts the cancellation of
// a task the user made to the user, saying whose task it is, its schedule
// and the head of its prompt. A task the agent made (under an approval)
// is the agent's to cancel; an id of no task of the group is left for
// Invoke to refuse, without asking anyone.
func (t *Tools) checkCancel(ctx context.Context, call catalog.Call) (catalog.Verdict, error) {
	s, err := t.fromTask(ctx)
	if err != nil {
		return catalog.Verdict{}, err
	}
	id, _ := call.Args["id"].(string)
	st, err := t.Scheduler.Get(ctx, id)
	if err != nil || st.Task.Group != s.Group || !st.Task.Removed.At.IsZero() || st.Task.Creator == CreatorAgent {
		return catalog.Verdict{}, nil
	}
	return catalog.Verdict{Summary: cancelSummary(st.Task), Confirm: true}, nil
}

// promptHead is how much of a task's prompt a cancellation's summary
// quotes, in runes.
const promptHead = 200

// cancelSummary says, for the user, what cancelling the user's task t
// removes.
func cancelSummary(t *Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Cancel task %s, made by the user on %s, for group %s", t.ID, t.CreatedAt.UTC().Format("2006-01-02 15:04 MST"), t.Group)
	if sched, err := Compile(t.Spec, time.Time{}); err == nil {
		fmt.Fprintf(&b, "\nSchedule: %s", sched.Describe())
	} else {
		fmt.Fprintf(&b, "\nSchedule: %s %q (%s)", t.Spec.Kind, t.Spec.Expr, cmp.Or(t.Spec.Zone, "UTC"))
	}
	// The summary travels where the arguments do (a phone's notification,
	// Telegram): the prompt's head is sanitised like them. It is not what
	// runs (the id is), so a redaction hides nothing the user approves.
	head, _ := sanitize.String(textutil.OneLine(t.Prompt))
	if n := utf8.RuneCountInString(head); n > promptHead {
		head = string([]rune(head)[:promptHead]) + fmt.Sprintf("… (%d characters in all: carapace tasks show %s)", utf8.RuneCountInString(t.Prompt), t.ID)
	}
	fmt.Fprintf(&b, "\nPrompt: %s", head)
	b.WriteString("\nIt would fire no more; it is kept, with its runs, in carapace tasks history.")
	return b.String()
}

// newTask reads schedule_task's arguments for session s, asked for at
// received.
func newTask(s *session.Session, args map[string]any, received time.Time) NewTask {
	str := func(k string) string { v, _ := args[k].(string); return v }
	return NewTask{Group: s.Group, Spec: Spec{Kind: Kind(str("kind")), Expr: str("expr"), Zone: str("zone")}, Prompt: str("prompt"),
		Misfire: str("misfire"), Creator: CreatorAgent, CreatorSession: s.ID, Anchor: received}
}

// checkSchedule validates schedule_task's arguments and says the schedule
// in words, with its next three fires after the call reached the core,
// for the confirmation. Invoke anchors the task at that same instant, so
// that these are the fires that happen.
func (t *Tools) checkSchedule(ctx context.Context, call catalog.Call) (catalog.Verdict, error) {
	s, err := t.fromTask(ctx)
	if err != nil {
		return catalog.Verdict{}, err
	}
	nt := newTask(s, call.Args, call.Received)
	now := call.Received
	sched, err := Check(nt, now)
	if err != nil {
		return catalog.Verdict{}, err
	}
	fires := sched.NextN(now, 3)
	seconds := false
	for _, f := range fires {
		seconds = seconds || !f.Truncate(time.Minute).Equal(f)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Schedule for group %s: %s", s.Group, sched.Describe())
	if nt.Spec.Kind == KindEvery {
		fmt.Fprintf(&b, ", counted from %s (when this was asked)", anchorOf(nt, now).In(sched.Location()).Format(fireLayout(true)))
	}
	if len(fires) == 0 {
		b.WriteString("\nIt will not fire.")
	}
	for _, f := range fires {
		fmt.Fprintf(&b, "\nNext: %s", f.In(sched.Location()).Format(fireLayout(seconds)))
	}
	return catalog.Verdict{Summary: b.String()}, nil
}

// Invoke implements catalog.Invoker.
func (t *Tools) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	s, ok := session.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("tool %s called without a session", req.Tool)
	}
	switch req.Tool {
	case "schedule_task":
		if _, err := t.fromTask(ctx); err != nil {
			return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: err.Error()}
		}
		nt := newTask(s, req.Arguments, req.Time)
		nt.CreatorConfirmation = confirm.ApprovalFrom(ctx)
		task, err := t.Scheduler.Add(ctx, nt)
		if err != nil {
			return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: err.Error()}
		}
		return t.view(ctx, task.ID)
	case "list_tasks":
		sts, err := t.Scheduler.List(ctx)
		if err != nil {
			return nil, err
		}
		list := []any{}
		for _, st := range sts {
			if st.Task.Group == s.Group {
				list = append(list, statusView(st))
			}
		}
		return map[string]any{"tasks": list}, nil
	case "cancel_task":
		if _, err := t.fromTask(ctx); err != nil {
			return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: err.Error()}
		}
		id, _ := req.Arguments["id"].(string)
		st, err := t.ownTask(ctx, s.Group, id)
		if err != nil {
			return nil, err
		}
		// The user's task only under the approval its Check asked for;
		// the pipeline's stage 5 gave it, so its absence is a core bug,
		// and the task stays.
		approval := confirm.ApprovalFrom(ctx)
		if st.Task.Creator != CreatorAgent && approval == "" {
			return nil, fmt.Errorf("cancel_task of the user's task %s reached its handler without the user's approval", id)
		}
		if err := t.Scheduler.Remove(ctx, id, Removal{By: CreatorAgent, Session: s.ID, Confirmation: approval}); err != nil {
			return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: err.Error()}
		}
		return map[string]any{"cancelled": id}, nil
	}
	return nil, fmt.Errorf("unknown task tool %s", req.Tool)
}

// ownTask returns live task id of group; it refuses a task of another
// group as if it did not exist, and a removed one as removed.
func (t *Tools) ownTask(ctx context.Context, group, id string) (Status, error) {
	st, err := t.Scheduler.Get(ctx, id)
	switch {
	case errors.Is(err, ErrNoTask) || err == nil && st.Task.Group != group:
		return Status{}, &plugin.ToolError{Code: "HANDLER_ERROR", Message: fmt.Sprintf("no task %s in this group (list_tasks)", id)}
	case err != nil:
		return Status{}, err
	case !st.Task.Removed.At.IsZero():
		return Status{}, &plugin.ToolError{Code: "HANDLER_ERROR", Message: fmt.Sprintf("task %s was already cancelled", id)}
	}
	return st, nil
}

func (t *Tools) view(ctx context.Context, id string) (map[string]any, error) {
	st, err := t.Scheduler.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return statusView(st), nil
}

// statusView is a task as the agent sees it.
func statusView(st Status) map[string]any {
	t := st.Task
	v := map[string]any{"id": t.ID, "kind": string(t.Spec.Kind), "expr": t.Spec.Expr, "zone": cmp.Or(t.Spec.Zone, "UTC"),
		"prompt": t.Prompt, "enabled": t.Enabled, "creator": t.Creator}
	if t.CreatorConfirmation != "" {
		v["approved_by_confirmation"] = t.CreatorConfirmation
	}
	if sched, err := Compile(t.Spec, time.Time{}); err == nil {
		v["schedule"] = sched.Describe()
	}
	if !st.Next.IsZero() {
		v["next"] = st.Next.UTC().Format(time.RFC3339)
	}
	if t.PausedReason != "" {
		v["paused_reason"] = t.PausedReason
	}
	if r := st.Last; r != nil {
		last := map[string]any{"scheduled": r.Scheduled.UTC().Format(time.RFC3339), "state": r.State}
		if r.Reason != "" {
			last["reason"] = r.Reason
		}
		v["last"] = last
	}
	return v
}

// fireLayout is how a confirmation writes a fire time: to the minute, or
// (seconds) to the second and its fraction.
func fireLayout(seconds bool) string {
	if seconds {
		return "Mon 2006-01-02 15:04:05.999 MST"
	}
	return "Mon 2006-01-02 15:04 MST"
}
