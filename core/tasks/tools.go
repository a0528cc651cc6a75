package tasks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
)

// The agent's tools: schedule_task (high risk: the user approves the
// schedule, in words, with its next three fires), list_tasks and
// cancel_task, each on the calling session's group only. A session the
// scheduler started cannot create or cancel tasks: a task must not breed
// tasks behind the user's back.

// OriginTask is the origin of the sessions the scheduler's events start
// (agent.Runner's SessionOrigin): not a plugin name, which has no slash.
const OriginTask = "core/tasks"

// Tools serves the agent's task tools.
type Tools struct {
	Scheduler *Scheduler
	// Origin names what started session id (OriginTask for a scheduled
	// session).
	Origin func(session string) string
	// Now is the clock of the confirmation's next fires; nil is time.Now.
	Now func() time.Time
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
		"Cancel one of this group's scheduled tasks by its id (list_tasks): it is deleted with its history.",
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
			tool.Check = t.checkNotScheduled
		}
		out = append(out, tool)
	}
	return out, nil
}

func (t *Tools) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
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

func (t *Tools) checkNotScheduled(ctx context.Context, _ map[string]any) (string, error) {
	_, err := t.fromTask(ctx)
	return "", err
}

// newTask reads schedule_task's arguments for session s.
func newTask(s *session.Session, args map[string]any) NewTask {
	str := func(k string) string { v, _ := args[k].(string); return v }
	return NewTask{Group: s.Group, Spec: Spec{Kind: Kind(str("kind")), Expr: str("expr"), Zone: str("zone")}, Prompt: str("prompt"),
		Misfire: str("misfire"), Creator: CreatorAgent, CreatorSession: s.ID}
}

// checkSchedule validates schedule_task's arguments and says the schedule
// in words, with its next three fires, for the confirmation.
func (t *Tools) checkSchedule(ctx context.Context, args map[string]any) (string, error) {
	s, err := t.fromTask(ctx)
	if err != nil {
		return "", err
	}
	nt := newTask(s, args)
	now := t.now()
	sched, err := Check(nt, now)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Schedule for group %s: %s", s.Group, sched.Describe())
	fires := sched.NextN(now, 3)
	if len(fires) == 0 {
		b.WriteString("\nIt will not fire.")
	}
	for _, f := range fires {
		fmt.Fprintf(&b, "\nNext: %s", f.In(sched.Location()).Format("Mon 2006-01-02 15:04 MST"))
	}
	return b.String(), nil
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
		nt := newTask(s, req.Arguments)
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
		if err := t.ownTask(ctx, s.Group, id); err != nil {
			return nil, err
		}
		if err := t.Scheduler.Remove(ctx, id); err != nil {
			return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: err.Error()}
		}
		return map[string]any{"cancelled": id}, nil
	}
	return nil, fmt.Errorf("unknown task tool %s", req.Tool)
}

// ownTask refuses a task of another group as if it did not exist.
func (t *Tools) ownTask(ctx context.Context, group, id string) error {
	st, err := t.Scheduler.Get(ctx, id)
	if errors.Is(err, ErrNoTask) || err == nil && st.Task.Group != group {
		return &plugin.ToolError{Code: "HANDLER_ERROR", Message: fmt.Sprintf("no task %s in this group (list_tasks)", id)}
	}
	return err
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
