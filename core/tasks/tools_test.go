package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
)

// shownFires reads the "Next: " lines of a schedule_task confirmation.
func shownFires(t *testing.T, summary string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, line := range strings.Split(summary, "\n") {
		text, ok := strings.CutPrefix(line, "Next: ")
		if !ok {
			continue
		}
		f, err := time.Parse(fireLayout(true), text)
		if err != nil {
			if f, err = time.Parse(fireLayout(false), text); err != nil {
				t.Fatalf("a fire the confirmation shows does not parse: %q: %v", text, err)
			}
		}
		out = append(out, f.UTC())
	}
	return out
}

// firesUntil runs the scheduler on its fake clock until end, each run
// ending ok at once, and returns the scheduled times of what it fired.
func (e *env) firesUntil(end time.Time) []time.Time {
	var out []time.Time
	for {
		wake := e.s.Tick(e.t.Context())
		for _, o := range e.fire.fired()[len(out):] {
			out = append(out, o.Scheduled.UTC())
			if err := e.s.Finished(e.t.Context(), o.Run, nil); err != nil {
				e.t.Fatal(err)
			}
		}
		if wake.IsZero() || wake.After(end) {
			return out
		}
		e.clock.Advance(wake.Sub(e.clock.Now()))
	}
}

// An every task the agent asks for fires at the times its confirmation
// showed, however long the user takes to approve: its slots count from
// when the call reached the core, not from the approval.
func TestApprovedEveryFiresAsShown(t *testing.T) {
	e := newEnv(t)
	e.clock.Advance(17*time.Second + 250*time.Millisecond) // off the minute
	tools := &Tools{Scheduler: e.s}
	sess := session.New("s-1", "main", "none")
	ctx := session.NewContext(t.Context(), sess)
	args := map[string]any{"kind": "every", "expr": "10m", "prompt": "check the build"}
	asked := e.clock.Now()

	v, err := tools.checkSchedule(ctx, catalog.Call{Args: args, Received: asked})
	if err != nil {
		t.Fatal(err)
	}
	shown := shownFires(t, v.Summary)
	if len(shown) != 3 || !strings.Contains(v.Summary, "counted from") {
		t.Fatalf("the confirmation shows %d fires and no anchor rule:\n%s", len(shown), v.Summary)
	}

	e.clock.Advance(4 * time.Minute) // the user takes four minutes to approve
	req := &plugin.Request{Tool: "schedule_task", Arguments: args, Group: sess.Group, Session: sess.ID, Time: asked}
	if _, err := tools.Invoke(confirm.NewContext(ctx, "c-approved"), req); err != nil {
		t.Fatal(err)
	}
	got := e.firesUntil(shown[2])
	if !sameTimes(got, shown) {
		t.Fatalf("the task fired at %v; its confirmation showed %v", got, shown)
	}
}

// When the user takes longer than a slot, the slots before the approval
// do not happen (the task did not exist), and the next ones keep the
// grid the confirmation showed: from when it was asked, not approved.
func TestApprovedEveryKeepsItsGrid(t *testing.T) {
	e := newEnv(t)
	tools := &Tools{Scheduler: e.s}
	sess := session.New("s-1", "main", "none")
	ctx := session.NewContext(t.Context(), sess)
	args := map[string]any{"kind": "every", "expr": "1m", "prompt": "check the build"}
	asked := e.clock.Now()
	e.clock.Advance(4*time.Minute + 30*time.Second)
	req := &plugin.Request{Tool: "schedule_task", Arguments: args, Group: sess.Group, Session: sess.ID, Time: asked}
	if _, err := tools.Invoke(confirm.NewContext(ctx, "c-approved"), req); err != nil {
		t.Fatal(err)
	}
	want := []time.Time{asked.Add(5 * time.Minute), asked.Add(6 * time.Minute)}
	if got := e.firesUntil(want[1]); !sameTimes(got, want) {
		t.Fatalf("fired at %v, want %v", got, want)
	}
}

// cancel_task puts the cancellation of the user's task to the user, with
// whose it is, its schedule and its prompt's head (cut, and sanitised like
// the arguments); the agent's own task, another group's, a removed one
// and an unknown id are not put to anyone. A scheduled session is refused.
func TestCancelAsksForTheUsersTask(t *testing.T) {
	e := newEnv(t)
	long := "Summarise my calendar " + strings.Repeat("and more ", 40) + " token: \"sk-ant-api03-" + strings.Repeat("A", 40) + "\""
	user, err := e.s.Add(t.Context(), NewTask{Group: "main", Spec: Spec{Kind: KindCron, Expr: "0 7 * * 1-5", Zone: "Europe/Berlin"}, Prompt: long})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := e.s.Add(t.Context(), NewTask{Group: "main", Spec: Spec{Kind: KindEvery, Expr: "1h"}, Prompt: "use sk-ant-api03-" + strings.Repeat("B", 40) + " to check"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := e.s.Add(t.Context(), NewTask{Group: "main", Spec: Spec{Kind: KindEvery, Expr: "1h"}, Prompt: "x", Creator: CreatorAgent, CreatorSession: "s-0", CreatorConfirmation: "c-0"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.s.Add(t.Context(), NewTask{Group: "family", Spec: Spec{Kind: KindEvery, Expr: "1h"}, Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := e.s.Add(t.Context(), NewTask{Group: "main", Spec: Spec{Kind: KindEvery, Expr: "1h"}, Prompt: "x"})
	if err != nil || e.s.Remove(t.Context(), gone.ID, Removal{By: CreatorUser}) != nil {
		t.Fatal(err)
	}
	scheduled := session.New("s-task", "main", "none")
	tools := &Tools{Scheduler: e.s, Origin: func(id string) string {
		if id == scheduled.ID {
			return OriginTask
		}
		return ""
	}}
	ctx := session.NewContext(t.Context(), session.New("s-1", "main", "none"))
	check := func(ctx context.Context, id string) (catalog.Verdict, error) {
		return tools.checkCancel(ctx, catalog.Call{Args: map[string]any{"id": id}, Received: e.clock.Now()})
	}
	v, err := check(ctx, user.ID)
	if err != nil || !v.Confirm {
		t.Fatalf("the user's task: %+v, %v; want it put to the user", v, err)
	}
	for _, want := range []string{"Cancel task " + user.ID + ", made by the user on 2026-11-23 06:00 UTC, for group main",
		`Schedule: cron "0 7 * * 1-5" (Europe/Berlin)`, "Prompt: Summarise my calendar and more", "(" + fmt.Sprint(len(long)) + " characters in all: carapace tasks show " + user.ID + ")"} {
		if !strings.Contains(v.Summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, v.Summary)
		}
	}
	if v, _ := check(ctx, secret.ID); !v.Confirm || strings.Contains(v.Summary, strings.Repeat("B", 40)) || !strings.Contains(v.Summary, "REDACTED") {
		t.Errorf("a secret in the prompt's head is not redacted (positive control: it is there to find):\n%s", v.Summary)
	}
	for _, id := range []string{agent.ID, other.ID, gone.ID, "t-nothere"} {
		if v, err := check(ctx, id); err != nil || v.Confirm || v.Summary != "" {
			t.Errorf("%s: %+v, %v; want no question", id, v, err)
		}
	}
	if _, err := check(session.NewContext(t.Context(), scheduled), agent.ID); !errors.Is(err, catalog.ErrNotAllowed) {
		t.Errorf("a scheduled session's cancel_task: %v", err)
	}
	// The handler refuses the user's task without the approval stage 5 gives.
	req := &plugin.Request{Tool: "cancel_task", Arguments: map[string]any{"id": user.ID}, Group: "main", Session: "s-1", Time: e.clock.Now()}
	if _, err := tools.Invoke(ctx, req); err == nil {
		t.Error("the user's task was cancelled without an approval")
	}
	if st, _ := e.s.Get(t.Context(), user.ID); !st.Task.Removed.At.IsZero() {
		t.Error("the refused cancellation removed the task")
	}
}
